"""The one safety clamp every robot backend applies before anything moves.

Pure and shared: it validates a joint-position action (names, finiteness) and clips it to the
joint limits, to a maximum step from the previous command (a rate limit) and to a maximum
distance from the measured position (so a stuck or lagging arm is never commanded far ahead).
Clipping is reported, not hidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import InvalidCommandError


@dataclass(frozen=True)
class JointLimits:
    """Limits of the action vector, in ``names`` order (arm joints in rad, gripper in 0..1)."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    max_step: np.ndarray  # largest change from the previous command
    max_deviation: np.ndarray  # largest distance of a command from the measured position


@dataclass(frozen=True)
class ClampResult:
    action: np.ndarray
    clipped: tuple[str, ...]  # names of the entries that were changed


def action_vector(action: Mapping[str, float] | np.ndarray, limits: JointLimits) -> np.ndarray:
    """Turn a name->value mapping (or a vector in ``limits.names`` order) into a vector."""
    if isinstance(action, Mapping):
        unknown = sorted(set(action) - set(limits.names))
        missing = [n for n in limits.names if n not in action]
        if unknown or missing:
            raise InvalidCommandError(
                f"action must name exactly {list(limits.names)}; unknown: {unknown}, "
                f"missing: {missing}"
            )
        values = [action[n] for n in limits.names]
    else:
        values = action
    try:
        vector = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidCommandError(f"action values must be numbers: {exc}") from exc
    if vector.shape != (len(limits.names),):
        raise InvalidCommandError(
            f"action must have {len(limits.names)} values ({list(limits.names)}), "
            f"got shape {vector.shape}"
        )
    return vector


def clamp_action(
    action: Mapping[str, float] | np.ndarray,
    current: np.ndarray,
    limits: JointLimits,
    previous: np.ndarray | None = None,
) -> ClampResult:
    """Validate and clip ``action``; raises InvalidCommandError on NaN/inf or bad names.

    ``current`` is the measured position, ``previous`` the last command sent (None at first).
    """
    vector = action_vector(action, limits)
    bad = [n for n, v in zip(limits.names, vector, strict=True) if not np.isfinite(v)]
    if bad:
        raise InvalidCommandError(f"action has non-finite values for {bad}; nothing was sent")
    reference = current if previous is None else previous
    clipped = np.clip(vector, reference - limits.max_step, reference + limits.max_step)
    clipped = np.clip(clipped, current - limits.max_deviation, current + limits.max_deviation)
    clipped = np.clip(clipped, limits.lower, limits.upper)
    changed = tuple(n for n, a, b in zip(limits.names, vector, clipped, strict=True) if a != b)
    return ClampResult(clipped, changed)
