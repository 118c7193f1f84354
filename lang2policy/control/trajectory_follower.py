"""Follow joint trajectories by linear interpolation in (simulated) time. Pure Python + numpy.

Semantics follow ros2_control's joint_trajectory_controller where it matters to callers:
a new trajectory replaces the running one and starts at reception, from the current target;
joints it does not name hold their current target; an empty trajectory cancels and holds the
current position. Before the first point the follower interpolates from the current target
to it; after the last point it holds the last point.

One opt-in difference (``queue`` > 0), for robots fed a stream of short commands: a trajectory
that arrives before the running one has reached its first point waits for that moment and then
starts from there, so a burst of commands (a late commander catching up, deliveries bunched on
a loaded machine, a simulated clock that stands still between two steps) is followed one after
the other at the pace each asks for, never compressed into the time of one. Replacing at once
would start the last of the burst from where the first began: a command stream stepping one
control period at a time would ask for two or three times its speed. At most ``queue``
trajectories wait; beyond that the oldest waiting one is skipped but keeps its time (the next
one's times grow by its first point's time), so a long burst loses waypoints, never pace. An
empty trajectory still cancels everything at once.

No ROS imports: this could live in the core (``lang2policy.control``) unchanged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np

from lang2policy.errors import InvalidCommandError

TrajectoryPoints = Sequence[tuple[float, Mapping[str, float]]]
# Trajectories that may wait (0.2 s of 20 ms steps): the sim node's, and the safety node's model
# of it (``lang2policy.safety.reference``).
STREAM_QUEUE = 10


class TrajectoryFollower:
    """Targets for the joints ``names`` (action order) at any time ``now`` (seconds)."""

    def __init__(self, names: Sequence[str], initial: np.ndarray, queue: int = 0) -> None:
        self.names = tuple(names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self._times = np.zeros(1)
        self._positions = self._vector(initial)[None, :]
        self._start = 0.0
        self.queue = int(queue)
        self._waiting: deque[TrajectoryPoints] = deque(maxlen=max(1, self.queue))
        self.dropped = 0  # waiting trajectories dropped because the queue was full

    def _vector(self, values: np.ndarray) -> np.ndarray:
        vector = np.array(values, dtype=float)
        if vector.shape != (len(self.names),):
            raise InvalidCommandError(
                f"expected {len(self.names)} values ({list(self.names)}), got shape {vector.shape}"
            )
        return vector

    def hold(self, positions: np.ndarray) -> None:
        """Cancel any trajectory (and any waiting one) and hold ``positions``."""
        self._times = np.zeros(1)
        self._positions = self._vector(positions)[None, :]
        self._waiting.clear()

    def start(self, now: float, points: TrajectoryPoints, current: np.ndarray) -> None:
        """Follow ``points`` from ``now``; with no points, cancel and hold ``current``.

        ``points`` are (time_from_start, {joint: position}) with non-decreasing times, as
        ``lang2policy.ros.convert.trajectory_points`` returns them (validated there). With a
        queue, they may wait until the running trajectory reaches its first point.
        """
        if not points:
            self.hold(current)
            return
        self._check_names(points)
        self._release(now)
        if self.queue and (self._waiting or self._before_first_point(now)):
            if len(self._waiting) == self._waiting.maxlen:
                self._skip_oldest()
            self._waiting.append(points)
            return
        self._begin(now, points)

    def _skip_oldest(self) -> None:
        """Drop the oldest waiting trajectory, giving the time to its first point to the next
        one, which would have started there: joint by joint the next one's first segment is
        then no faster than the two segments were one after the other."""
        skipped = self._waiting.popleft()
        self.dropped += 1
        if not self._waiting:
            return
        extra, first = _first_point(skipped)
        following = self._waiting.popleft()
        self._waiting.appendleft([(t + extra, {**first, **named}) for t, named in following])

    def waits(self, now: float) -> bool:
        """Whether a trajectory arriving at ``now`` would wait for the running one."""
        self._release(now)
        return bool(self.queue) and (bool(self._waiting) or self._before_first_point(now))

    def departure(self, now: float) -> np.ndarray:
        """Where a trajectory arriving at ``now`` starts from: the current target, or, if it
        has to wait, the first point of the last one before it."""
        if not self.waits(now):
            return self._interpolate(now)
        row = self._positions[1].copy()
        for points in self._waiting:
            for name, value in _first_point(points)[1].items():
                row[self._index[name]] = value
        return row

    def _check_names(self, points: TrajectoryPoints) -> None:
        for _, named in points:
            unknown = sorted(set(named) - set(self._index))
            if unknown:
                raise InvalidCommandError(f"unknown joints {unknown}; known: {list(self.names)}")

    def _begin(self, at: float, points: TrajectoryPoints) -> None:
        """Replace the running trajectory with ``points`` from time ``at``."""
        base = self._interpolate(at)
        times, rows = [0.0], [base]
        for t, named in points:
            row = rows[-1].copy()
            for name, value in named.items():
                row[self._index[name]] = value
            if t <= times[-1]:  # same time as the previous point: the later point wins
                rows[-1] = row
            else:
                times.append(float(t))
                rows.append(row)
        self._start = at
        self._times = np.array(times)
        self._positions = np.array(rows)

    def _before_first_point(self, now: float) -> bool:
        return len(self._times) > 1 and now - self._start < self._times[1]

    def _release(self, now: float) -> None:
        """Start the waiting trajectories whose turn has come by ``now``, each at the moment
        the one before it reached its first point."""
        while self._waiting and not self._before_first_point(now):
            at = self._start + self._times[1] if len(self._times) > 1 else now
            self._begin(min(at, now), self._waiting.popleft())

    def _interpolate(self, now: float) -> np.ndarray:
        t = now - self._start
        if len(self._times) == 1 or t >= self._times[-1]:
            return self._positions[-1].copy()
        return np.array(
            [np.interp(t, self._times, self._positions[:, j]) for j in range(len(self.names))]
        )

    def target(self, now: float) -> np.ndarray:
        """The interpolated target at ``now`` (the last point once the trajectory has ended)."""
        self._release(now)
        return self._interpolate(now)

    def next_point(self, now: float) -> np.ndarray | None:
        """The first point not reached yet at ``now`` (None once the trajectory has ended)."""
        self._release(now)
        ahead = np.flatnonzero(self._times > now - self._start)
        if len(self._times) == 1 or not ahead.size:
            return None
        return self._positions[ahead[0]].copy()

    def active(self, now: float) -> bool:
        """True while a trajectory is still moving (before its last point's time) or waits."""
        self._release(now)
        return bool(self._waiting) or (len(self._times) > 1 and now - self._start < self._times[-1])


def _first_point(points: TrajectoryPoints) -> tuple[float, dict[str, float]]:
    """Time of the first point after the start and the joint values the follower has there
    (points at the start, or at the same time, merge into it)."""
    named: dict[str, float] = {}
    for t, values in points:
        named.update(values)
        if t > 0:
            return float(t), named
    return 0.0, named
