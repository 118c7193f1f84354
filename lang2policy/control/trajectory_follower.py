"""Follow joint trajectories by linear interpolation in (simulated) time. Pure Python + numpy.

Semantics follow ros2_control's joint_trajectory_controller where it matters to callers:
a new trajectory replaces the running one and starts at reception, from the current target;
joints it does not name hold their current target; an empty trajectory cancels and holds the
current position. Before the first point the follower interpolates from the current target
to it; after the last point it holds the last point.

No ROS imports: this could live in the core (``lang2policy.control``) unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lang2policy.errors import InvalidCommandError

TrajectoryPoints = Sequence[tuple[float, Mapping[str, float]]]


class TrajectoryFollower:
    """Targets for the joints ``names`` (action order) at any time ``now`` (seconds)."""

    def __init__(self, names: Sequence[str], initial: np.ndarray) -> None:
        self.names = tuple(names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self._times = np.zeros(1)
        self._positions = self._vector(initial)[None, :]
        self._start = 0.0

    def _vector(self, values: np.ndarray) -> np.ndarray:
        vector = np.array(values, dtype=float)
        if vector.shape != (len(self.names),):
            raise InvalidCommandError(
                f"expected {len(self.names)} values ({list(self.names)}), got shape {vector.shape}"
            )
        return vector

    def hold(self, positions: np.ndarray) -> None:
        """Cancel any trajectory and hold ``positions``."""
        self._times = np.zeros(1)
        self._positions = self._vector(positions)[None, :]

    def start(self, now: float, points: TrajectoryPoints, current: np.ndarray) -> None:
        """Follow ``points`` from ``now``; with no points, cancel and hold ``current``.

        ``points`` are (time_from_start, {joint: position}) with non-decreasing times, as
        ``lang2policy.ros.convert.trajectory_points`` returns them (validated there).
        """
        if not points:
            self.hold(current)
            return
        base = self.target(now)
        times, rows = [0.0], [base]
        for t, named in points:
            unknown = sorted(set(named) - set(self._index))
            if unknown:
                raise InvalidCommandError(f"unknown joints {unknown}; known: {list(self.names)}")
            row = rows[-1].copy()
            for name, value in named.items():
                row[self._index[name]] = value
            if t <= times[-1]:  # same time as the previous point: the later point wins
                rows[-1] = row
            else:
                times.append(float(t))
                rows.append(row)
        self._start = now
        self._times = np.array(times)
        self._positions = np.array(rows)

    def target(self, now: float) -> np.ndarray:
        """The interpolated target at ``now`` (the last point once the trajectory has ended)."""
        t = now - self._start
        if len(self._times) == 1 or t >= self._times[-1]:
            return self._positions[-1].copy()
        return np.array(
            [np.interp(t, self._times, self._positions[:, j]) for j in range(len(self.names))]
        )

    def active(self, now: float) -> bool:
        """True while a trajectory is still moving (before its last point's time)."""
        return len(self._times) > 1 and now - self._start < self._times[-1]
