"""Follow joint trajectories by linear interpolation in (simulated) time. Pure Python + numpy.

Semantics follow ros2_control's joint_trajectory_controller where it matters to callers:
a new trajectory replaces the running one and starts at reception, from the current target;
joints it does not name hold their current target. Before the first point the follower
interpolates from the current target to it; after the last point it holds the last point.

An empty trajectory cancels everything at once. A robot node passes it to ``stop`` with the
robot's ``Braking`` and its measured state: each moving joint decelerates, within its
acceleration limit, to rest and holds there, like joint_trajectory_controller's
decelerate-to-stop from the current state (ros2_controllers PR 2163); joints at rest hold their
targets. Holding the measured position at once, as robot nodes did, made a position servo that
lags its target while moving run past that point and come back (0.01 rad from 0.5 rad/s, 0.04
rad from 1.5 rad/s on the simulated SO-101). ``start`` with no points still holds the position
it is given, at once.

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

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError, InvalidCommandError
from lang2policy.scene.arm import GRIPPER
from lang2policy.scene.robot_description import RobotDescription

TrajectoryPoints = Sequence[tuple[float, Mapping[str, float]]]
# Trajectories that may wait (0.2 s of 20 ms steps): the sim node's, and the safety node's model
# of it (``lang2policy.safety.reference``).
STREAM_QUEUE = 10
# s between the points of a braking trajectory: linear interpolation of the braking cubic is then
# within deceleration x 0.01^2 / 8 of it (0.1 mrad at 10 rad/s^2).
BRAKING_SAMPLE = 0.01
# rad/s: a joint measured slower than this, whose command is at rest, is at rest (``stop``).
REST_SPEED = 0.05
# s: a trajectory's first segment this short, with more after it, is a streamed command's bridge
# from the target to its first point (two steps of a 50 Hz stream), not its speed (``velocity``).
BRIDGE = 0.04


@dataclass(frozen=True)
class Braking:
    """How a stop brings each joint (action order) to rest.

    ``deceleration``: per joint, the largest deceleration (units/s^2; inf: the joint stops at
    once, where its target is). ``tolerance``: per joint; a joint whose measured position is
    farther than this from its target holds the *measured* position instead (inf: never). That
    keeps the old safety intent where the target is not where the arm is (a blocked or
    overloaded arm, a joint pushed away): a hold must relax the arm where it is, never drive it
    toward an old target. A moving servo's normal lag stays well inside it.
    """

    deceleration: np.ndarray
    tolerance: np.ndarray

    def __post_init__(self) -> None:
        for name in ("deceleration", "tolerance"):
            values = np.asarray(getattr(self, name), dtype=float)
            if values.ndim != 1 or np.isnan(values).any() or (values <= 0).any():
                raise ConfigError(f"braking {name} must be > 0 per joint, got {values}")
            object.__setattr__(self, name, values)
        if self.deceleration.shape != self.tolerance.shape:
            raise ConfigError("braking: deceleration and tolerance need one value per joint each")


def robot_braking(description: RobotDescription, names: Sequence[str]) -> Braking:
    """The Braking of a robot's action vector ``names`` (arm joints + gripper): arm joints at
    the description's ``max_joint_acceleration`` and ``hold_tolerance``. The gripper stops at
    once where its command is and never falls back to its measured opening: a gripper closed
    on a block measures wider than its command, and holding that would drop the block."""
    arm = np.array([name != GRIPPER for name in names])
    return Braking(
        deceleration=np.where(arm, description.max_joint_acceleration, np.inf),
        tolerance=np.where(arm, description.hold_tolerance, np.inf),
    )


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

    def start(
        self,
        now: float,
        points: TrajectoryPoints,
        current: np.ndarray,
        start_time: float | None = None,
    ) -> None:
        """Follow ``points`` from ``now``; with no points, cancel and hold ``current`` at once
        (``stop`` with a ``Braking`` comes to rest along the command instead).

        ``points`` are (time_from_start, {joint: position}) with non-decreasing times, as
        ``lang2policy.ros.convert.trajectory_points`` returns them (validated there). With a
        queue, they may wait until the running trajectory reaches its first point.

        ``start_time`` (<= ``now``, on this follower's clock): the trajectory's own start, as
        joint_trajectory_controller reads a header stamp: it departs at that moment from where
        the target was then, and the target at ``now`` is already ``now - start_time`` into it.
        A trajectory delivered late so runs at the pace it was planned at, from the state it
        was planned from (the safety node's stamped output), never compressed; no queue.
        """
        if not points:
            self.hold(current)
            return
        self._check_names(points)
        if start_time is not None:
            self._waiting.clear()
            self._begin(min(max(float(start_time), self._start), now), points)
            return
        self._release(now)
        if self.queue and (self._waiting or self._before_first_point(now)):
            if len(self._waiting) == self._waiting.maxlen:
                self._skip_oldest()
            self._waiting.append(points)
            return
        self._begin(now, points)

    def stop(
        self,
        now: float,
        measured: np.ndarray,
        braking: Braking,
        measured_velocity: np.ndarray | None = None,
    ) -> np.ndarray:
        """Cancel everything (waiting trajectories too) and come to rest; returns, per joint,
        whether its target jumped to the measured position (the caller's rate limit should
        start from there).

        A joint whose command moves at ``now`` (``velocity``) decelerates within its limit to
        rest (``braking_trajectory``) and holds there: from its measured position and
        ``measured_velocity`` when given, as joint_trajectory_controller's decelerate-to-stop
        does from the current state (so also a joint whose arm still moves, faster than
        ``REST_SPEED``, toward a target at rest), else from its target and commanded velocity;
        never past the running command's last point where that lies ahead in the direction of
        travel (a cut at the workspace box stays a cut; an end the arm already left behind is
        no target).
        From the measured state the servo's error is zero as braking starts: the arm, which
        lags its target while moving, is braked from where it is instead of being pulled on by
        its lag and swinging past the rest point (simulated SO-101 at 20 rad/s^2: from the
        target, overshoot 0.003 rad at 0.5 rad/s and 0.015 at 1.5; from the measured state
        0.002 and none). A joint whose command is at rest holds its target (a loaded joint
        would sag to a new measured position on every hold). A joint farther than
        ``braking.tolerance`` from ``measured`` holds ``measured`` at once; one with an
        infinite deceleration (the gripper) keeps its target (see ``Braking``).
        """
        measured = self._vector(measured)
        if braking.deceleration.shape != measured.shape:
            raise ConfigError(f"braking needs one value per joint of {list(self.names)}")
        self._release(now)
        target, velocity = self._interpolate(now), self.velocity(now)
        end = self._positions[-1].copy()  # where the running command would have stopped
        far = np.abs(target - measured) > braking.tolerance
        jumped = far.copy()
        if measured_velocity is not None:
            speed = self._vector(measured_velocity)
            moving = (velocity != 0.0) | (np.abs(speed) > REST_SPEED)
            moving &= np.isfinite(braking.deceleration) & ~far
            target[moving], velocity[moving] = measured[moving], speed[moving]
            jumped |= moving
        target[far], velocity[far] = measured[far], 0.0
        times, rows = braking_trajectory(target, velocity, braking.deceleration)
        # Never brake past the running command's end when it lies ahead in the direction of
        # travel: it may be a limit the safety node cut the command at (the workspace box), and
        # the arm must not coast beyond it. An end behind the braking start (a command that had
        # turned back while the arm still moved on) is not a target: holding it would drive the
        # arm back over its whole lag (0.43 rad of shoulder_pan in a CI run).
        start = rows[0]
        passes = np.where(
            velocity > 0, (end >= start) & (rows > end), (end <= start) & (rows < end)
        )
        self._times, self._positions = times, np.where(passes & (velocity != 0.0), end, rows)
        self._start = now
        self._waiting.clear()
        return jumped

    def velocity(self, now: float) -> np.ndarray:
        """The commanded velocity at ``now``: the slope of the running segment (zero at rest).

        In a trajectory's first segment, when it is short (``BRIDGE``) and more follow, the
        slope of the second: a streamed command's first segment only bridges the gap from the
        target where it began to its first point, flat or backwards when the commander runs a
        step late, a jump when it catches up, while the arm moves on at the command's speed.
        """
        self._release(now)
        t = now - self._start
        k = int(np.searchsorted(self._times, t, side="right")) - 1
        if k >= len(self._times) - 1:
            return np.zeros(len(self.names))
        if k == 0 and len(self._times) > 2 and self._times[1] <= BRIDGE:
            k = 1
        span = self._times[k + 1] - self._times[k]
        return (self._positions[k + 1] - self._positions[k]) / span

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

    def remaining(self, now: float) -> list[tuple[float, np.ndarray]]:
        """The points still ahead at ``now`` as (time from ``now``, positions): followed from
        the target at ``now``, they are the same motion (empty once the trajectory ended)."""
        self._release(now)
        t = now - self._start
        ahead = np.flatnonzero(self._times > t)
        return [(float(self._times[k] - t), self._positions[k].copy()) for k in ahead]

    def active(self, now: float) -> bool:
        """True while a trajectory is still moving (before its last point's time) or waits."""
        self._release(now)
        return bool(self._waiting) or (len(self._times) > 1 and now - self._start < self._times[-1])


def braking_trajectory(
    position: np.ndarray, velocity: np.ndarray, deceleration: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(times, rows) from ``position`` moving at ``velocity`` to rest, never reversing.

    Per joint a cubic: the deceleration starts at the joint's limit and falls linearly to zero
    at rest, after 2 |v| / limit seconds and 2 v^2 / (3 limit) of travel. Ending without a jump
    in acceleration matters to a position servo that lags its target: a constant deceleration
    that stops abruptly leaves the arm running past the rest point and swinging back (on the
    simulated SO-101 from 1.5 rad/s at 20 rad/s^2: 0.022 rad, against 0.001 for the cubic at
    12). Sampled every ``BRAKING_SAMPLE`` s until the slowest joint stops (its rest point last).
    """
    limited = np.isfinite(deceleration) & (velocity != 0.0)
    duration = np.zeros_like(position)
    duration[limited] = 2.0 * np.abs(velocity[limited]) / deceleration[limited]
    total = float(duration.max(initial=0.0))
    if total <= 0.0:
        return np.zeros(1), position[None, :].copy()
    times = np.linspace(0.0, total, max(1, math.ceil(total / BRAKING_SAMPLE - 1e-9)) + 1)
    span = np.where(limited, duration, 1.0)
    t = np.where(limited, np.minimum(times[:, None], span), 0.0)
    rows = position + velocity * (t - t**2 / span + t**3 / (3.0 * span**2))
    return times, rows


def _first_point(points: TrajectoryPoints) -> tuple[float, dict[str, float]]:
    """Time of the first point after the start and the joint values the follower has there
    (points at the start, or at the same time, merge into it)."""
    named: dict[str, float] = {}
    for t, values in points:
        named.update(values)
        if t > 0:
            return float(t), named
    return 0.0, named
