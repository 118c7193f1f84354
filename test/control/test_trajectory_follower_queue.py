"""The robot's follower queues a burst of streamed commands and plays it at its own pace.

A late commander's 20 ms steps arrive at one instant (the sim's clock stands still between two
ticks). A follower with a queue runs them one after the other; joint_trajectory_controller's
semantics (no queue) would run the last from where the first began.
"""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.control.trajectory_follower import TrajectoryFollower

NAMES = ("a", "b", "gripper")
LIMIT = 1.0  # rad/s: the pace of the streamed steps
PERIOD = 0.02  # s between streamed steps


def fastest(targets: list[float], step: float) -> float:
    return float(np.abs(np.diff(targets)).max() / step) if len(targets) > 1 else 0.0


def sample(follower: TrajectoryFollower, start: float, until: float, step=0.001) -> list[float]:
    """Joint a's target from ``start`` to ``until`` every ``step`` (in time order)."""
    return [float(follower.target(t)[0]) for t in np.arange(start, until - 1e-12, step)]


def test_a_burst_of_streamed_commands_is_followed_at_its_pace_not_compressed():
    """Five 20 ms steps at 1 rad/s arrive at one instant (the sim's clock stands still between
    two ticks): replacing at once would run the last from where the first began, 5 rad/s."""
    queued = TrajectoryFollower(NAMES, np.zeros(3), queue=3)  # and the queue overflows
    plain = TrajectoryFollower(NAMES, np.zeros(3))  # joint_trajectory_controller semantics
    for follower in (queued, plain):
        for k in range(1, 6):
            follower.start(0.0, [(PERIOD, {"a": LIMIT * PERIOD * k})], np.zeros(3))
    assert fastest(sample(queued, 0.0, 0.2), 0.001) == pytest.approx(LIMIT)
    assert queued.target(0.1)[0] == pytest.approx(0.1)  # all of it, in its own time
    assert fastest(sample(plain, 0.0, 0.2), 0.001) == pytest.approx(5 * LIMIT)


def test_a_hold_cancels_the_waiting_commands_at_once():
    follower = TrajectoryFollower(NAMES, np.zeros(3), queue=10)
    for k in range(1, 6):
        follower.start(0.0, [(PERIOD, {"a": 0.02 * k})], np.zeros(3))
    follower.start(0.01, [], np.array([0.005, 0.0, 1.0]))
    assert not follower.active(0.01) and follower.target(0.5)[0] == pytest.approx(0.005)
