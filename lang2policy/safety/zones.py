"""Boxes for the tool centre point: the workspace it must stay in, keep-out zones it must avoid.

Each zone measures a *depth of violation* (metres): how far a point is outside the workspace, or
how deep inside a keep-out box. Zero means the point is fine. The motion filter lets a path go
on only while no depth grows, so an arm that is already outside (after start-up or a manual
move) can be brought back but never pushed further in the wrong direction. Depths of many
points against all zones are computed at once (numpy), since every command checks a path.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lang2policy.safety.config import BoxConfig


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
