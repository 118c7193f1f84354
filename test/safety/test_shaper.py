"""The shaper: what the safety node sends bounds the target's speed and acceleration."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.safety.shaper import ShaperLimits, braking, shape

DT = 0.02
SPEED, ACCEL = 1.5, 10.0
LIMITS = ShaperLimits(
    max_speed=np.array([SPEED, SPEED, np.inf]),
    max_acceleration=np.array([ACCEL, ACCEL, np.inf]),
    lower=np.array([-2.0, -2.0, 0.0]),
    upper=np.array([2.0, 2.0, 1.0]),
    period=DT,
)


def velocity_and_acceleration(start_v, shaped):
    v = np.vstack([start_v[None, :], shaped.velocities])
    return np.abs(shaped.velocities[:, :2]).max(), (np.abs(np.diff(v, axis=0)) / DT)[:, :2].max()


def test_a_reversal_within_the_speed_cap_is_shaped_within_speed_and_acceleration():
    start_v = np.array([SPEED, 0.0, 0.0])  # moving at the cap, then asked to go back
    shaped = shape(np.zeros(3), start_v, np.array([0.1]), np.array([[-0.15, 0.05, 0.5]]), LIMITS)
    speed, accel = velocity_and_acceleration(start_v, shaped)
    assert speed <= SPEED + 1e-9
    assert accel <= ACCEL + 1e-6
    # It ends at rest, exactly at the last point; it ran on past the turn by at most v^2/2a.
    assert shaped.positions[-1] == pytest.approx([-0.15, 0.05, 0.5])
    assert shaped.velocities[-1][:2] == pytest.approx([0.0, 0.0])
    assert shaped.positions[:, 0].max() <= SPEED**2 / (2 * ACCEL) + 1e-9


def test_a_stream_that_reverses_every_step_stays_within_speed_and_acceleration():
    rng = np.random.default_rng(3)
    q, v = np.zeros(3), np.zeros(3)
    worst_speed = worst_accel = 0.0
    for _ in range(300):  # 10 Hz commands one step ahead, each within the cap, random sign
        point = q + rng.choice([-1.0, 1.0], size=3) * np.array([SPEED, SPEED, 5.0]) * 0.1
        point = np.clip(point, LIMITS.lower, LIMITS.upper)
        shaped = shape(q, v, np.array([0.1]), point[None, :], LIMITS)
        head = shaped.head(5)  # the next command replaces it after 0.1 s
        speed, accel = velocity_and_acceleration(v, head)
        worst_speed, worst_accel = max(worst_speed, speed), max(worst_accel, accel)
        q, v = head.positions[-1], head.velocities[-1]
    assert worst_speed <= SPEED + 1e-9
    assert worst_accel <= ACCEL + 1e-6


def test_a_slow_command_keeps_its_own_pace():
    shaped = shape(np.zeros(3), np.zeros(3), np.array([2.0]), np.array([[0.5, 0.0, 0.0]]), LIMITS)
    # 0.25 rad/s asked: the target moves at that pace (after catching up the ramp), not at
    # the cap.
    assert np.median(np.abs(shaped.velocities[:, 0])) == pytest.approx(0.25, abs=0.01)
    assert np.abs(shaped.velocities[:, 0]).max() <= 0.35
    assert shaped.times[-1] == pytest.approx(2.0, abs=0.15)


def test_the_target_brakes_for_a_joint_limit_and_never_passes_it():
    start_v = np.array([SPEED, 0.0, 0.0])
    # A command past the limit (the filter clamps it; the shaper also brakes for the limit).
    shaped = shape(np.array([1.8, 0, 0]), start_v, np.array([0.1]), np.array([[2.0, 0, 0]]), LIMITS)
    assert shaped.positions[:, 0].max() <= 2.0 + 1e-9
    _, accel = velocity_and_acceleration(start_v, shaped)
    assert accel <= ACCEL + 1e-6
    # From a state that cannot brake in time, the position is still clamped at the limit.
    late = shape(np.array([1.99, 0, 0]), start_v, np.array([0.1]), np.array([[2.0, 0, 0]]), LIMITS)
    assert late.positions[:, 0].max() <= 2.0 + 1e-9


def test_a_stream_at_the_cap_is_followed_closely_not_ever_later():
    q, v, ref = np.zeros(3), np.zeros(3), 0.0
    lags = []
    for k in range(1, 1500):  # 30 s of 50 Hz one-point commands, back and forth at the cap
        ref += SPEED * DT * (1.0 if (k * DT) % 2.0 < 1.0 else -1.0)
        shaped = shape(q, v, np.array([DT]), np.array([[ref, 0.0, 0.0]]), LIMITS)
        q, v = shaped.positions[0], shaped.velocities[0]
        lags.append(abs(ref - q[0]))
    # The target trails by about its braking distance (v^2 / 2a), never more and more.
    assert max(lags[750:]) <= max(lags[:750]) + 1e-6
    assert max(lags) / SPEED <= 0.3  # s behind the stream, at most


def test_the_gripper_follows_its_reference_unshaped():
    shaped = shape(np.zeros(3), np.zeros(3), np.array([0.04]), np.array([[0.0, 0.0, 1.0]]), LIMITS)
    assert shaped.positions[0, 2] == pytest.approx(0.5)
    assert shaped.positions[1, 2] == pytest.approx(1.0)


def test_braking_comes_to_rest_within_the_deceleration():
    rows, speeds = braking(np.zeros(3), np.array([SPEED, -0.5, 0.3]), LIMITS)
    assert not speeds[-1][:2].any()
    assert (np.abs(np.diff(np.vstack([[SPEED, -0.5, 0.0], speeds]), axis=0)) / DT)[
        :, :2
    ].max() <= ACCEL + 1e-9
    assert rows[-1][0] == pytest.approx(SPEED**2 / (2 * ACCEL), abs=SPEED * DT)


def test_limits_are_validated():
    with pytest.raises(ConfigError, match="period"):
        ShaperLimits(LIMITS.max_speed, LIMITS.max_acceleration, LIMITS.lower, LIMITS.upper, 0.0)
    with pytest.raises(ConfigError, match="> 0"):
        ShaperLimits(-LIMITS.max_speed, LIMITS.max_acceleration, LIMITS.lower, LIMITS.upper, DT)
