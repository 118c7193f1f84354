"""Boxes for the tool centre point: the workspace it must stay in, keep-out zones it must avoid.

Each zone measures a *depth of violation* (metres): how far a point is outside the workspace, or
how deep inside a keep-out box. Zero means the point is fine. The motion filter and the guard
let a path go on only while no depth grows beyond the sample before it and, for the workspace
box, beyond the depth where the arm already is (``first_deeper``'s floor). So an arm that is
already outside (after start-up, a manual move, or a servo that sags a few millimetres past its
target at the box's edge) can be brought back, along a path that may wander as deep as it
already is, but never further out. Without the floor an arm resting 1 mm outside was held for
good: every path whose first millimetres arced outward by a fraction of a millimetre was cut
at its start. An arm further out than ``RECOVERY_DEPTH`` (it rests where a target it could not
reach left it) comes back along any path that stays within its depth and ends nearer the box.
Depths of many points against all zones are computed at once (numpy), since every command
checks a path.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lang2policy.safety.config import BoxConfig

DEPTH_TOLERANCE = 1e-6  # m: numerical noise when a path runs along a box face
# The most (m) a path may wander outside the workspace box because the arm already is that far
# out: the servo's sag and overshoot at the box's edge (1-4 mm seen on the SO-101 at full
# reach). Capped so that repeated overshoot cannot ratchet the arm outward; an arm further out
# comes back along paths that never go deeper than it is and end shallower (``first_deeper``).
RECOVERY_DEPTH = 0.005


def fmt_point(point) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in point) + "]"


class Zones:
    """The workspace box (index 0) and the keep-out boxes, in the world frame (metres)."""

    def __init__(self, workspace: BoxConfig, keep_out: Mapping[str, BoxConfig]) -> None:
        self.names = ("workspace", *keep_out)
        boxes = [workspace, *keep_out.values()]
        self.lower = np.array([b.min for b in boxes], float)  # (zones, 3)
        self.upper = np.array([b.max for b in boxes], float)
        self.keep_out = np.array([False] + [True] * len(keep_out))

    def depths(self, points: np.ndarray) -> np.ndarray:
        """Depth of violation (m) of each point (rows) in each zone: shape (points, zones)."""
        p = np.asarray(points, float)[:, None, :]
        below, above = self.lower - p, p - self.upper
        outside = np.linalg.norm(np.maximum(np.maximum(below, above), 0.0), axis=2)
        inside = np.maximum(np.minimum(-below, -above).min(axis=2), 0.0)
        return np.where(self.keep_out, inside, outside)

    def describe(self, index: int) -> str:
        box = f"(min {fmt_point(self.lower[index])}, max {fmt_point(self.upper[index])})"
        if self.keep_out[index]:
            return f"keep-out zone '{self.names[index]}' {box}"
        return f"the workspace box {box}"


def first_deeper(
    depths: np.ndarray, keep_out: np.ndarray, floor: np.ndarray | None = None
) -> tuple[int, int] | None:
    """(sample, zone) of the first path sample (rows of ``depths``; row 0 is where the path
    starts) that is deeper in a zone than the sample before it and, for the workspace box,
    than ``floor`` (per zone: how deep the arm already is; row 0 when not given; at most
    ``RECOVERY_DEPTH``), or None when the path is allowed. Inside a keep-out zone every sample
    must get shallower: the way out, never a stroll at the depth the arm reached.

    Further outside the workspace box than ``RECOVERY_DEPTH``, a path that never gets deeper
    than where the arm is and ends shallower is on its way back and passes whole, however it
    wavers on the way (an MPC's first steps from a rest past the box, after a target it could
    not reach, arc outward by a few millimetres: cut sample by sample, every command was, and
    the arm held outside for good). Each such path ends nearer the box, so no ratchet."""
    start = depths[0] if floor is None else np.maximum(floor, depths[0])
    allowed = np.where(keep_out, 0.0, np.minimum(start, RECOVERY_DEPTH))
    limit = np.maximum(depths[:-1], allowed) + DEPTH_TOLERANCE
    deeper = depths[1:] > limit
    deeper[:, _returning(depths, keep_out, start)] = False
    worse = np.flatnonzero(deeper.any(axis=1))
    if not worse.size:
        return None
    bad = int(worse[0]) + 1
    return bad, int(np.flatnonzero(deeper[bad - 1])[0])


def _returning(depths: np.ndarray, keep_out: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per zone: the workspace box, the arm further out than ``RECOVERY_DEPTH``, and a path
    whose samples stay within the start's depth and whose last sample is shallower."""
    within = depths.max(axis=0) <= start + DEPTH_TOLERANCE
    closer = depths[-1] < start - DEPTH_TOLERANCE
    return ~keep_out & (start > RECOVERY_DEPTH) & within & closer
