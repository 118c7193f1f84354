"""Apply a classified correction to the running reward spec.

``apply_to_spec(correction, spec, objects)`` returns a new, validated spec (the controller
swaps it in with ``LockstepMPC.set_spec`` on its next cycle) and notes on what changed:

- offset: the point-valued targets (``tool_to_point``, ``tool_above``, ``object_to_point``,
  ``push``) move by (dx, dy); dz moves a point's z where its z counts, and the heights of
  ``tool_above`` and ``object_height`` (not an "at most" cap such as "keep it on the table");
- speed: every speed term (``tool_speed``, ``object_speed``) is scaled (or set, for an absolute
  speed); "slower" with no limit adds a ``tool_speed`` cap relative to the speed now (or a
  nominal 0.1 m/s), "faster" with none adds a minimum speed;
- target: the replaced object is renamed in every object parameter (and in the task text);
  points that sat on the old object move to the new one when positions are given.

An edit that does not fit raises ``CorrectionError`` saying what it would apply to; stop and
re-plan corrections are routed elsewhere and raise here too. ``apply_args`` does the same for
one skill call of a code plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lang2policy.corrections.correction import Correction, CorrectionError, describe_offset
from lang2policy.corrections.edits import Positions, not_an_edit, replaced_object, rounded
from lang2policy.rewards.params import ObjectParam
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.rewards.terms import TERMS

POINT_TERMS = ("tool_to_point", "tool_above", "object_to_point", "push")
HEIGHT_TERMS = ("tool_above", "object_height")
SPEED_TERMS = ("tool_speed", "object_speed")
NOMINAL_SPEED = 0.1  # m/s: what "slower" is relative to when nothing says how fast it goes
SPEED_LIMIT_WEIGHT = 10.0  # as the reward API's set_speed_limit
MIN_SPEED_WEIGHT = 2.0  # as set_min_speed
SAME_SPOT = 0.015  # m: a point this close (xy) to the replaced object was "at" that object


@dataclass(frozen=True)
class Applied:
    """A corrected spec, what changed (term ids) and notes for the user."""

    spec: RewardSpec
    changed: tuple[str, ...]
    notes: tuple[str, ...]


# --------------------------------------------------------------------------- reward specs
def apply_to_spec(
    correction: Correction,
    spec: RewardSpec,
    objects: Sequence[str],
    *,
    positions: Positions | None = None,
    current_speed: float | None = None,
) -> Applied:
    """``spec`` with ``correction`` applied and re-validated against ``objects``.

    ``positions`` (object name -> [x, y, z]) lets a target change move points that were at the
    old object; ``current_speed`` (m/s, the tool's speed now) is what "slower" scales when
    the spec has no speed limit.
    """
    data = spec.to_dict()
    terms: list[dict[str, Any]] = data["terms"]
    notes: list[str] = []
    if correction.kind == "offset":
        changed = _offset_terms(terms, correction.offset or (0.0, 0.0, 0.0), notes)
    elif correction.kind == "speed":
        changed = _speed_terms(terms, correction, current_speed, notes)
    elif correction.kind == "target":
        changed = _target_terms(data, correction, positions, notes)
    else:
        raise not_an_edit(correction)
    validated = validate_spec(data, objects, add_defaults=False)
    notes += validated.notes
    return Applied(validated.spec, tuple(changed), tuple(notes))


def _offset_terms(terms: list[dict], offset: Sequence[float], notes: list[str]) -> list[str]:
    dx, dy, dz = offset
    changed, raised = [], False
    for term in terms:
        params, name = term["params"], term["term"]
        moved = False
        if name in POINT_TERMS and (dx or dy or (dz and _z_counts(term))):
            x, y, z = params["point"]
            params["point"] = rounded([x + dx, y + dy, z + (dz if _z_counts(term) else 0.0)])
            moved, raised = True, raised or bool(dz and _z_counts(term))
        if dz and name in HEIGHT_TERMS and params.get("mode") != "at_most":
            params["height"] = round(params["height"] + dz, 6)
            moved = raised = True
        if moved:
            changed.append(term["id"])
    if (dx or dy) and not any(t["term"] in POINT_TERMS for t in terms):
        raise CorrectionError(_no_target("a sideways offset", "a point target", terms))
    if dz and not raised:
        if not changed:
            raise CorrectionError(_no_target("an up/down offset", "a height or a 3-D point", terms))
        notes.append("the up/down part had no effect: no height or 3-D point in the task")
    notes.append(f"moved {', '.join(changed)} by {describe_offset(offset)}")
    return changed


def _z_counts(term: Mapping[str, Any]) -> bool:
    """Whether a point's z is part of the target (not for pushes or "xy" points)."""
    if term["term"] in ("push", "tool_above"):
        return False  # a push ignores z; tool_above's height is edited instead
    return term["params"].get("axes", "xyz") != "xy"


def _no_target(what: str, needs: str, terms: list[dict]) -> str:
    return (
        f"{what} needs {needs} to move, and this task has none (its terms: "
        f"{', '.join(sorted({t['term'] for t in terms}))}); offsets move the points of "
        f"{', '.join(POINT_TERMS)} and up/down also the heights of {', '.join(HEIGHT_TERMS)}."
        " To move relative to an object, say it as an instruction (e.g. 'hover 2 cm left "
        "of the red block')"
    )


def _speed_terms(
    terms: list[dict], correction: Correction, current: float | None, notes: list[str]
) -> list[str]:
    limits = [t for t in terms if t["term"] in SPEED_TERMS]
    changed = []
    for term in limits:
        if correction.speed is not None and term["term"] != "tool_speed":
            continue  # an absolute speed is the tool's; an object's target speed stays
        before = term["params"]["speed"]
        after = _new_speed(before, correction, term["params"]["mode"])
        if after != before:
            term["params"]["speed"] = after
            changed.append(term["id"])
            notes.append(f"{term['id']}: {term['params']['mode']} {before:g} -> {after:g} m/s")
    caps = [t for t in limits if t["term"] == "tool_speed" and t["params"]["mode"] == "at_most"]
    slower = correction.speed is not None or (correction.factor or 1.0) < 1.0
    if slower and not caps:
        changed.append(_add_speed_term(terms, "at_most", correction, current, notes))
    elif not slower and not limits:
        changed.append(_add_speed_term(terms, "at_least", correction, current, notes))
    return changed


def _new_speed(before: float, correction: Correction, mode: str) -> float:
    if correction.speed is None:
        return round(before * (correction.factor or 1.0), 6)
    if mode == "at_least":  # a minimum above the asked speed would contradict it
        return min(before, correction.speed)
    return correction.speed


def _add_speed_term(
    terms: list[dict], mode: str, correction: Correction, current: float | None, notes: list[str]
) -> str:
    """A tool speed cap ("slower") or minimum ("faster") where the task had none: relative to
    the speed now when it is known and moving, else to ``NOMINAL_SPEED``."""
    measured = current is not None and math.isfinite(current) and current > 0.01
    base = float(current) if measured else NOMINAL_SPEED  # type: ignore[arg-type]
    if correction.speed is not None:
        speed, how = correction.speed, ""
    else:
        factor = correction.factor or 1.0
        speed = base * factor
        how = f" ({factor:g} x {'the speed now,' if measured else 'a nominal'} {base:.3g} m/s)"
    term_id = _free_id({t["id"] for t in terms}, "speed")
    weight = SPEED_LIMIT_WEIGHT if mode == "at_most" else MIN_SPEED_WEIGHT
    params = {"speed": round(speed, 6), "mode": mode}
    terms.append({"id": term_id, "term": "tool_speed", "weight": weight, "params": params})
    notes.append(f"added {term_id}: tool speed {mode} {speed:.3g} m/s{how}")
    return term_id


def _free_id(ids: set[str], stem: str) -> str:
    if stem not in ids:
        return stem
    return next(f"{stem}_{i}" for i in range(2, 1000) if f"{stem}_{i}" not in ids)


def _object_keys(term: Mapping[str, Any]) -> list[str]:
    return [p.name for p in TERMS[term["term"]].params if isinstance(p, ObjectParam)]


def objects_in_spec(spec: RewardSpec, positions: Positions | None = None) -> list[str]:
    """The objects a spec acts on, in order of first use ("tool" excluded); with
    ``positions``, also the objects its point targets sit on (a hover over the red block)."""
    return _acting([t.to_dict() for t in spec.terms], positions)


def _acting(terms: list[dict], positions: Positions | None) -> list[str]:
    named = [
        t["params"][k]
        for t in terms
        for k in _object_keys(t)
        if t["params"].get(k) not in (None, "tool")
    ]
    return list(dict.fromkeys([*named, *_objects_at_points(terms, positions)]))


def _objects_at_points(terms: list[dict], positions: Positions | None) -> list[str]:
    points = [t["params"]["point"] for t in terms if t["term"] in POINT_TERMS]
    return [
        name
        for name, where in (positions or {}).items()
        if any(math.hypot(p[0] - where[0], p[1] - where[1]) <= SAME_SPOT for p in points)
    ]


def _target_terms(
    data: dict, correction: Correction, positions: Positions | None, notes: list[str]
) -> list[str]:
    terms: list[dict] = data["terms"]
    old = replaced_object(correction, _acting(terms, positions))
    new = str(correction.target)
    changed = []
    for term in terms:
        keys = [k for k in _object_keys(term) if term["params"].get(k) == old]
        for key in keys:
            term["params"][key] = new
        if keys and len({term["params"][k] for k in _object_keys(term)}) < len(_object_keys(term)):
            raise CorrectionError(
                f"swapping {old} for {new} would make {term['id']} act on "
                f"{new} twice; say the whole task instead"
            )
        if keys:
            changed.append(term["id"])
    changed += _move_points(terms, old, new, positions, notes)
    data["task"] = data["task"].replace(old, new)
    notes.insert(0, f"{old} -> {new} in {', '.join(dict.fromkeys(changed))}")
    return list(dict.fromkeys(changed))


def _move_points(
    terms: list[dict], old: str, new: str, positions: Positions | None, notes: list[str]
) -> list[str]:
    points = [t for t in terms if t["term"] in POINT_TERMS]
    if not points:
        return []
    if positions is None or old not in positions or new not in positions:
        notes.append("points were left where they are (object positions not given)")
        return []
    (ox, oy), (nx, ny) = positions[old][:2], positions[new][:2]
    moved = []
    for term in points:
        x, y, z = term["params"]["point"]
        if math.hypot(x - ox, y - oy) <= SAME_SPOT:
            term["params"]["point"] = rounded([nx + (x - ox), ny + (y - oy), z])
            moved.append(term["id"])
    if moved:
        notes.append(f"moved {', '.join(moved)} from the {old} to the {new}")
    return moved
