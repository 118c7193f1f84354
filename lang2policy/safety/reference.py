"""Where the robot's position target is, and how fast it moves, as the safety node commanded it.

The safety node stamps every trajectory it forwards with robot time (the latest joint state's
stamp), and the robot follows it as joint_trajectory_controller reads a header stamp: it
departs at that moment from where its target was then, linearly between the points; a newer
trajectory replaces it (no queue: a late one starts partway in, never compressed into less
time, and never waits behind others); joints it does not name keep their target; a hold brakes
each moving joint from its measured state to rest (``TrajectoryFollower.stop`` with the robot's
``Braking``), or, without one, stops the target at the measured position.

So the robot's target at any robot time is known exactly from what was forwarded and when:
``RobotTarget`` replays it and answers ``state(now)``, the position and velocity the next
trajectory departs from (the shaper starts there, so the target's velocity never steps).
After a hold the replay brakes from the measured state it was told, as the robot does from the
state it measured when the hold arrived: close, not exact; the shaper's first samples absorb it.

Several trajectories forwarded at one robot time (a burst of commands handled before the next
joint state moved the clock on) all start at that instant, and the robot runs only the last:
each departs from the state the target had *before* the first of them, never from the first
segment of one the robot will not run (its slope already holds one step of acceleration; a
burst of eight stacked eight, 0 to 1.15 rad/s in 20 ms, and the servo ran 1.6-1.75 rad/s).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lang2policy.control.trajectory_follower import Braking, TrajectoryFollower
from lang2policy.safety.trajectory import Trajectory


class RobotTarget:
    """The robot's position target over ``names`` (arm joints + gripper), on robot time."""

    def __init__(self, names: Sequence[str], braking: Braking | None = None) -> None:
        self.names = tuple(names)
        self.braking = braking  # how the robot stops on a hold (None: at the measured position)
        self._follower: TrajectoryFollower | None = None  # None: held at the measured position
        self._held_at: np.ndarray | None = None
        # (robot time, position, velocity) of the target when the running trajectory started
        self._departure: tuple[float, np.ndarray, np.ndarray] | None = None

    @property
    def holding(self) -> bool:
        return self._follower is None

    def held(
        self, now: float, measured: np.ndarray, measured_velocity: np.ndarray | None = None
    ) -> None:
        """A hold was sent at ``now``: the robot brakes its target to rest from the measured
        state, or (without braking, or before anything was forwarded) stops it at
        ``measured``."""
        measured = np.array(measured, float)
        self._departure = None
        if self._follower is not None and self.braking is not None:
            self._follower.stop(now, measured, self.braking, measured_velocity)
            return
        self._follower = None
        self._held_at = measured

    def anchor(self, measured: np.ndarray) -> None:
        """Forget the replay: the target is (taken to be) at rest at ``measured``."""
        self._follower = None
        self._departure = None
        self._held_at = np.array(measured, float)

    def forwarded(self, now: float, trajectory: Trajectory, measured: np.ndarray) -> None:
        """``trajectory`` (not a hold), stamped ``now``, was sent: the target follows it from
        where it was at ``now`` (before any other trajectory forwarded at ``now``)."""
        if self._departure is None or self._departure[0] != now:
            position, velocity = self.state(now, measured)
            self._departure = (now, position, velocity)
        if self._follower is None:
            start = self._held_at if self._held_at is not None else np.array(measured, float)
            self._follower = TrajectoryFollower(self.names, start)
        points = [
            (float(t), dict(zip(trajectory.names, values, strict=True)))
            for t, values in trajectory.points
        ]
        self._follower.start(now, points, measured, start_time=now)

    def state(self, now: float, measured: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position, velocity) of the target at ``now``: at rest where it is held when nothing
        was forwarded since the last hold without braking; at the instant a trajectory was
        forwarded, the state it departed from."""
        if self._departure is not None and self._departure[0] == now:
            return self._departure[1].copy(), self._departure[2].copy()
        if self._follower is None:
            rest = self._held_at if self._held_at is not None else np.array(measured, float)
            return np.array(rest, float), np.zeros(len(self.names))
        return self._follower.target(now), self._follower.velocity(now)

    def uncertain(self, measured: np.ndarray) -> np.ndarray | None:
        """Rows where the robot's target may be when it is held without braking (it stopped
        where the arm was when the hold *arrived*: between the measured position when the hold
        went out and the latest one), else None (the replay is exact)."""
        if self._follower is not None:
            return None
        rows = [np.array(measured, float)]
        if self._held_at is not None:
            rows.append(self._held_at)
        return np.array(rows)

    def remainder(self, now: float) -> list[tuple[float, np.ndarray]] | None:
        """The rest of the running trajectory from ``now`` as (time from ``now``, positions)
        points (a heartbeat re-sends it stamped ``now``: the same motion), None once the target
        is at rest at its end."""
        follower = self._follower
        if follower is None or not follower.active(now):
            return None
        return follower.remaining(now)
