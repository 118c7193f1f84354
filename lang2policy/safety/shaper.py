"""Shape a command into what the arm's position target may do: bounded speed *and* acceleration.

A position servo does not move at its target's speed. Fed a target whose velocity steps (a
stream of one-point commands that reverses, each within the speed cap), the simulated SO-101's
joints ran at 3.7-4.0 rad/s under a 1.5 rad/s cap: the servo answers a velocity step with an
overshoot. Bounding the *target's* acceleration bounds that answer, and capping the target's
speed a margin below the limit (``RobotSafetyConfig.servo_overshoot``) keeps what the joints
*measure* within the limit.

``shape`` turns the motion filter's output (a reference: timed points, already within the speed
cap, departing from the robot's target) into dense samples ``period`` apart that a robot
follows by linear interpolation, as joint_trajectory_controller and our robot nodes do:

* each shaped joint starts from the target's replayed position *and velocity*;
* between two samples the velocity grows by at most ``max_acceleration x period``, shrinks by
  at most ``max_deceleration x period``, and never exceeds ``max_speed``;
* each joint tracks the reference (reaching its next sample if it can) but slows in time to
  stop *at* the command's last point and never past a joint limit: the trajectory ends at rest
  at the last point, so a commander that dies leaves an arm that stops where it last asked.

Joints whose limits are infinite (the gripper) follow the reference exactly. Where the
reference turns back faster than the acceleration allows (a reversing stream), the target runs
on past the turning point by at most v^2 / (2 a) (0.056 rad at 1.5 rad/s and 20 rad/s^2)
before it returns: the zone guard (``lang2policy.safety.guard``) checks every sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError

_SETTLED = 1e-6  # rad (and rad per sample): a joint this close to its end, this slow, is there
_MAX_SETTLE = 3.0  # s after the reference ends before a shaped trajectory is cut regardless


@dataclass(frozen=True)
class ShaperLimits:
    """Per joint (the robot's action order): the target's largest speed and acceleration
    (inf: that joint follows the reference unshaped), its range, and the sample period."""

    max_speed: np.ndarray
    max_acceleration: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    period: float
    # Per joint, how fast the target may slow down (None: as it speeds up). Braking harder
    # than it accelerates stops the arm sooner when commands end; slowing excites the servo
    # into running past the rest point (mrad), not into speed above the cap.
    max_deceleration: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.max_deceleration is None:
            object.__setattr__(self, "max_deceleration", self.max_acceleration)
        for name in ("max_speed", "max_acceleration", "lower", "upper", "max_deceleration"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))
        if not (math.isfinite(self.period) and self.period > 0):
            raise ConfigError(f"shaper period must be a finite number > 0 s, got {self.period}")
        limits = (self.max_speed, self.max_acceleration, self.deceleration)
        if any((limit <= 0).any() for limit in limits):
            raise ConfigError("shaper speed, acceleration, deceleration limits must be > 0")

    @property
    def deceleration(self) -> np.ndarray:
        """``max_deceleration`` as ``__post_init__`` filled it in (never None)."""
        assert self.max_deceleration is not None  # __post_init__: max_acceleration for None
        return self.max_deceleration

    @property
    def shaped(self) -> np.ndarray:
        """Joints whose speed and acceleration are shaped (both finite)."""
        return np.isfinite(self.max_speed) & np.isfinite(self.max_acceleration)


@dataclass(frozen=True)
class Shaped:
    """Samples ``times`` (s after the start, the first one period in) and ``positions``
    (rows, every joint); ``velocities`` is the slope of the segment ending at each sample."""

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray

    def head(self, count: int) -> Shaped:
        return Shaped(self.times[:count], self.positions[:count], self.velocities[:count])


def reference_at(
    start: np.ndarray, times: np.ndarray, positions: np.ndarray, at: np.ndarray
) -> np.ndarray:
    """Rows of the reference at times ``at``: linear from ``start`` (time 0) through the timed
    ``positions`` (rows, every joint), holding the last one after its time."""
    knots = np.concatenate([[0.0], times])
    rows = np.vstack([start[None, :], positions])
    return np.column_stack([np.interp(at, knots, rows[:, j]) for j in range(rows.shape[1])])


def shape(
    start: np.ndarray,
    velocity: np.ndarray,
    times: np.ndarray,
    positions: np.ndarray,
    limits: ShaperLimits,
) -> Shaped:
    """Samples that follow the reference (``positions`` at ``times``, departing from ``start``)
    from ``start`` moving at ``velocity``, within ``limits``, ending at rest at the last point.
    """
    dt, shaped = limits.period, limits.shaped
    step = np.where(shaped, limits.max_acceleration, 0.0) * dt
    slow = np.where(shaped, limits.deceleration, 0.0) * dt
    speed = np.where(shaped, limits.max_speed, 0.0)
    accel = np.where(shaped, limits.deceleration, 1.0)  # stopping distances
    final = positions[-1]
    end = float(times[-1]) if len(times) else 0.0
    count = max(1, math.ceil((end + _MAX_SETTLE) / dt))
    sample_times = dt * np.arange(1, count + 1)
    reference = reference_at(start, times, positions, sample_times)
    q = np.where(shaped, start, reference[0])
    v = np.where(shaped, velocity, 0.0)
    out_q, out_v = [], []
    for k in range(count):
        want = (reference[k] - q) / dt
        want = np.clip(want, -speed, speed)
        want = _braking_cap(want, q, final, accel, dt)
        want = _braking_cap(want, q, np.where(want > 0, limits.upper, limits.lower), accel, dt)
        v_new = np.clip(want, *_velocity_window(v, step, slow))
        # Never past a joint limit, even from a state that cannot brake in time (last resort).
        q_new = np.where(shaped, np.clip(q + v_new * dt, limits.lower, limits.upper), reference[k])
        v_new = (q_new - q) / dt
        out_q.append(q_new)
        out_v.append(v_new)
        q, v = q_new, v_new
        if sample_times[k] >= end and _settled(q, v, final, shaped):
            break
    positions_out = np.array(out_q)
    positions_out[-1, shaped] = np.where(
        np.abs(positions_out[-1, shaped] - final[shaped]) <= _SETTLED,
        final[shaped],
        positions_out[-1, shaped],
    )
    return Shaped(sample_times[: len(out_q)], positions_out, np.array(out_v))


def braking(
    start: np.ndarray, velocity: np.ndarray, limits: ShaperLimits
) -> tuple[np.ndarray, np.ndarray]:
    """(positions, velocities) of samples that bring the shaped joints from ``start`` moving at
    ``velocity`` to rest at full deceleration (the others keep ``start``); at least one."""
    dt, shaped = limits.period, limits.shaped
    step = np.where(shaped, limits.deceleration, 0.0) * dt
    q, v = np.array(start, float), np.where(shaped, velocity, 0.0)
    rows, speeds = [], []
    while True:
        v = np.sign(v) * np.maximum(np.abs(v) - step, 0.0)
        q = q + v * dt
        rows.append(q.copy())
        speeds.append(v.copy())
        if not v.any():
            return np.array(rows), np.array(speeds)


def _velocity_window(
    v: np.ndarray, step: np.ndarray, slow: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) velocity one sample after ``v``: speeding up by at most ``step``,
    slowing toward zero by at most ``slow`` (not past zero in that sample)."""
    lowest = np.where(v > 0, np.minimum(v - step, np.maximum(v - slow, 0.0)), v - step)
    highest = np.where(v < 0, np.maximum(v + step, np.minimum(v + slow, 0.0)), v + step)
    return lowest, highest


def _braking_cap(
    want: np.ndarray, q: np.ndarray, stop_at: np.ndarray, accel: np.ndarray, dt: float
) -> np.ndarray:
    """``want`` slowed where it heads for ``stop_at``: no faster than a speed from which
    braking at ``accel`` (one sample later, piecewise-constant velocity) ends at ``stop_at``."""
    distance = stop_at - q
    toward = np.sign(want) == np.sign(distance)
    half = accel * dt / 2.0
    # Less half a step of margin: the braking's last step is rarely a whole one.
    room = np.maximum(np.abs(distance) - half * dt, 0.0)
    cap = np.sqrt(half**2 + 2.0 * accel * room) - half
    # The last step onto ``stop_at``: short enough to stop from within one step's change.
    cap = np.maximum(cap, np.minimum(np.abs(distance) / dt, accel * dt))
    return np.where(toward, np.sign(want) * np.minimum(np.abs(want), cap), want)


def _settled(q: np.ndarray, v: np.ndarray, final: np.ndarray, shaped: np.ndarray) -> bool:
    near = np.abs(q - final) <= _SETTLED
    slow = np.abs(v) <= _SETTLED / 0.02
    return bool((near | ~shaped).all() and (slow | ~shaped).all())
