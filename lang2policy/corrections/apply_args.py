"""Apply a correction to one skill call of a code plan.

``apply_to_args(correction, skill, args, objects)`` edits the call's ``obj``/``target``/
``position``/``speed`` (see ``lang2policy.skills.catalog``) and returns the complete, validated
arguments; an edit that does not fit raises ``CorrectionError`` saying what it would apply to.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lang2policy.corrections.correction import Correction, CorrectionError, describe_offset
from lang2policy.corrections.edits import Positions, not_an_edit, replaced_object, rounded
from lang2policy.errors import InvalidIntentError
from lang2policy.skills.catalog import SKILLS


@dataclass(frozen=True)
class AppliedArgs:
    """Corrected (complete, validated) arguments of one skill call, and notes."""

    skill: str
    args: dict[str, Any]
    notes: tuple[str, ...]


def apply_to_args(
    correction: Correction,
    skill: str,
    args: Mapping[str, Any],
    objects: Sequence[str],
    *,
    positions: Positions | None = None,
) -> AppliedArgs:
    """The arguments of ``skill`` (a catalog skill: pick, place, move_to, push ...) with
    ``correction`` applied; ``positions`` lets an offset turn an object target into a point."""
    if skill not in SKILLS:
        raise CorrectionError(f"unknown skill {skill!r}; skills: {', '.join(SKILLS)}")
    definition = SKILLS[skill]
    bound = definition.bind(dict(args))
    notes: list[str] = []
    if correction.kind == "offset":
        _offset_args(skill, bound, correction.offset or (0.0, 0.0, 0.0), positions, notes)
    elif correction.kind == "speed":
        _speed_args(skill, bound, correction, notes)
    elif correction.kind == "target":
        _target_args(skill, bound, correction, objects, notes)
    else:
        raise not_an_edit(correction)
    try:
        checked = definition.bind(bound)
    except InvalidIntentError as exc:
        raise CorrectionError(f"the corrected call is not valid: {exc}") from None
    return AppliedArgs(skill, checked, tuple(notes))


def objects_in_args(skill: str, args: Mapping[str, Any]) -> list[str]:
    """Objects a skill call names (``obj``, and ``target`` when it is a name)."""
    definition = SKILLS.get(skill)
    if definition is None:
        raise CorrectionError(f"unknown skill {skill!r}; skills: {', '.join(SKILLS)}")
    return [
        args[k]
        for k in ("obj", "target")
        if definition.param(k) is not None and isinstance(args.get(k), str)
    ]


def _offset_args(
    skill: str, bound: dict, offset: Sequence[float], positions: Positions | None, notes: list[str]
) -> None:
    key = "position" if "position" in bound else "target" if "target" in bound else None
    if key is None:
        with_points = [
            s.name for s in SKILLS.values() if {p.name for p in s.params} & {"position", "target"}
        ]
        raise CorrectionError(
            f"{skill}() has no position to shift; offsets apply to "
            f"{', '.join(with_points)} (their position or target)"
        )
    value = bound[key]
    if isinstance(value, str):
        if positions is None or value not in positions:
            raise CorrectionError(
                f"{skill}(target={value!r}): to shift an object target the "
                f"position of the {value} is needed"
            )
        notes.append(f"{key}: the {value} became a point next to it")
        value = list(positions[value])
    bound[key] = rounded([float(v) + float(d) for v, d in zip(value, offset, strict=True)])
    if offset[2] and skill in ("place", "put_first_on_second", "push"):
        notes.append(f"{skill}() ignores the height of its target: the up/down part has no effect")
    notes.append(f"{key} moved by {describe_offset(offset)}")


def _speed_args(skill: str, bound: dict, correction: Correction, notes: list[str]) -> None:
    param = SKILLS[skill].param("speed")
    if param is None:
        with_speed = [s.name for s in SKILLS.values() if s.param("speed") is not None]
        raise CorrectionError(
            f"{skill}() takes no speed; skills with a speed: {', '.join(with_speed)}"
        )
    before = float(bound["speed"])
    wanted = (
        correction.speed if correction.speed is not None else before * (correction.factor or 1.0)
    )
    low, high = float(param.minimum or 0.0), float(param.maximum or math.inf)
    after = round(min(max(wanted, low), high), 6)
    if after != round(wanted, 6):
        notes.append(f"speed {wanted:g} m/s is outside [{low:g}, {high:g}], clamped to {after:g}")
    bound["speed"] = after
    notes.append(f"speed {before:g} -> {after:g} m/s")


def _target_args(
    skill: str, bound: dict, correction: Correction, objects: Sequence[str], notes: list[str]
) -> None:
    if correction.target not in objects:
        raise CorrectionError(
            f"the {correction.target} is not on the table; objects: {sorted(objects)}"
        )
    old = replaced_object(correction, objects_in_args(skill, bound))
    for key in ("obj", "target"):
        if bound.get(key) == old:
            bound[key] = correction.target
            notes.append(f"{key}: {old} -> {correction.target}")
    if bound.get("obj") is not None and bound.get("obj") == bound.get("target"):
        raise CorrectionError(
            f"{skill}(): obj and target would both be the "
            f"{correction.target}; say the whole task instead"
        )
