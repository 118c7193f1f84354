"""Watchdog, stop latch and the supervisor's state machine, driven by explicit timestamps.

No clock is read anywhere: every event carries its time, so each transition is checked at an
exact moment (just before and just after each timeout).
"""

from __future__ import annotations

import math

import pytest
from support.safety import MEASURED, NAMES, planar_filter

from lang2policy.safety import (
    HOLDING,
    OK,
    STOPPED,
    SafetySupervisor,
    StopLatch,
    Trajectory,
    Watchdog,
)
from lang2policy.safety.watchdog import NO_STATES, SILENT_COMMANDER, STALE_STATES

STATE_TIMEOUT, COMMAND_TIMEOUT = 0.2, 0.25
SLOW = Trajectory.of(NAMES, [(2.0, (0.3, 0.0, 1.0))])  # 0.15 rad/s for 2 s: within every limit


# ---------------------------------------------------------------------- watchdog
def test_watchdog_holds_until_the_first_joint_state():
    dog = Watchdog(STATE_TIMEOUT, COMMAND_TIMEOUT)
    assert dog.check(0.0).state == NO_STATES and dog.check(0.0).hold
    dog.on_state(now=1.0, stamp=50.0)
    assert dog.check(1.0).state == "ok" and not dog.check(1.0).hold


def test_joint_states_go_stale_after_the_timeout_by_arrival_time():
    dog = Watchdog(STATE_TIMEOUT, COMMAND_TIMEOUT)
    dog.on_state(now=10.0, stamp=3.0)
    assert not dog.check(10.0 + STATE_TIMEOUT - 1e-6).hold
    verdict = dog.check(10.0 + STATE_TIMEOUT + 1e-6)
    assert verdict.state == STALE_STATES and verdict.states_bad
    assert "the last arrived 0.200 s ago (state_timeout 0.2 s)" in verdict.reason
    dog.on_state(now=10.5, stamp=3.5)
    assert not dog.check(10.5).hold


def test_robot_time_is_the_latest_stamp():
    dog = Watchdog(STATE_TIMEOUT, COMMAND_TIMEOUT)
    assert dog.robot_time(5.0) is None
    dog.on_state(now=5.0, stamp=100.0)
    assert dog.robot_time(5.15) == 100.0  # not extrapolated: a stalled robot's time stands still
    dog.on_state(now=6.0, stamp=None)  # unstamped: the arrival time is the stamp
    assert dog.robot_time(6.1) == 6.0


def test_a_slow_robot_does_not_make_a_streaming_commander_look_silent():
    dog = Watchdog(state_timeout=1.0, command_timeout=COMMAND_TIMEOUT)
    dog.on_state(now=0.0, stamp=0.0)
    dog.on_command(now=0.0, duration=2.0)
    for k in range(1, 10):  # the simulation runs at a fifth of real time
        dog.on_state(now=0.1 * k, stamp=0.02 * k)
        assert dog.check(0.1 * k + 0.05).state == "ok"


def test_a_commander_silent_mid_trajectory_makes_the_watchdog_hold():
    dog = Watchdog(STATE_TIMEOUT, COMMAND_TIMEOUT)
    dog.on_state(now=0.0, stamp=20.0)
    dog.on_command(now=0.0, duration=2.0)  # runs until robot time 22.0
    for k in range(1, 13):  # joint states keep coming every 20 ms (stamps = robot time)
        dog.on_state(now=0.02 * k, stamp=20.0 + 0.02 * k)
    assert dog.check(0.24).state == "ok"
    dog.on_state(now=0.26, stamp=20.26)
    verdict = dog.check(0.26)
    assert verdict.state == SILENT_COMMANDER
    assert "commander silent for 0.260 s (command_timeout 0.25 s)" in verdict.reason
    assert "still runs for 1.740 s" in verdict.reason
    dog.on_command(now=0.26, duration=2.0)  # the commander is back
    assert dog.check(0.26).state == "ok"


def test_silence_after_a_trajectory_ended_is_fine():
    dog = Watchdog(STATE_TIMEOUT, COMMAND_TIMEOUT)
    dog.on_state(now=0.0, stamp=0.0)
    dog.on_command(now=0.0, duration=0.1)  # ends before the command timeout
    for k in range(1, 100):
        dog.on_state(now=0.02 * k, stamp=0.02 * k)
        assert dog.check(0.02 * k).state == "ok"
    dog.on_command(now=2.0, duration=5.0)
    dog.cancel_command()  # held or stopped: the trajectory no longer runs
    dog.on_state(now=3.0, stamp=3.0)
    assert dog.check(3.0).state == "ok" and not dog.command_running(3.0)


def test_watchdog_timeouts_must_be_positive():
    with pytest.raises(ValueError, match="timeouts must be > 0"):
        Watchdog(0.0, COMMAND_TIMEOUT)


# ---------------------------------------------------------------------- stop latch
def test_stop_latches_until_an_explicit_resume():
    latch = StopLatch()
    assert latch.resume(0.0) == (True, "not stopped; nothing to resume")
    assert latch.stop(1.0) == "stopped (stop requested); the arm holds"
    assert latch.stopped and latch.stop(1.1) == "already stopped; the arm holds"
    ok, message = latch.resume(2.0, blocker="joint states stale")
    assert not ok and latch.stopped
    assert message == "resume refused: joint states stale; still stopped"
    ok, message = latch.resume(3.5)
    assert ok and not latch.stopped and "resumed after 2.500 s stopped" in message
    assert latch.stops == 2


# ---------------------------------------------------------------------- supervisor
def supervisor() -> SafetySupervisor:
    return SafetySupervisor(planar_filter(), Watchdog(STATE_TIMEOUT, COMMAND_TIMEOUT))


def fed(now: float = 0.0) -> SafetySupervisor:
    """A supervisor that has seen one joint state at ``now`` (stamp = now)."""
    sup = supervisor()
    sup.on_joint_state(now, now, MEASURED)
    return sup


def is_hold(decision) -> bool:
    return decision.send is not None and decision.send.is_hold and decision.send.names == NAMES


def test_nothing_passes_before_the_first_joint_state():
    sup = supervisor()
    assert (sup.state, sup.reason) == (HOLDING, "no joint states received yet")
    decision = sup.on_command(0.0, SLOW)
    assert not decision.ok and decision.send is None  # held already; nothing has moved
    assert sup.counts["blocked"] == 1
    assert sup.on_joint_state(0.0, 0.0, MEASURED).send is None
    assert sup.state == OK


def test_a_good_command_passes_and_is_counted():
    sup = fed()
    decision = sup.on_command(0.0, SLOW)
    assert decision.ok and decision.send == SLOW
    assert sup.counts == {"passed": 1, "clipped": 0, "rejected": 0, "blocked": 0}
    clipped = sup.on_command(0.01, Trajectory.of(NAMES, [(0.1, (0.5, 0.5, 1.0))]))
    assert clipped.ok and clipped.send.duration == pytest.approx(0.5)
    assert sup.counts["clipped"] == 1 and "retimed" in sup.last_violation


def test_a_nan_command_is_rejected_and_the_arm_holds_until_a_good_command():
    sup = fed()
    sup.on_command(0.0, SLOW)
    decision = sup.on_command(0.02, Trajectory.of(NAMES, [(1.0, (math.nan, 0.0, 1.0))]))
    assert not decision.ok and is_hold(decision)
    assert sup.state == HOLDING and "non-finite positions for ['a']" in sup.reason
    assert sup.counts["rejected"] == 1 and "non-finite" in sup.last_violation
    again = sup.reject(0.03, "command rejected: malformed")
    assert is_hold(again) is False  # already held: no second hold to re-anchor
    assert sup.on_command(0.04, SLOW).send == SLOW and sup.state == OK


def test_stop_holds_at_once_and_stays_until_resume():
    sup = fed()
    sup.on_command(0.0, SLOW)
    stop = sup.stop(0.1)
    assert is_hold(stop) and sup.state == STOPPED
    for k in range(5):  # commands keep arriving: all ignored, nothing sent
        decision = sup.on_command(0.12 + 0.02 * k, SLOW)
        assert decision.send is None and not decision.ok
        sup.on_joint_state(0.12 + 0.02 * k, 0.12 + 0.02 * k, MEASURED)
        assert sup.tick(0.13 + 0.02 * k).send is None
    assert sup.counts["blocked"] == 5 and sup.state == STOPPED
    assert is_hold(sup.stop(0.3))  # every stop request sends a hold
    resume = sup.resume(0.31)
    assert resume.ok and sup.state == OK and resume.send is None  # still held until a command
    assert sup.on_command(0.32, SLOW).send == SLOW


def test_resume_is_refused_while_joint_states_are_stale():
    sup = fed(0.0)
    sup.stop(0.05)
    refused = sup.resume(0.05 + STATE_TIMEOUT + 0.01)
    assert not refused.ok and sup.state == STOPPED
    assert "resume refused: joint states stale" in refused.message
    sup.on_joint_state(0.4, 0.4, MEASURED)
    assert sup.resume(0.41).ok and sup.state == OK


def test_stale_joint_states_hold_once_and_clear_when_fresh():
    sup = fed(0.0)
    sup.on_command(0.0, SLOW)
    assert sup.tick(STATE_TIMEOUT - 0.01).send is None
    held = sup.tick(STATE_TIMEOUT + 0.01)
    assert is_hold(held) and sup.state == HOLDING and "joint states stale" in sup.reason
    reason = sup.reason
    assert sup.tick(STATE_TIMEOUT + 0.03).send is None  # once, not every tick
    assert sup.reason == reason  # one hold, one reason: the status does not change every tick
    blocked = sup.on_command(0.3, SLOW)
    assert blocked.send is None and "command ignored: joint states stale" in blocked.message
    back = sup.on_joint_state(0.4, 0.4, MEASURED)
    assert back.send is None and sup.state == OK


def test_a_silent_commander_gets_the_arm_held_before_its_trajectory_ends():
    sup = fed(0.0)
    sup.on_command(0.0, SLOW)  # 2 s long, never refreshed
    held_at = None
    for k in range(1, 100):
        now = 0.02 * k
        decisions = (sup.on_joint_state(now, now, MEASURED), sup.tick(now + 0.001))
        if any(map(is_hold, decisions)):
            held_at = now
            break
    assert held_at == pytest.approx(0.26)  # first tick past the 0.25 s command timeout
    assert held_at < SLOW.duration
    assert sup.state == HOLDING and "commander silent" in sup.reason
    assert sup.tick(held_at + 0.02).send is None
    assert sup.on_command(held_at + 0.03, SLOW).send == SLOW and sup.state == OK


def test_a_commander_that_keeps_streaming_is_never_held():
    sup = fed(0.0)
    for k in range(100):
        now = 0.02 * k
        sup.on_joint_state(now, now, MEASURED)
        assert sup.on_command(now, SLOW).send == SLOW
        assert sup.tick(now + 0.01).send is None
    assert sup.state == OK and sup.counts["passed"] == 100


def test_an_unusable_joint_state_is_ignored_and_ages_into_a_hold():
    sup = fed(0.0)
    bad = sup.on_joint_state(0.1, 0.1, {**MEASURED, "a": math.inf})
    assert not bad.ok and "non-finite positions for ['a']" in bad.message
    assert is_hold(sup.tick(0.25)) and "joint states stale" in sup.reason


def test_status_payload():
    assert supervisor().status()["robot_time"] is None  # no joint state yet
    sup = fed(2.5)
    sup.on_command(0.0, Trajectory.of(NAMES, [(1.0, (math.nan, 0.0, 1.0))]))
    status = sup.status()
    assert status["node"] == "safety" and status["state"] == HOLDING
    assert status["robot_time"] == 2.5  # the latest joint state's stamp
    assert "non-finite" in status["reason"]
    assert status["detail"]["rejected"] == 1 and "non-finite" in status["detail"]["last_violation"]
