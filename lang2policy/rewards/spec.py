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

Validation is total: whatever ``data`` holds (text of any size, nesting 100000 deep, a
5000-digit integer, a list where a name belongs, a Python object that is no JSON value), the
only exception is ``RewardSpecError``. Text is decoded by ``decode_spec_text`` within
``SPEC_MAX_BYTES``, ``SPEC_MAX_DEPTH`` and ``SPEC_MAX_DIGITS``; a decoded value is first checked
to be plain JSON data of bounded size before any rule looks at it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lang2policy.errors import RewardSpecError
from lang2policy.rewards.params import NumberParam, ObjectParam
from lang2policy.rewards.terms import DEFAULT_TERMS, TERMS
from lang2policy.wire_json import MessageError, decode_json

SCHEMA_VERSION = 1
DURATION = NumberParam("duration", 10.0, 1.0, 60.0, "s", "how long the task may run")
HOLD = NumberParam("hold", 0.5, 0.0, 10.0, "s", "how long the 'below' conditions must hold")
TOLERANCE = NumberParam("below", 0.02, 0.0, 10.0, "", "tolerance in the term's unit")
_SPEC_KEYS = {"version", "task", "terms", "duration", "success"}
_TERM_KEYS = {"id", "term", "weight", "params"}
_CONDITION_KEYS = {"term", "below", "always_below"}
SPEC_MAX_BYTES = 256 * 1024  # a real spec is about 1 KB
SPEC_MAX_DEPTH = 16  # a spec nests 5 levels (spec, terms, term, params, point)
SPEC_MAX_DIGITS = 64  # characters of one number literal
SPEC_MAX_VALUES = 10_000  # values (objects, lists, scalars) in one spec
SPEC_MAX_TEXT = 1000  # characters of one string or key (task is at most 500)


@dataclass(frozen=True)
class TermSpec:
    id: str
    term: str
    weight: float
    params: Mapping[str, Any]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "term": self.term,
            "weight": self.weight,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()},
        }


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
    """A validated spec: ``validate_spec`` builds it where a spec enters a process (off a topic,
    out of the sandbox, after an edit), and every layer after that takes it as it is; only the
    objects it names are checked again against a changed scene (``check_objects``)."""

    task: str
    terms: tuple[TermSpec, ...]
    duration: float
    conditions: tuple[Condition, ...] = ()
    hold: float = 0.5
    version: int = SCHEMA_VERSION

    def term(self, term_id: str) -> TermSpec:
        return next(t for t in self.terms if t.id == term_id)

    def to_dict(self) -> dict:
        data: dict[str, Any] = {
            "version": self.version,
            "task": self.task,
            "duration": self.duration,
            "terms": [t.to_dict() for t in self.terms],
        }
        if self.conditions:
            data["success"] = {"all": [c.to_dict() for c in self.conditions], "hold": self.hold}
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def objects(self) -> list[str]:
        """The scene objects the terms name, in order of first use ("tool" and the other
        non-object names a parameter allows are left out)."""
        named = [
            t.params[decl.name]
            for t in self.terms
            for decl in TERMS[t.term].params
            if isinstance(decl, ObjectParam) and t.params.get(decl.name) not in decl.also
        ]
        return list(dict.fromkeys(named))


def check_objects(spec: RewardSpec, objects: Sequence[str]) -> None:
    """``RewardSpecError`` naming the objects of ``spec`` that are not among ``objects``."""
    missing = [name for name in spec.objects() if name not in objects]
    if missing:
        raise RewardSpecError(
            f"the spec names {missing}, not in the scene; objects: {sorted(objects)}"
        )


@dataclass(frozen=True)
class Validated:
    spec: RewardSpec
    notes: tuple[str, ...] = field(default=())

    @property
    def clamped(self) -> bool:
        return bool(self.notes)


def validate_spec(
    data: object, objects: Sequence[str], *, strict: bool = False, add_defaults: bool = True
) -> Validated:
    """Check ``data`` (a dict or JSON text) against the library and ``objects``."""
    if isinstance(data, str | bytes):
        data = decode_spec_text(data)
    if not isinstance(data, dict):
        raise RewardSpecError(f"a reward spec is a JSON object, got {type(data).__name__}")
    _plain_json(data)
    _no_unknown_keys(data, _SPEC_KEYS, "spec")
    if data.get("version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise RewardSpecError(
            f"spec version {data.get('version')!r} is not supported; "
            f"this build reads version {SCHEMA_VERSION}"
        )
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
    duration = DURATION.check(
        data.get("duration", DURATION.default), "spec.duration", objects, notes
    )
    conditions, hold = _success(data.get("success"), {t.id for t in terms}, objects, notes)
    if strict and notes:
        raise RewardSpecError("out-of-range values (strict mode): " + "; ".join(notes))
    spec = RewardSpec(task, tuple(terms), duration, tuple(conditions), hold)
    return Validated(spec, tuple(notes))


def decode_spec_text(text: str | bytes, what: str = "the reward spec") -> object:
    """The JSON value of a spec's text (``None`` for ``null``), within the spec's limits on
    size, nesting and number length; ``RewardSpecError`` saying which limit was broken."""
    try:
        return decode_json(
            text,
            max_bytes=SPEC_MAX_BYTES,
            max_depth=SPEC_MAX_DEPTH,
            max_digits=SPEC_MAX_DIGITS,
            what=what,
            finite=False,  # the rules refuse NaN and infinities, saying where they are
        )
    except MessageError as exc:
        raise RewardSpecError(str(exc)) from exc


def _plain_json(data: object) -> None:
    """Refuse anything but bounded JSON data (dict with text keys, list, tuple, str, number,
    bool, None) before the rules look at it, so no rule meets a value it cannot compare, hash,
    print or convert: too deep or too many values, long text, ints beyond float range."""
    stack: list[tuple[object, int, str]] = [(data, 1, "spec")]
    seen = 0
    while stack:
        value, depth, where = stack.pop()
        seen += len(value) if isinstance(value, dict | list | tuple) else 1
        if seen > SPEC_MAX_VALUES or depth > SPEC_MAX_DEPTH:
            raise RewardSpecError(
                f"{where}: the spec is too large; at most {SPEC_MAX_VALUES} "
                f"values nested at most {SPEC_MAX_DEPTH} levels are allowed"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                _plain_scalar(key, f"{where} (a key)", keys=True)
                stack.append((item, depth + 1, f"{where}.{repr(key[:40])[1:-1]}"))
        elif isinstance(value, list | tuple):
            stack.extend((item, depth + 1, f"{where}[{i}]") for i, item in enumerate(value))
        else:
            _plain_scalar(value, where)


def _plain_scalar(value: object, where: str, *, keys: bool = False) -> None:
    if isinstance(value, str):
        if len(value) > SPEC_MAX_TEXT:
            raise RewardSpecError(
                f"{where}: text of {len(value)} characters; at most {SPEC_MAX_TEXT} are allowed"
            )
    elif keys:
        raise RewardSpecError(f"{where}: keys must be text, got {type(value).__name__}")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        raise RewardSpecError(
            f"{where}: an integer beyond the range of numbers (about ±1.8e308) is not allowed"
        )
    elif not (value is None or isinstance(value, bool | int | float)):
        raise RewardSpecError(
            f"{where}: a {type(value).__name__} is not a JSON value; "
            "expected an object, list, string, number, boolean or null"
        )


def _no_unknown_keys(data: Mapping, allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:  # at most 10 named, each cut short: the message goes to logs and status lines
        shown = [key if len(key) <= 60 else key[:59] + "…" for key in unknown[:10]]
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise RewardSpecError(f"{where}: unknown keys {shown}{more}; allowed: {sorted(allowed)}")


def _json_object(raw: object, where: str, keys: set[str], expected: str) -> dict:
    """``raw``, refused unless it is a JSON object with no keys but ``keys``; the error says
    what was ``expected`` there."""
    if not isinstance(raw, dict):
        raise RewardSpecError(f"{where}: expected {expected}")
    _no_unknown_keys(raw, keys, where)
    return raw


def _term(raw: object, index: int, objects: Sequence[str], notes: list[str]) -> TermSpec:
    where = f"terms[{index}]"
    raw = _json_object(raw, where, _TERM_KEYS, "an object with 'term', 'weight', 'params'")
    name = raw.get("term")
    if not isinstance(name, str) or name not in TERMS:
        raise RewardSpecError(f"{where}.term: unknown term {name!r}; valid terms: {sorted(TERMS)}")
    term = TERMS[name]
    where = f"{where} ({name})"
    weight_decl = NumberParam(
        "weight", term.weight.default, term.weight.low, term.weight.high, "", ""
    )
    weight = weight_decl.check(
        raw.get("weight", term.weight.default), f"{where}.weight", objects, notes
    )
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
    return [
        TermSpec(name, name, weight, {p.name: p.default for p in TERMS[name].params})
        for name, weight in DEFAULT_TERMS.items()
        if name not in present_terms and name not in ids
    ]


def _unique_ids(terms: Sequence[TermSpec]) -> None:
    seen: set[str] = set()
    for t in terms:
        if t.id in seen:
            raise RewardSpecError(f"term id '{t.id}' is used twice; give repeated terms an 'id'")
        seen.add(t.id)


def _success(
    raw: object, ids: set[str], objects: Sequence[str], notes: list[str]
) -> tuple[list[Condition], float]:
    if raw is None:
        return [], HOLD.default
    expected = "{'all': [conditions], 'hold': seconds}"
    raw = _json_object(raw, "spec.success", {"all", "hold"}, expected)
    items = raw.get("all", [])
    if not isinstance(items, list):
        raise RewardSpecError("spec.success.all: expected a list of conditions")
    conditions = []
    for i, item in enumerate(items):
        where = f"spec.success.all[{i}]"
        item = _json_object(item, where, _CONDITION_KEYS, "{'term': id, 'below': tolerance}")
        term_id = item.get("term")
        if not isinstance(term_id, str) or term_id not in ids:
            raise RewardSpecError(
                f"{where}.term: {term_id!r} is not a term id of this spec; ids: {sorted(ids)}"
            )
        always = "always_below" in item
        if always == ("below" in item):
            raise RewardSpecError(f"{where}: give exactly one of 'below' or 'always_below'")
        value = item["always_below" if always else "below"]
        tolerance = TOLERANCE.check(value, where, objects, notes)
        conditions.append(Condition(term_id, tolerance, always))
    hold = HOLD.check(raw.get("hold", HOLD.default), "spec.success.hold", objects, notes)
    return conditions, hold


def json_schema(objects: Sequence[str]) -> dict:
    """The spec as a JSON schema (draft 2020-12) for the given scene objects."""
    variants = []
    for term in TERMS.values():
        props = {p.name: p.schema(objects) for p in term.params}
        required = [p.name for p in term.params if p.default is None]
        variants.append(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["term", "params"],
                "properties": {
                    "id": {"type": "string", "maxLength": 40},
                    "term": {"const": term.name, "description": f"{term.doc} ({term.unit})"},
                    "weight": {
                        "type": "number",
                        "minimum": term.weight.low,
                        "maximum": term.weight.high,
                        "default": term.weight.default,
                    },
                    "params": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": props,
                        "required": required,
                    },
                },
            }
        )
    condition = {
        "type": "object",
        "additionalProperties": False,
        "required": ["term"],
        "properties": {
            "term": {"type": "string"},
            "below": {"type": "number", "minimum": 0},
            "always_below": {"type": "number", "minimum": 0},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"lang2policy reward spec v{SCHEMA_VERSION}",
        "type": "object",
        "additionalProperties": False,
        "required": ["terms"],
        "properties": {
            "version": {"const": SCHEMA_VERSION},
            "task": {"type": "string", "maxLength": 500},
            "duration": {"type": "number", "minimum": DURATION.low, "maximum": DURATION.high},
            "terms": {"type": "array", "minItems": 1, "items": {"oneOf": variants}},
            "success": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "all": {"type": "array", "items": condition},
                    "hold": {"type": "number", "minimum": HOLD.low, "maximum": HOLD.high},
                },
            },
        },
    }
