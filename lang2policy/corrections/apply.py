"""Apply a classified correction to what runs: a reward spec, or the arguments of a skill call.

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

``apply_to_args(correction, skill, args, objects)`` does the same for one skill call of a code
plan (``obj``/``target``/``position``/``speed``, see ``lang2policy.skills.catalog``). An edit that
does not fit raises ``CorrectionError`` saying what it would apply to; stop and re-plan
corrections are routed elsewhere and raise here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lang2policy.corrections.classify import Correction, CorrectionError, describe_offset
from lang2policy.errors import InvalidIntentError
from lang2policy.rewards.params import ObjectParam
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.rewards.terms import TERMS
from lang2policy.skills.catalog import SKILLS

POINT_TERMS = ("tool_to_point", "tool_above", "object_to_point", "push")
HEIGHT_TERMS = ("tool_above", "object_height")
SPEED_TERMS = ("tool_speed", "object_speed")
NOMINAL_SPEED = 0.1  # m/s: what "slower" is relative to when nothing says how fast it goes
SPEED_LIMIT_WEIGHT = 10.0  # as the reward API's set_speed_limit
MIN_SPEED_WEIGHT = 2.0  # as set_min_speed
SAME_SPOT = 0.015  # m: a point this close (xy) to the replaced object was "at" that object
Positions = Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class Applied:
    """A corrected spec, what changed (term ids) and notes for the user."""

    spec: RewardSpec
    changed: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class AppliedArgs:
    """Corrected (complete, validated) arguments of one skill call, and notes."""

    skill: str
    args: dict[str, Any]
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
        raise _not_an_edit(correction)
    validated = validate_spec(data, objects, add_defaults=False)
    notes += validated.notes
    return Applied(validated.spec, tuple(changed), tuple(notes))


def _not_an_edit(correction: Correction) -> CorrectionError:
    if correction.kind == "stop":
        return CorrectionError(
            "'stop' is not an edit: halt the robot (the safety node's "
            "/lang2policy/stop), then give a new instruction"
        )
    return CorrectionError(
        f"'{correction.text}' is a plan-level correction: re-plan it with "
        "the running task as context; only offset, speed and target "
        "corrections are applied as edits"
    )


def _offset_terms(terms: list[dict], offset: Sequence[float], notes: list[str]) -> list[str]:
    dx, dy, dz = offset
    changed, raised = [], False
    for term in terms:
        params, name = term["params"], term["term"]
        moved = False
        if name in POINT_TERMS and (dx or dy or (dz and _z_counts(term))):
            x, y, z = params["point"]
            params["point"] = _rounded([x + dx, y + dy, z + (dz if _z_counts(term) else 0.0)])
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


def _rounded(point: Sequence[float]) -> list[float]:
    """Coordinates to the micrometre: no 0.18000000000000002 in specs people read."""
    return [round(float(v), 6) for v in point]


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
    old = _replaced(correction, _acting(terms, positions))
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


def _replaced(correction: Correction, acting: list[str]) -> str:
    """The object the correction swaps out, checked against what the plan acts on."""
    new = str(correction.target)
    if correction.replaces is not None:
        if correction.replaces not in acting:
            raise CorrectionError(
                f"'{correction.text}': the task does not act on the "
                f"{correction.replaces} (it acts on {acting or 'no object'})"
            )
        return correction.replaces
    kind = new.split()[-1]
    same_kind = [a for a in acting if a.split()[-1] == kind and a != new]
    if len(same_kind) == 1:
        return same_kind[0]
    if new in acting:
        raise CorrectionError(f"'{correction.text}': the task already acts on the {new}")
    raise CorrectionError(
        f"'{correction.text}': cannot tell which object the {new} replaces; the task acts on "
        f"{acting or 'no object'} ({'none' if not same_kind else 'several'} of them a {kind}). "
        "Say it as 'the blue block, not the red block', or give the whole task again"
    )


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
            term["params"]["point"] = _rounded([nx + (x - ox), ny + (y - oy), z])
            moved.append(term["id"])
    if moved:
        notes.append(f"moved {', '.join(moved)} from the {old} to the {new}")
    return moved


# --------------------------------------------------------------------------- skill calls
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
        raise _not_an_edit(correction)
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
    bound[key] = _rounded([float(v) + float(d) for v, d in zip(value, offset, strict=True)])
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
    old = _replaced(correction, objects_in_args(skill, bound))
    for key in ("obj", "target"):
        if bound.get(key) == old:
            bound[key] = correction.target
            notes.append(f"{key}: {old} -> {correction.target}")
    if bound.get("obj") is not None and bound.get("obj") == bound.get("target"):
        raise CorrectionError(
            f"{skill}(): obj and target would both be the "
            f"{correction.target}; say the whole task instead"
        )
