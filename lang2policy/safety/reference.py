"""Where the robot's position target is, as the safety node commanded it.

The robot follows what the safety node forwards the way the sim node does (``TrajectoryFollower``
with a queue, joint_trajectory_controller semantics otherwise): a trajectory starts when it
arrives, from the current position target, linearly between its points; one that arrives
before the running one has reached its first point waits for that point and starts from there
(a burst of streamed commands runs one after the other, never in the time of one); joints it
does not name keep their target; a hold brakes the target along its command to rest
(``TrajectoryFollower.stop`` with the robot's ``Braking``), or, without one, stops it at the
measured position. So the speed a forwarded command asks for is its distance from *where it
departs*, not from the measured position (a servo lags its target while moving, by an amount
the safety node cannot know), and that is known exactly from what was forwarded and when.

``RobotTarget`` replays the forwarded trajectories on robot time and answers ``candidates(now)``:
positions a command forwarded now may depart from. The new command must be within the limit from
each, and so (the distance is convex) from anywhere between them:
  * if it will wait: the first point of the last trajectory before it (streamed one-point
    commands: the previous command, however late or bunched they are sent or delivered);
  * else the target now, as replayed, and the point it is heading for: a robot that got the
    previous trajectory a little later or earlier than the replay assumes is between the two;
  * after a hold that brakes, the measured position when the hold went out and the latest one
    (the robot brakes its moving joints from their measured state, which the replay does not
    know; a joint far from its target holds where it is measured), and the replayed target
    braked from its commanded velocity and the point where that comes to rest (the robot
    comes to rest between where it was measured and there);
  * after a hold without braking (and before anything was forwarded), both the measured position
    when the hold went out and the latest one: the robot holds where it was when the hold
    *arrived*, somewhere between the two while the arm brakes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lang2policy.control.trajectory_follower import STREAM_QUEUE, Braking, TrajectoryFollower
from lang2policy.safety.trajectory import Trajectory


class RobotTarget:
    """The robot's position target over ``names`` (arm joints + gripper), on robot time."""

    def __init__(self, names: Sequence[str], braking: Braking | None = None) -> None:
        self.names = tuple(names)
        self.braking = braking  # how the robot stops on a hold (None: at the measured position)
        self._follower: TrajectoryFollower | None = None  # None: held at the measured position
        self._anchor: np.ndarray | None = None  # measured position when the hold was sent
        self._braked = False  # the last thing sent was a hold that brakes the replayed target

    @property
    def holding(self) -> bool:
        return self._follower is None or self._braked

    def held(self, now: float, measured: np.ndarray) -> None:
        """A hold was sent at ``now``: the robot brakes its target to rest, or (without braking,
        or before anything was forwarded) stops it at (about) ``measured``."""
        self._anchor = np.array(measured, float)
        if self._follower is not None and self.braking is not None:
            self._follower.stop(now, self._anchor, self.braking)
            self._braked = True
            return
        self._follower = None

    def forwarded(self, now: float, trajectory: Trajectory, measured: np.ndarray) -> None:
        """``trajectory`` (not a hold) was sent at ``now``: the target follows it from where it
        departs (from the hold point, or ``measured`` if nothing was sent yet)."""
        if self._follower is None:
            start = self._anchor if self._anchor is not None else measured
            self._follower = TrajectoryFollower(self.names, start, queue=STREAM_QUEUE)
        self._braked = False
        points = [
            (float(t), dict(zip(trajectory.names, values, strict=True)))
            for t, values in trajectory.points
        ]
        self._follower.start(now, points, measured)

    def candidates(self, now: float, measured: np.ndarray) -> np.ndarray:
        """Rows (one position per joint of ``names``): where a command sent at ``now`` may
        depart from."""
        follower = self._follower
        if follower is None:
            rows = [np.array(measured, float)]
            if self._anchor is not None:
                rows.append(self._anchor)
            return np.array(rows)
        if self._braked:
            rest = follower.target(now + 1e3)  # where the braking ends (it never waits)
            return np.array([follower.target(now), rest, np.array(measured, float), self._anchor])
        if follower.waits(now):
            return follower.departure(now)[None, :]
        rows = [follower.target(now)]
        ahead = follower.next_point(now)
        if ahead is not None:
            rows.append(ahead)
        return np.array(rows)
