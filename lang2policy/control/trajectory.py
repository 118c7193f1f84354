"""Smooth joint-space trajectories: minimum-jerk time scaling over a joint path.

A path is a sequence of joint waypoints (one row each); it is followed at a time scaling whose
peak joint speed stays under a limit, starting and ending at rest.
"""

from __future__ import annotations

import numpy as np


def min_jerk_scale(s: np.ndarray) -> np.ndarray:
    """Minimum-jerk phase 10s^3 - 15s^4 + 6s^5: zero velocity and acceleration at both ends."""
    return s**3 * (10 - 15 * s + 6 * s**2)


_PEAK_RATE = 1.875  # peak of d/ds of the min-jerk phase


def path_length(path: np.ndarray) -> np.ndarray:
    """Cumulative max-norm joint distance along the path (the slowest joint sets the pace)."""
    steps = np.max(np.abs(np.diff(path, axis=0)), axis=1) if len(path) > 1 else np.zeros(0)
    return np.concatenate([[0.0], np.cumsum(steps)])


def duration_for(path: np.ndarray, max_speed: float, min_duration: float = 0.25) -> float:
    """Shortest duration whose peak joint speed stays at or under ``max_speed`` (rad/s)."""
    length = path_length(path)[-1]
    return max(min_duration, _PEAK_RATE * length / max_speed)


def sample_path(path: np.ndarray, duration: float, dt: float) -> np.ndarray:
    """Samples (one row per control period) of ``path`` followed with min-jerk timing."""
    path = np.atleast_2d(np.asarray(path, float))
    count = max(1, int(np.ceil(duration / dt)))
    phase = min_jerk_scale(np.linspace(0.0, 1.0, count + 1)[1:])
    length = path_length(path)
    if length[-1] <= 0:
        return np.repeat(path[-1:], count, axis=0)
    arc = phase * length[-1]
    return np.column_stack([np.interp(arc, length, path[:, j]) for j in range(path.shape[1])])
