"""Spline-parameterised control sequences: a few knots per actuator span the horizon.

Samplers perturb ``P`` knots instead of ``T`` per-step controls (MJPC's
``sampling_spline_points``), which keeps candidates smooth and the search small. A basis matrix
``[T, P]`` turns knots ``[K, P, nu]`` into controls ``[K, T, nu]`` with one matmul.
"""

from __future__ import annotations

import numpy as np

INTERPOLATIONS = ("zero", "linear", "cubic")


def knot_times(horizon: float, knots: int) -> np.ndarray:
    """Knot times relative to the plan's start, evenly spread over the horizon."""
    return np.linspace(0.0, horizon, knots)


def basis(times: np.ndarray, horizon: float, knots: int, kind: str = "linear") -> np.ndarray:
    """Weights ``[len(times), knots]`` so that ``controls = basis @ knot_values``."""
    if kind not in INTERPOLATIONS:
        raise ValueError(f"unknown interpolation '{kind}'; valid: {list(INTERPOLATIONS)}")
    weights = np.zeros((len(times), knots))
    if knots == 1:
        weights[:] = 1.0
        return weights
    step = horizon / (knots - 1)
    position = np.clip(np.asarray(times, float) / step, 0.0, knots - 1 - 1e-9)
    index = np.floor(position).astype(int)
    frac = position - index
    rows = np.arange(len(times))
    if kind == "zero":
        weights[rows, index] = 1.0
    elif kind == "linear":
        weights[rows, index] = 1.0 - frac
        weights[rows, index + 1] = frac
    else:  # Catmull-Rom through the knots, end knots repeated
        s, s2, s3 = frac, frac**2, frac**3
        coefficients = (-0.5 * s3 + s2 - 0.5 * s, 1.5 * s3 - 2.5 * s2 + 1,
                        -1.5 * s3 + 2 * s2 + 0.5 * s, 0.5 * s3 - 0.5 * s2)
        for offset, c in zip((-1, 0, 1, 2), coefficients, strict=True):
            np.add.at(weights, (rows, np.clip(index + offset, 0, knots - 1)), c)
    return weights


def evaluate(knot_values: np.ndarray, horizon: float, t: float, kind: str = "linear"):
    """Control at time ``t`` (relative to the plan start) from knots ``[P, nu]``."""
    return (basis(np.array([t]), horizon, len(knot_values), kind) @ knot_values)[0]


def shift(knot_values: np.ndarray, horizon: float, dt: float, kind: str = "linear"):
    """Knots of the same plan started ``dt`` later (warm start); past the end, hold the last."""
    times = knot_times(horizon, len(knot_values)) + dt
    return basis(times, horizon, len(knot_values), kind) @ knot_values
