"""The robot side of bounded latency: stale stamped trajectories brake, a silent stream brakes."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.control.command_deadline import CommandDeadline
from lang2policy.control.trajectory_follower import TrajectoryFollower
from lang2policy.errors import ConfigError


def test_a_fresh_stamped_trajectory_starts_at_its_stamp():
    deadline = CommandDeadline(0.3, 0.25)
    arrival = deadline.arrive(10.05, 10.0)
    assert not arrival.stale
    assert arrival.start_time == pytest.approx(10.0)


def test_a_stamp_on_another_clock_is_aged_on_that_clock():
    deadline = CommandDeadline(0.3, 0.25)
    arrival = deadline.arrive(now=500.0, stamp=1_700_000_000.0, stamp_now=1_700_000_000.1)
    assert arrival.start_time == pytest.approx(499.9)


def test_a_stamped_trajectory_older_than_the_deadline_is_refused():
    deadline = CommandDeadline(0.3, 0.25)
    arrival = deadline.arrive(10.5, 10.0)
    assert (
        arrival.stale and "0.500 s ago" in arrival.stale and "command_deadline 0.3" in arrival.stale
    )
    assert deadline.stale == 1


def test_an_unstamped_trajectory_starts_on_arrival_and_has_no_stream_timeout():
    deadline = CommandDeadline(0.3, 0.25)
    assert deadline.arrive(10.0, 0.0).start_time is None
    assert deadline.lost_stream(20.0, moving=True) == ""


def test_a_silent_stamped_stream_brakes_a_moving_arm_once():
    deadline = CommandDeadline(0.3, 0.25)
    deadline.arrive(10.0, 10.0)
    assert deadline.lost_stream(10.2, moving=True) == ""
    assert deadline.lost_stream(10.3, moving=False) == ""  # at rest: nothing runs on
    reason = deadline.lost_stream(10.3, moving=True)
    assert "stream_timeout 0.25" in reason
    assert deadline.lost_stream(10.4, moving=True) == ""  # once per silence
    assert deadline.lost == 1


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="command_deadline"):
        CommandDeadline(0.0, 0.25)
    with pytest.raises(ConfigError, match="stream_timeout"):
        CommandDeadline(0.3, float("nan"))


def test_a_late_stamped_trajectory_runs_at_its_planned_pace_from_its_planned_start():
    follower = TrajectoryFollower(("a",), np.zeros(1))
    points = [(0.1 * k, {"a": 0.1 * k}) for k in range(1, 11)]  # 1 rad/s for 1 s
    follower.start(0.05, points, np.zeros(1), start_time=0.0)  # arrived 50 ms late
    assert follower.target(0.05)[0] == pytest.approx(0.05)
    assert follower.target(0.55)[0] == pytest.approx(0.55)
    # a newer one replaces it at once (no queue), departing from where the target was
    follower.start(0.6, [(0.1, {"a": 0.5})], np.zeros(1), start_time=0.6)
    assert follower.target(0.65)[0] == pytest.approx(0.55)
    remaining = follower.remaining(0.65)
    assert remaining[0][0] == pytest.approx(0.05) and remaining[0][1][0] == pytest.approx(0.5)
