"""Declared parameters of reward terms: every number has a default and a [min, max] range.

Values come from LLM output or hand-written specs, so each declaration knows how to check one:
``check(value, objects)`` returns the value to use and, when a number was out of range, a note
saying what was clamped. Non-finite numbers, wrong types and unknown objects raise
``RewardSpecError`` with the valid choices. Clamping (not rejecting) out-of-range numbers is the
documented rule, because a correction like "much higher" should saturate, not fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lang2policy.errors import RewardSpecError


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RewardSpecError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise RewardSpecError(f"{where}: {value} is not a finite number")
    return float(value)


def clamp(value: float, low: float, high: float, where: str, notes: list[str]) -> float:
    """``value`` limited to [low, high]; appends a note when it had to be moved."""
    if value < low or value > high:
        kept = min(max(value, low), high)
        notes.append(f"{where}: {value:g} is outside [{low:g}, {high:g}], clamped to {kept:g}")
        return kept
    return value


@dataclass(frozen=True)
class NumberParam:
    name: str
    default: float
    low: float
    high: float
    unit: str
    doc: str

    def check(self, value: object, where: str, objects: Sequence[str], notes: list[str]) -> float:
        return clamp(_number(value, where), self.low, self.high, where, notes)

    def schema(self, objects: Sequence[str]) -> dict:
        return {"type": "number", "minimum": self.low, "maximum": self.high,
                "default": self.default, "description": f"{self.doc} ({self.unit})"}


@dataclass(frozen=True)
class PointParam:
    """A point in the world frame (metres), bounded per axis."""

    name: str
    default: tuple[float, float, float]
    low: tuple[float, float, float]
    high: tuple[float, float, float]
    doc: str
    unit: str = "m"

    def check(self, value: object, where: str, objects: Sequence[str],
              notes: list[str]) -> tuple[float, float, float]:
        if not isinstance(value, list | tuple) or len(value) != 3:
            raise RewardSpecError(f"{where}: expected [x, y, z] in metres, got {value!r}")
        x, y, z = (
            clamp(_number(v, f"{where}[{i}]"), lo, hi, f"{where}[{i}]", notes)
            for i, (v, lo, hi) in enumerate(zip(value, self.low, self.high, strict=True))
        )
        return (x, y, z)

    def schema(self, objects: Sequence[str]) -> dict:
        return {"type": "array", "minItems": 3, "maxItems": 3, "default": list(self.default),
                "items": {"type": "number"},
                "description": f"{self.doc} ([x, y, z] m; x in [{self.low[0]}, {self.high[0]}], "
                               f"y in [{self.low[1]}, {self.high[1]}], "
                               f"z in [{self.low[2]}, {self.high[2]}])"}


@dataclass(frozen=True)
class ObjectParam:
    """The name of an object in the scene ("red block")."""

    name: str
    doc: str
    default: str | None = None
    unit: str = ""
    also: tuple[str, ...] = ()  # names allowed besides objects ("tool")

    def check(self, value: object, where: str, objects: Sequence[str], notes: list[str]) -> str:
        valid = [*self.also, *sorted(objects)]
        if not isinstance(value, str) or value not in valid:
            raise RewardSpecError(f"{where}: unknown object {value!r}; valid: {valid}")
        return value

    def schema(self, objects: Sequence[str]) -> dict:
        return {"type": "string", "enum": [*self.also, *sorted(objects)], "description": self.doc}


@dataclass(frozen=True)
class ChoiceParam:
    name: str
    choices: tuple[str, ...]
    default: str
    doc: str
    unit: str = ""

    def check(self, value: object, where: str, objects: Sequence[str], notes: list[str]) -> str:
        if value not in self.choices:
            raise RewardSpecError(f"{where}: {value!r} is not one of {list(self.choices)}")
        return str(value)

    def schema(self, objects: Sequence[str]) -> dict:
        return {"type": "string", "enum": list(self.choices), "default": self.default,
                "description": self.doc}


Param = NumberParam | PointParam | ObjectParam | ChoiceParam

# Bounds of points anywhere a small arm on our table could reach (metres, world frame).
POINT_LOW = (-0.2, -0.5, 0.0)
POINT_HIGH = (0.6, 0.5, 0.5)
