"""Strict loading of privilege-policy files (YAML format version 1).

A policy guards a robot, so a typo must never loosen or silently drop a rule: unknown keys, wrong
types, unknown zones / fallbacks / effects / skills, empty skill lists, non-finite numbers and
inverted boxes all raise PolicyError naming the file, the rule (id and index) and what is allowed.
Every message is one line (line breaks in names are escaped, values are shown cut short).

Argument schemas may not use ``$ref``, ``$dynamicRef``, ``$id``, ``$anchor``, ``$schema``,
``$defs`` or any other ``$`` keyword but ``$comment``: a reference would make the host fetch a URL
or read a file when a call is decided, and a local one (``$ref: "#"``) can recurse without end.
The arguments a policy constrains are numbers, strings and short lists, which need none of them.

``check_plain_data`` bounds what ``from_dict`` accepts (the YAML reader already bounds files):
JSON-like values only, nesting, size, string and integer length capped, so no later walk over
the data (copying, checks, JSON Schema) can recurse without end or blow up.
"""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from lang2policy.errors import PolicyError
from lang2policy.sandbox.policy_conditions import (
    ALLOWED_DOLLAR_KEYWORDS,
    ArgCondition,
    Conditions,
    Rule,
    Selector,
    make_validator,
    reference_keyword,
)
from lang2policy.sandbox.policy_types import CATEGORIES, EFFECTS, FALLBACKS, Budgets
from lang2policy.sandbox.policy_zones import Box, is_finite_number
from lang2policy.yaml_strict import MAX_DEPTH, MAX_INT_CHARS, MAX_NODES, MAX_SCALAR_CHARS, one_line

VERSION = 1
TOP_KEYS = ("version", "zones", "budgets", "default_fallback", "rules")
RULE_KEYS = ("id", "skill", "category", "effect", "priority", "when", "fallback", "message")
WHEN_KEYS = ("args", "targets_in", "targets_any_in", "objects_in_scene")
BOX_KEYS = ("min", "max")
DEFAULT_PRIORITY = 100
_MAX_INT_BITS = int(MAX_INT_CHARS * math.log2(10))  # the YAML reader's integer cap, in bits
_SHORT = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 60
_SHORT.maxdict = _SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = 6


@dataclass(frozen=True)
class ParsedPolicy:
    zones: dict[str, Box]
    budgets: Budgets
    explicit_budgets: frozenset[str]  # budget keys the file set (a plan inherits the others)
    default_fallback: str
    rules: tuple[Rule, ...]


def parse_policy(
    data: Any,
    *,
    workspace: Box | None,
    source: str,
    known_skills: Iterable[str] | None = None,
) -> ParsedPolicy:
    """Validate ``data`` (a policy file's mapping) and build its zones, budgets and rules."""
    p = _Parser(source, None if known_skills is None else frozenset(known_skills))
    return p.policy(data, workspace)


class _Parser:
    def __init__(self, source: str, known_skills: frozenset[str] | None) -> None:
        self.source = source
        self.known_skills = known_skills

    def fail(self, where: str, problem: str) -> PolicyError:
        """An error naming the file, the key path and the problem, on one line."""
        return PolicyError(one_line(f"{self.source}: {where}: {problem}"))

    def keys(self, value: Any, where: str, allowed: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {_show(value)}")
        unknown = [k for k in value if k not in allowed]
        if unknown:
            raise self.fail(
                where, f"unknown key(s) {_show(unknown)}; allowed keys: {list(allowed)}"
            )
        return value

    def policy(self, data: Any, workspace: Box | None) -> ParsedPolicy:
        if not isinstance(data, dict):
            raise self.fail("top level", f"expected a mapping, got {_show(data)}")
        self.keys(data, "top level", TOP_KEYS)
        if data.get("version") != VERSION or isinstance(data.get("version"), bool):
            raise self.fail("version", f"got {_show(data.get('version'))}; allowed: {VERSION}")
        zones = {} if workspace is None else {"workspace": workspace}
        zones.update(self.zones(data.get("zones", {})))
        budgets, explicit = self.budgets(data.get("budgets", {}))
        default_fallback = self.choice(
            data.get("default_fallback", "error"), "default_fallback", FALLBACKS
        )
        raw_rules = data.get("rules")
        if not isinstance(raw_rules, list):
            raise self.fail("rules", f"expected a list of rules, got {_show(raw_rules)}")
        rules = tuple(self.rule(raw, i, zones) for i, raw in enumerate(raw_rules))
        seen: dict[str, int] = {}
        for rule in rules:
            if rule.id in seen:
                raise self.fail(
                    f"rules[{rule.index}] (id '{rule.id}')",
                    f"duplicate id; rules[{seen[rule.id]}] already uses it (ids must be unique)",
                )
            seen[rule.id] = rule.index
        return ParsedPolicy(zones, budgets, explicit, default_fallback, rules)

    def zones(self, raw: Any) -> dict[str, Box]:
        if not isinstance(raw, dict):
            raise self.fail(
                "zones", f"expected a mapping of name -> {{min, max}}, got {_show(raw)}"
            )
        zones = {}
        for name, spec in raw.items():
            where = f"zones.{name}"
            if not isinstance(name, str) or not name:
                raise self.fail("zones", f"zone names must be non-empty strings, got {_show(name)}")
            self.keys(spec, where, BOX_KEYS)
            corners = [self.point(spec.get(k), f"{where}.{k}") for k in BOX_KEYS]
            if any(lo > hi for lo, hi in zip(*corners, strict=True)):
                raise self.fail(
                    where,
                    f"min {corners[0]} exceeds max {corners[1]} on some axis; "
                    "allowed: min <= max on x, y and z",
                )
            zones[name] = Box(*corners)
        return zones

    def point(self, value: Any, where: str) -> tuple[float, float, float]:
        if (
            not isinstance(value, list | tuple)
            or len(value) != 3
            or not all(is_finite_number(v) for v in value)
        ):
            raise self.fail(
                where, f"got {_show(value)}; allowed: 3 finite numbers [x, y, z] (metres)"
            )
        return (float(value[0]), float(value[1]), float(value[2]))

    def budgets(self, raw: Any) -> tuple[Budgets, frozenset[str]]:
        self.keys(raw, "budgets", ("max_skill_calls", "max_motion_seconds"))
        calls = raw.get("max_skill_calls", Budgets.max_skill_calls)
        if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
            raise self.fail(
                "budgets.max_skill_calls", f"got {_show(calls)}; allowed: an integer >= 1"
            )
        seconds = raw.get("max_motion_seconds", Budgets.max_motion_seconds)
        if not is_finite_number(seconds) or seconds <= 0:
            raise self.fail(
                "budgets.max_motion_seconds", f"got {_show(seconds)}; allowed: a finite number > 0"
            )
        return Budgets(calls, float(seconds)), frozenset(raw)

    def choice(self, value: Any, where: str, allowed: tuple[str, ...]) -> str:
        if value not in allowed or not isinstance(value, str):
            raise self.fail(where, f"got {_show(value)}; allowed: {list(allowed)}")
        return value

    def rule(self, raw: Any, index: int, zones: Mapping[str, Box]) -> Rule:
        where = f"rules[{index}]"
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            where += f" (id {_show(raw['id'])})"
        self.keys(raw, where, RULE_KEYS)
        rule_id = raw.get("id")
        if not isinstance(rule_id, str) or not rule_id.strip():
            raise self.fail(where, f"'id' is required: a non-empty string, got {_show(rule_id)}")
        effect = self.choice(raw.get("effect"), f"{where}.effect", EFFECTS)
        priority = raw.get("priority", DEFAULT_PRIORITY)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise self.fail(
                f"{where}.priority",
                f"got {_show(priority)}; allowed: an integer (lower = checked first)",
            )
        fallback = raw.get("fallback")
        message = raw.get("message")
        if effect == "allow" and ("fallback" in raw or "message" in raw):
            raise self.fail(
                where,
                "'fallback' and 'message' apply only to forbid rules (an allow rule never denies)",
            )
        if fallback is not None:
            fallback = self.choice(fallback, f"{where}.fallback", FALLBACKS)
        if message is not None and (not isinstance(message, str) or not message.strip()):
            raise self.fail(
                f"{where}.message", f"got {_show(message)}; allowed: a non-empty string"
            )
        return Rule(
            id=rule_id,
            index=index,
            selector=self.selector(raw, where),
            effect=effect,
            priority=priority,
            when=self.when(raw.get("when", {}), f"{where}.when", zones),
            fallback=fallback,
            message=message,
        )

    def selector(self, raw: dict, where: str) -> Selector:
        if ("skill" in raw) == ("category" in raw):
            raise self.fail(
                where,
                "give exactly one of 'skill' (a name, a list of names or '*') "
                f"or 'category' (one of {list(CATEGORIES)})",
            )
        kind = "skill" if "skill" in raw else "category"
        value = raw[kind]
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names:
            raise self.fail(
                f"{where}.{kind}",
                f"got {_show(value)}; allowed: a name or a non-empty list of names",
            )
        if not all(isinstance(n, str) and n for n in names):
            raise self.fail(
                f"{where}.{kind}", f"every entry must be a non-empty string: {_show(names)}"
            )
        if kind == "category":
            bad = [n for n in names if n not in CATEGORIES]
            if bad:
                raise self.fail(f"{where}.category", f"unknown {bad}; allowed: {list(CATEGORIES)}")
        elif "*" in names:
            if len(names) > 1:
                raise self.fail(f"{where}.skill", "'*' (any skill) must stand alone, not in a list")
        elif self.known_skills is not None:
            bad = [n for n in names if n not in self.known_skills]
            if bad:
                raise self.fail(
                    f"{where}.skill",
                    f"unknown skill(s) {bad}; allowed: {sorted(self.known_skills)} or '*'",
                )
        return Selector(kind, tuple(dict.fromkeys(names)))

    def when(self, raw: Any, where: str, zones: Mapping[str, Box]) -> Conditions:
        self.keys(raw, where, WHEN_KEYS)
        args = self.args(raw.get("args", {}), f"{where}.args")
        zone_refs = {}
        for key in ("targets_in", "targets_any_in"):
            if key in raw:
                name = raw[key]
                if not isinstance(name, str) or name not in zones:
                    raise self.fail(
                        f"{where}.{key}",
                        f"unknown zone {_show(name)}; zones defined: "
                        f"{sorted(zones)} ('workspace' is "
                        "predefined only when the robot's "
                        "workspace is given)",
                    )
                zone_refs[key] = name
        objects = raw.get("objects_in_scene", False)
        if not isinstance(objects, bool):
            raise self.fail(
                f"{where}.objects_in_scene", f"got {_show(objects)}; allowed: true or false"
            )
        return Conditions(
            args, zone_refs.get("targets_in"), zone_refs.get("targets_any_in"), objects
        )

    def args(self, raw: Any, where: str) -> tuple[ArgCondition, ...]:
        if not isinstance(raw, dict):
            raise self.fail(
                where, f"expected a mapping of argument -> JSON Schema, got {_show(raw)}"
            )
        conditions = []
        for name, schema in raw.items():
            here = f"{where}.{name}"
            if not isinstance(name, str) or not name:
                raise self.fail(
                    where, f"argument names must be non-empty strings, got {_show(name)}"
                )
            if not isinstance(schema, dict | bool):
                raise self.fail(here, f"got {_show(schema)}; allowed: a JSON Schema (a mapping)")
            ref = reference_keyword(schema)
            if ref is not None:
                raise self.fail(
                    here,
                    f"JSON Schema keyword {_show(ref[0])} (at {ref[1]}) is not allowed; allowed: "
                    "Draft 2020-12 keywords without references, ids or anchors (no $ref, "
                    f"$dynamicRef, $id, $anchor, $schema, $defs; {sorted(ALLOWED_DOLLAR_KEYWORDS)} "
                    "is fine), so a policy never makes the host fetch or read anything",
                )
            bad = _non_finite(schema)
            if bad is not None:
                raise self.fail(
                    here, f"non-finite number {_show(bad)}; allowed: finite numbers only"
                )
            try:
                validator = make_validator(schema)
            except jsonschema.SchemaError as exc:
                raise self.fail(
                    here, f"not a valid JSON Schema (Draft 2020-12): {_cut(exc.message)}"
                ) from exc
            except RecursionError as exc:
                raise self.fail(here, "the JSON Schema is nested too deeply to check") from exc
            conditions.append(ArgCondition(name, schema, validator))
        return tuple(conditions)


def _non_finite(value: Any) -> float | None:
    """The first NaN / infinity anywhere inside ``value``, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            if (bad := _non_finite(item)) is not None:
                return bad
    return None


def _show(value: Any) -> str:
    """``repr`` of a value from the file, cut short (a message quotes it, never all of it)."""
    return _SHORT.repr(value)


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_plain_data(data: Any, source: str) -> None:
    """Raise PolicyError unless ``data`` is bounded JSON-like data (see the module docstring).

    Iterative and counted: a cyclic or shared-reference structure hits the depth or size cap
    instead of recursing or expanding without end.
    """
    stack: list[tuple[Any, str, int]] = [(data, "top level", 0)]
    seen = 0
    while stack:
        value, where, depth = stack.pop()
        seen += 1
        problem = _plain_problem(value, depth, seen)
        if problem:
            raise PolicyError(one_line(f"{source}: {_cut(where, 160)}: {problem}"))
        if isinstance(value, dict):
            for key, item in value.items():
                problem = _key_problem(key)
                if problem:
                    raise PolicyError(one_line(f"{source}: {_cut(where, 160)}: {problem}"))
                stack.append((item, f"{where}.{_cut(str(key), 60)}", depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))


_ALLOWED_DATA = "allowed: mappings, lists, strings, numbers, booleans and null (JSON-like data)"


def _plain_problem(value: Any, depth: int, seen: int) -> str:
    """What is wrong with one value of policy data ("" when nothing)."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels (or cyclic); allowed: {MAX_DEPTH}"
    if seen > MAX_NODES:
        return f"more than {MAX_NODES} values (or cyclic); allowed: {MAX_NODES} at most"
    if isinstance(value, str):
        if len(value) > MAX_SCALAR_CHARS:
            return f"a string of {len(value)} characters; allowed: {MAX_SCALAR_CHARS} at most"
        return ""
    if isinstance(value, numbers.Integral):
        if int(value).bit_length() > _MAX_INT_BITS:
            return f"an integer of over {MAX_INT_CHARS} digits; allowed: {MAX_INT_CHARS} at most"
        return ""
    if value is None or isinstance(value, numbers.Real | dict | list | tuple):
        return ""
    return f"a value of type {type(value).__name__}; {_ALLOWED_DATA}"


def _key_problem(key: Any) -> str:
    if isinstance(key, bool) or key is None or isinstance(key, str | numbers.Real):
        return _plain_problem(key, 0, 0)
    return f"a mapping key of type {type(key).__name__}; allowed: strings and numbers"
