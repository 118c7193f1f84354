"""The versioned reward spec: which terms, their weights and parameters, duration, success.

A spec is JSON (``SCHEMA_VERSION`` 1)::

    {"version": 1, "task": "lift the red block 10 cm", "duration": 8.0,
     "terms": [{"term": "reach", "weight": 1.0, "params": {"object": "red block"}},
               {"id": "lift", "term": "object_height",
                "params": {"object": "red block", "height": 0.1}}],
     "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5}}

``validate_spec(data, objects)`` checks it against the term library and the objects in the
scene and returns a ``Validated`` (the ``RewardSpec`` plus notes on clamped values). Rules:
unknown keys, terms, objects and parameters are rejected with the valid names; non-finite
numbers and wrong types are rejected; numbers outside a declared [min, max] are clamped to the
range and reported in ``notes`` (``strict=True`` rejects them instead). ``json_schema(objects)``
gives the same rules as a JSON schema, for grammar-constrained decoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lang2policy.errors import RewardSpecError
from lang2policy.rewards.params import NumberParam
from lang2policy.rewards.terms import DEFAULT_TERMS, TERMS

SCHEMA_VERSION = 1
DURATION = NumberParam("duration", 10.0, 1.0, 60.0, "s", "how long the task may run")
HOLD = NumberParam("hold", 0.5, 0.0, 10.0, "s", "how long the 'below' conditions must hold")
TOLERANCE = NumberParam("below", 0.02, 0.0, 10.0, "", "tolerance in the term's unit")
_SPEC_KEYS = {"version", "task", "terms", "duration", "success"}
_TERM_KEYS = {"id", "term", "weight", "params"}
_CONDITION_KEYS = {"term", "below", "always_below"}


@dataclass(frozen=True)
class TermSpec:
    id: str
    term: str
    weight: float
    params: Mapping[str, Any]

    def to_dict(self) -> dict:
        return {"id": self.id, "term": self.term, "weight": self.weight,
                "params": {k: list(v) if isinstance(v, tuple) else v
                           for k, v in self.params.items()}}


@dataclass(frozen=True)
class Condition:
    """``term``'s measure must be below ``tolerance``: at the end (held for ``hold`` s), or
    always (``always=True``: breaking it once fails the task)."""

    term: str
    tolerance: float
    always: bool = False

    def to_dict(self) -> dict:
        return {"term": self.term, ("always_below" if self.always else "below"): self.tolerance}


@dataclass(frozen=True)
class RewardSpec:
    task: str
    terms: tuple[TermSpec, ...]
    duration: float
    conditions: tuple[Condition, ...] = ()
    hold: float = 0.5
    version: int = SCHEMA_VERSION

    def term(self, term_id: str) -> TermSpec:
        return next(t for t in self.terms if t.id == term_id)

    def to_dict(self) -> dict:
        data: dict[str, Any] = {"version": self.version, "task": self.task,
                                "duration": self.duration,
                                "terms": [t.to_dict() for t in self.terms]}
        if self.conditions:
            data["success"] = {"all": [c.to_dict() for c in self.conditions], "hold": self.hold}
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclass(frozen=True)
class Validated:
    spec: RewardSpec
    notes: tuple[str, ...] = field(default=())

    @property
    def clamped(self) -> bool:
        return bool(self.notes)


def validate_spec(data: object, objects: Sequence[str], *, strict: bool = False,
                  add_defaults: bool = True) -> Validated:
    """Check ``data`` (a dict or JSON text) against the library and ``objects``."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise RewardSpecError(f"the reward spec is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RewardSpecError(f"a reward spec is a JSON object, got {type(data).__name__}")
    _no_unknown_keys(data, _SPEC_KEYS, "spec")
    if data.get("version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise RewardSpecError(f"spec version {data.get('version')!r} is not supported; "
                              f"this build reads version {SCHEMA_VERSION}")
    notes: list[str] = []
    task = data.get("task", "")
    if not isinstance(task, str) or len(task) > 500:
        raise RewardSpecError("spec.task: expected a description of at most 500 characters")
    raw_terms = data.get("terms")
    if not isinstance(raw_terms, list) or not raw_terms:
        raise RewardSpecError("spec.terms: expected a non-empty list of terms")
    terms = [_term(raw, i, objects, notes) for i, raw in enumerate(raw_terms)]
    if add_defaults:
        terms += _defaults({t.term for t in terms}, {t.id for t in terms})
    _unique_ids(terms)
    duration = DURATION.check(data.get("duration", DURATION.default), "spec.duration",
                              objects, notes)
    conditions, hold = _success(data.get("success"), {t.id for t in terms}, objects, notes)
    if strict and notes:
        raise RewardSpecError("out-of-range values (strict mode): " + "; ".join(notes))
    spec = RewardSpec(task, tuple(terms), duration, tuple(conditions), hold)
    return Validated(spec, tuple(notes))


def _no_unknown_keys(data: Mapping, allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise RewardSpecError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")


def _term(raw: object, index: int, objects: Sequence[str], notes: list[str]) -> TermSpec:
    where = f"terms[{index}]"
    if not isinstance(raw, dict):
        raise RewardSpecError(f"{where}: expected an object with 'term', 'weight', 'params'")
    _no_unknown_keys(raw, _TERM_KEYS, where)
    name = raw.get("term")
    if name not in TERMS:
        raise RewardSpecError(f"{where}.term: unknown term {name!r}; valid terms: {sorted(TERMS)}")
    term = TERMS[name]
    where = f"{where} ({name})"
    weight_decl = NumberParam("weight", term.weight.default, term.weight.low, term.weight.high,
                              "", "")
    weight = weight_decl.check(raw.get("weight", term.weight.default), f"{where}.weight",
                               objects, notes)
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise RewardSpecError(f"{where}.params: expected an object of parameters")
    _no_unknown_keys(params, {p.name for p in term.params}, f"{where}.params")
    checked = {}
    for decl in term.params:
        if decl.name not in params and decl.default is None:
            raise RewardSpecError(f"{where}.params: missing '{decl.name}' ({decl.doc})")
        value = params.get(decl.name, decl.default)
        checked[decl.name] = decl.check(value, f"{where}.params.{decl.name}", objects, notes)
    term_id = raw.get("id", name)
    if not isinstance(term_id, str) or not term_id or len(term_id) > 40:
        raise RewardSpecError(f"{where}.id: expected a short name, got {term_id!r}")
    return TermSpec(term_id, name, weight, checked)


def _defaults(present_terms: set[str], ids: set[str]) -> list[TermSpec]:
    return [TermSpec(name, name, weight, {p.name: p.default for p in TERMS[name].params})
            for name, weight in DEFAULT_TERMS.items()
            if name not in present_terms and name not in ids]


def _unique_ids(terms: Sequence[TermSpec]) -> None:
    seen: set[str] = set()
    for t in terms:
        if t.id in seen:
            raise RewardSpecError(f"term id '{t.id}' is used twice; give repeated terms an 'id'")
        seen.add(t.id)


def _success(raw: object, ids: set[str], objects: Sequence[str],
             notes: list[str]) -> tuple[list[Condition], float]:
    if raw is None:
        return [], HOLD.default
    if not isinstance(raw, dict):
        raise RewardSpecError("spec.success: expected {'all': [conditions], 'hold': seconds}")
    _no_unknown_keys(raw, {"all", "hold"}, "spec.success")
    items = raw.get("all", [])
    if not isinstance(items, list):
        raise RewardSpecError("spec.success.all: expected a list of conditions")
    conditions = []
    for i, item in enumerate(items):
        where = f"spec.success.all[{i}]"
        if not isinstance(item, dict):
            raise RewardSpecError(f"{where}: expected {{'term': id, 'below': tolerance}}")
        _no_unknown_keys(item, _CONDITION_KEYS, where)
        if item.get("term") not in ids:
            raise RewardSpecError(f"{where}.term: {item.get('term')!r} is not a term id of "
                                  f"this spec; ids: {sorted(ids)}")
        always = "always_below" in item
        if always == ("below" in item):
            raise RewardSpecError(f"{where}: give exactly one of 'below' or 'always_below'")
        value = item["always_below" if always else "below"]
        tolerance = TOLERANCE.check(value, where, objects, notes)
        conditions.append(Condition(item["term"], tolerance, always))
    hold = HOLD.check(raw.get("hold", HOLD.default), "spec.success.hold", objects, notes)
    return conditions, hold


def json_schema(objects: Sequence[str]) -> dict:
    """The spec as a JSON schema (draft 2020-12) for the given scene objects."""
    variants = []
    for term in TERMS.values():
        props = {p.name: p.schema(objects) for p in term.params}
        required = [p.name for p in term.params if p.default is None]
        variants.append({
            "type": "object", "additionalProperties": False, "required": ["term", "params"],
            "properties": {
                "id": {"type": "string", "maxLength": 40},
                "term": {"const": term.name, "description": f"{term.doc} ({term.unit})"},
                "weight": {"type": "number", "minimum": term.weight.low,
                           "maximum": term.weight.high, "default": term.weight.default},
                "params": {"type": "object", "additionalProperties": False,
                           "properties": props, "required": required},
            },
        })
    condition = {"type": "object", "additionalProperties": False, "required": ["term"],
                 "properties": {"term": {"type": "string"},
                                "below": {"type": "number", "minimum": 0},
                                "always_below": {"type": "number", "minimum": 0}}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"lang2policy reward spec v{SCHEMA_VERSION}",
        "type": "object", "additionalProperties": False, "required": ["terms"],
        "properties": {
            "version": {"const": SCHEMA_VERSION},
            "task": {"type": "string", "maxLength": 500},
            "duration": {"type": "number", "minimum": DURATION.low, "maximum": DURATION.high},
            "terms": {"type": "array", "minItems": 1, "items": {"oneOf": variants}},
            "success": {"type": "object", "additionalProperties": False,
                        "properties": {"all": {"type": "array", "items": condition},
                                       "hold": {"type": "number", "minimum": HOLD.low,
                                                "maximum": HOLD.high}}},
        },
    }
