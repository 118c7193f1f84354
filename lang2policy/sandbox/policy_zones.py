"""Zones for the privilege policy: named axis-aligned boxes in the world frame (metres).

A zone is what a policy rule means by "inside": ``targets_in: workspace`` holds when every
Cartesian point a skill call will move the tool to lies in the box. ``workspace_box`` derives the
predefined ``workspace`` zone from a robot description, so one policy file fits every arm.
Also home to the number/point formatting shared by every policy message (reasons are read by
people and fed back to the LLM, so they must be short and exact).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lang2policy.scene.robot_description import RobotDescription

Point = tuple[float, float, float]

# The x, y ranges in config/robots/<name>.yaml say where objects are placed; the tool also goes
# a little past an object's centre (grasping its far side, pushing it to a point near the edge),
# so the policy's box is 5 cm wider on each side.
WORKSPACE_MARGIN = 0.05
# z: the table surface (z = 0) up to 0.45 m. 0.40 m would cover the tool's reach above the table
# for both arms, but the Panda's home tool point is 0.398 m high (config/robots/panda.yaml: "40 cm
# above the table"; FK of home measured at z = 0.3985), so 0.40 would leave 1.5 mm and go_home, or
# a move_to the current pose, could be denied by settling jitter. 0.45 leaves 5 cm. (SO-101 home
# is at z = 0.10, x = 0.16; Panda home at x = 0.45: both well inside the x, y box.)
WORKSPACE_Z = (0.0, 0.45)


def is_finite_number(value: Any) -> bool:
    """A real number (int, float, numpy scalar), not a bool, neither NaN nor infinite."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def fmt_num(value: float) -> str:
    """A number in at most 3 decimals without trailing zeros: 0.9, 0.125, -0.3, 0, nan."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return repr(value)
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_point(point: Sequence[float]) -> str:
    return "[" + ", ".join(fmt_num(v) for v in point) + "]"


def fmt_value(value: Any) -> str:
    """A JSON-like rendering of an argument value with numbers shortened."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return fmt_num(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(fmt_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def fmt_schema(schema: Any) -> str:
    """A one-line JSON rendering of a JSON Schema (as written in the policy)."""
    return json.dumps(schema, separators=(", ", ": "), default=str)


@dataclass(frozen=True)
class Box:
    """An axis-aligned box; ``min`` and ``max`` are its corners [x, y, z] in metres."""

    min: Point
    max: Point

    def __post_init__(self) -> None:
        for corner in (self.min, self.max):
            if len(corner) != 3 or not all(is_finite_number(v) for v in corner):
                raise ValueError(f"a box corner must be 3 finite numbers, got {corner!r}")
        if any(lo > hi for lo, hi in zip(self.min, self.max, strict=True)):
            raise ValueError(f"box min {list(self.min)} exceeds max {list(self.max)}")

    def contains(self, p: Sequence[float]) -> bool:
        """True when ``p`` is 3 finite numbers inside the box (faces included)."""
        if type(p) is tuple and len(p) == 3 and all(type(v) is float for v in p):
            # The hot path: requests carry tuples of floats, hundreds per motion (the gripper's
            # sweep). Every comparison with NaN is false and the corners are finite, so NaN and
            # infinities are outside without a separate check.
            (x0, y0, z0), (x1, y1, z1), (x, y, z) = self.min, self.max, p
            return x0 <= x <= x1 and y0 <= y <= y1 and z0 <= z <= z1
        if len(p) != 3 or not all(is_finite_number(v) for v in p):
            return False
        return all(lo <= v <= hi for lo, v, hi in zip(self.min, p, self.max, strict=True))

    def contains_box(self, other: Box) -> bool:
        """True when every point of ``other`` is inside this box."""
        return all(a <= b for a, b in zip(self.min, other.min, strict=True)) and all(
            b <= a for a, b in zip(self.max, other.max, strict=True)
        )

    def __str__(self) -> str:
        return f"min {fmt_point(self.min)}, max {fmt_point(self.max)}"


def overlap(boxes: Sequence[Any]) -> tuple[Point, Point] | None:
    """The (min, max) corners of the box inside every one of ``boxes`` (anything with ``min``
    and ``max`` corners), or None when they leave no room (faces that only touch count as
    none): the one box intersection of the privilege gate and the skill topic's limits."""
    x0, y0, z0 = (max(float(b.min[i]) for b in boxes) for i in range(3))
    x1, y1, z1 = (min(float(b.max[i]) for b in boxes) for i in range(3))
    low, high = (x0, y0, z0), (x1, y1, z1)
    if any(lo >= hi for lo, hi in zip(low, high, strict=True)):
        return None
    return low, high


def workspace_box(description: RobotDescription) -> Box:
    """The robot's ``workspace`` zone: its x, y ranges widened by 5 cm, z from the table up."""
    ws = description.workspace
    m = WORKSPACE_MARGIN
    return Box(
        min=(ws.x[0] - m, ws.y[0] - m, WORKSPACE_Z[0]),
        max=(ws.x[1] + m, ws.y[1] + m, WORKSPACE_Z[1]),
    )
