"""A classified correction: its kind, the edit it carries, and the ranges that edit must be in.

``Correction`` checks itself when built, whether the rules made it or it was read back from the
memory on disk, so no correction anywhere carries a 5 m offset or a 50 m/s speed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lang2policy.errors import Lang2PolicyError

KINDS_OF_CORRECTION = ("stop", "speed", "offset", "target", "replan")
MAX_TEXT = 300
MAX_NAME = 80  # characters of an object name in a correction
MAX_OFFSET = 0.15  # m per axis: more than this is a new goal, not a correction
SPEED_RANGE = (0.005, 1.0)  # m/s, for absolute speeds
FACTOR_RANGE = (0.05, 5.0)
EDIT_FIELDS = ("factor", "speed", "target", "replaces", "offset")  # what an edit carries


class CorrectionError(Lang2PolicyError):
    """A correction is malformed or cannot be applied; the message says what would work."""


@dataclass(frozen=True)
class Correction:
    """One classified correction; the fields that do not belong to its ``kind`` are None."""

    kind: str
    text: str
    factor: float | None = None  # speed: multiply the speed (limit) by this
    speed: float | None = None  # speed: an absolute speed in m/s instead of a factor
    offset: tuple[float, float, float] | None = None  # offset: (dx, dy, dz) in metres
    target: str | None = None  # target: the scene object meant
    replaces: str | None = None  # target: the object it replaces, when it is known

    def __post_init__(self) -> None:
        """Every correction, classified or read back from the memory, is within the ranges the
        rules produce: a record on disk cannot carry a 5 m offset or a 50 m/s speed."""
        if self.kind not in KINDS_OF_CORRECTION:
            raise CorrectionError(
                f"unknown correction kind {self.kind!r}; kinds: {list(KINDS_OF_CORRECTION)}"
            )
        if not isinstance(self.text, str) or len(self.text) > MAX_TEXT:
            raise CorrectionError(
                f"a correction's text is a string of at most {MAX_TEXT} characters"
            )
        _check_in_range(self.factor, FACTOR_RANGE, "speed factor")
        _check_in_range(self.speed, SPEED_RANGE, "speed (m/s)")
        if self.offset is not None:
            for value in self.offset:
                _check_in_range(value, (-MAX_OFFSET, MAX_OFFSET), "offset per axis (m)")
        for name in (self.target, self.replaces):
            if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME):
                raise CorrectionError(
                    f"an object name is a string of at most {MAX_NAME} characters"
                )

    def edit(self) -> dict[str, Any]:
        """The edit as JSON data: the kind's own fields, without the text."""
        fields = {name: getattr(self, name) for name in EDIT_FIELDS}
        if self.offset is not None:
            fields["offset"] = list(self.offset)
        return {k: v for k, v in fields.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.edit()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Correction:
        """The inverse of ``to_dict`` (records read back from the memory), checked."""
        if not isinstance(data, Mapping) or data.get("kind") not in KINDS_OF_CORRECTION:
            raise CorrectionError(
                f"a correction needs a 'kind' in {list(KINDS_OF_CORRECTION)}; got {data!r:.200}"
            )
        unknown = set(data) - {"kind", "text", *EDIT_FIELDS}
        if unknown:
            raise CorrectionError(f"unknown correction fields {sorted(unknown)}")
        offset = data.get("offset")
        if offset is not None:
            if not isinstance(offset, list | tuple) or len(offset) != 3:
                raise CorrectionError(f"offset must be [dx, dy, dz] in metres, got {offset!r}")
            offset = tuple(_finite(v, "offset") for v in offset)
        return cls(
            kind=data["kind"],
            text=str(data.get("text", "")),
            factor=_optional(data.get("factor"), "factor"),
            speed=_optional(data.get("speed"), "speed"),
            offset=offset,  # type: ignore[arg-type]
            target=_name(data.get("target"), "target"),
            replaces=_name(data.get("replaces"), "replaces"),
        )

    def describe(self) -> str:
        """A short human description: "offset 2.0 cm left", "speed x0.5", "target blue block"."""
        if self.kind == "offset" and self.offset is not None:
            return "offset " + describe_offset(self.offset)
        if self.kind == "speed":
            return (
                f"speed {self.speed:g} m/s" if self.speed is not None else f"speed x{self.factor:g}"
            )
        if self.kind == "target":
            swap = f"{self.replaces} -> " if self.replaces else ""
            return f"target {swap}{self.target}"
        return self.kind if self.kind == "stop" else f"replan: {self.text}"


def _check_in_range(value: float | None, bounds: tuple[float, float], name: str) -> None:
    if value is None:
        return
    low, high = bounds
    if not (isinstance(value, int | float) and math.isfinite(value) and low <= value <= high):
        raise CorrectionError(f"{name} must be within [{low:g}, {high:g}], got {value!r:.40}")


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CorrectionError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _name(value: object, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise CorrectionError(f"{name} must be an object name, got {value!r:.80}")
    return value


def _optional(value: object, name: str) -> float | None:
    return None if value is None else _finite(value, name)


def describe_offset(offset: Sequence[float]) -> str:
    """ "2.0 cm left, 1.0 cm up" for (0, 0.02, 0.01)."""
    names = (("forward", "closer"), ("left", "right"), ("up", "down"))
    parts = [
        f"{abs(v) * 100:.1f} cm {names[i][0] if v > 0 else names[i][1]}"
        for i, v in enumerate(offset)
        if abs(v) > 1e-9
    ]
    return ", ".join(parts) or "none"
