"""Policy rules and their conditions: which calls a rule selects and when it applies.

A rule selects calls by skill name (or ``*``) or by skill category, and applies when all of its
``when`` conditions hold. Each condition can say *why* it fails (for default-deny reasons) and
*what* matched (for forbid reasons), in words fit for a person and for the LLM that wrote the
call. Argument conditions are JSON Schemas (Draft 2020-12), as in Progent.

A schema must never make the host fetch or read anything: jsonschema would resolve a
``$ref: http://...`` (no timeout) or ``file://...`` when a call is decided. So reference,
identity and anchor keywords are refused when a policy is loaded (``reference_keyword``), and
every validator built here is given a ``referencing`` registry that refuses retrieval, so even a
schema that slipped past that check resolves nothing outside itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import best_match

from lang2policy.sandbox.policy_types import PolicyRequest
from lang2policy.sandbox.policy_zones import Box, fmt_point, fmt_schema, fmt_value

# Bound arguments may hold tuples (points); JSON Schema's "array" should accept them.
_TYPE_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "array", lambda _checker, value: isinstance(value, list | tuple)
)
SchemaValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, type_checker=_TYPE_CHECKER
)

_MAX_LISTED = 3  # targets quoted in one reason; the rest are counted


# Keywords that refer to other schemas or name this one: refused in policy files. "$comment" is
# the one "$" keyword allowed (it never changes what a schema accepts).
ALLOWED_DOLLAR_KEYWORDS = frozenset({"$comment"})


def _refuse_retrieval(uri: str) -> referencing.Resource:
    """The registry's retrieve hook: nothing outside the schema is ever fetched or read."""
    # The ignores here and below: referencing's attrs classes declare their __init__ only
    # through pyright's __dataclass_transform__, which mypy does not read.
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


# Belt and braces: jsonschema's default registry retrieves http(s):// and file:// URIs.
NO_RETRIEVAL = referencing.Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


def new_validator(schema: Any) -> Any:
    """A validator for an already checked ``schema`` that can never retrieve a resource."""
    return SchemaValidator(schema, registry=NO_RETRIEVAL)


def make_validator(schema: Any) -> Any:
    """A validator for ``schema``; raises jsonschema.SchemaError when it is not a valid schema.

    Callers refuse reference keywords first (``reference_keyword``); the validator itself
    cannot retrieve anything either way.
    """
    SchemaValidator.check_schema(schema)
    return new_validator(schema)


def reference_keyword(schema: Any) -> tuple[str, str] | None:
    """A ``$`` keyword other than ``$comment`` in ``schema``: (keyword, its path) or None.

    Conservative: every mapping inside the schema counts, also ones in ``const``/``enum`` values
    or ``properties`` names. Iterative, so a deep schema cannot exhaust the stack here.
    """
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and key[:1] == "$" and key not in ALLOWED_DOLLAR_KEYWORDS:
                    return key, path or "the schema itself"
                stack.append((item, f"{path}.{key}" if path else str(key)))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))
    return None


@dataclass(frozen=True)
class Selector:
    """The calls a rule is about: ``kind`` "skill" (names, "*" = any) or "category"."""

    kind: str
    names: tuple[str, ...]

    @property
    def any_skill(self) -> bool:
        return self.kind == "skill" and "*" in self.names

    def selects(self, skill: str, category: str) -> bool:
        if self.kind == "skill":
            return self.any_skill or skill in self.names
        return category in self.names

    def atoms(self) -> list[tuple[str, str]]:
        """The selector split into single items, for coverage checks when narrowing."""
        return [(self.kind, name) for name in self.names]

    def covers(self, atom: tuple[str, str]) -> bool:
        """True when every call ``atom`` selects is also selected here."""
        kind, name = atom
        if self.any_skill:
            return True
        if kind == "skill" and name == "*":
            return False
        return kind == self.kind and name in self.names

    def __str__(self) -> str:
        if self.any_skill:
            return "any skill"
        joined = ", ".join(self.names)
        return f"skill {joined}" if self.kind == "skill" else f"category {joined}"


@dataclass(frozen=True)
class ArgCondition:
    """``when.args.<name>``: the bound argument must exist and satisfy the JSON Schema."""

    name: str
    schema: Any
    validator: Any = field(compare=False, repr=False)

    def failure(self, args: Mapping[str, Any]) -> str | None:
        if self.name not in args:
            return f"argument '{self.name}' is missing (the rule constrains it)"
        value = args[self.name]
        error = best_match(self.validator.iter_errors(value))
        if error is None:
            return None
        return f"{self.name}={fmt_value(value)} fails {fmt_schema(self.schema)} ({error.message})"

    def __str__(self) -> str:
        return f"{self.name} {fmt_schema(self.schema)}"


@dataclass(frozen=True)
class Conditions:
    """A rule's ``when`` block; every condition must hold for the rule to apply."""

    args: tuple[ArgCondition, ...] = ()
    targets_in: str | None = None
    targets_any_in: str | None = None
    objects_in_scene: bool = False

    @property
    def empty(self) -> bool:
        return not (self.args or self.targets_in or self.targets_any_in or self.objects_in_scene)

    def failures(self, request: PolicyRequest, zones: Mapping[str, Box]) -> list[str]:
        """Why each failing condition fails; an empty list means the conditions hold."""
        found = [f for cond in self.args if (f := cond.failure(request.args)) is not None]
        if self.targets_in is not None:
            box = zones[self.targets_in]
            outside = [t for t in request.targets if not box.contains(t)]
            if outside:
                found.append(
                    f"{_points(outside, 'target')} outside zone '{self.targets_in}' ({box})"
                )
        if self.targets_any_in is not None:
            box = zones[self.targets_any_in]
            if not request.all_points:
                found.append(f"the call has no targets, so none is in zone '{self.targets_any_in}'")
            elif not any(box.contains(t) for t in request.all_points):
                found.append(
                    f"no target is inside zone '{self.targets_any_in}' ({box}); "
                    f"targets: {_list_points(request.all_points)}"
                )
        if self.objects_in_scene:
            missing = [o for o in request.objects if o not in request.scene_objects]
            if missing:
                names = ", ".join(f"'{o}'" for o in missing)
                verb = "is" if len(missing) == 1 else "are"
                noun = "object" if len(missing) == 1 else "objects"
                found.append(
                    f"{noun} {names} {verb} not in the scene; "
                    f"objects present: {list(request.scene_objects)}"
                )
        return found

    def matched(self, request: PolicyRequest, zones: Mapping[str, Box]) -> list[str]:
        """What each condition matched (call only when they all hold): for forbid reasons."""
        found = [
            f"{c.name}={fmt_value(request.args[c.name])} matches {fmt_schema(c.schema)}"
            for c in self.args
        ]
        if self.targets_any_in is not None:
            box = zones[self.targets_any_in]
            inside = [t for t in request.all_points if box.contains(t)]
            found.append(f"{_points(inside, 'target')} inside zone '{self.targets_any_in}' ({box})")
        if self.targets_in is not None and request.targets:
            found.append(f"every target is inside zone '{self.targets_in}'")
        if self.objects_in_scene and request.objects:
            found.append("every object is in the scene")
        return found

    def __str__(self) -> str:
        parts = [f"args.{c}" for c in self.args]
        if self.targets_in:
            parts.append(f"targets in {self.targets_in}")
        if self.targets_any_in:
            parts.append(f"any target in {self.targets_any_in}")
        if self.objects_in_scene:
            parts.append("objects in scene")
        return "; ".join(parts) if parts else "always"


@dataclass(frozen=True)
class Rule:
    """One allow/forbid rule; ``index`` is its position in the file (ties keep file order)."""

    id: str
    index: int
    selector: Selector
    effect: str
    priority: int
    when: Conditions
    fallback: str | None = None
    message: str | None = None

    @property
    def sort_key(self) -> tuple[int, int, int]:
        """Progent order: lower priority number first, forbid before allow, then file order."""
        return (self.priority, 0 if self.effect == "forbid" else 1, self.index)

    def describe(self) -> str:
        line = f"{self.priority:>4} {self.effect:<6} {self.id}: {self.selector} when {self.when}"
        if self.effect == "forbid":
            line += f" -> {self.fallback or 'default fallback'}"
        return line


def _points(points: Sequence[Sequence[float]], noun: str) -> str:
    verb = "is" if len(points) == 1 else "are"
    plural = noun if len(points) == 1 else noun + "s"
    return f"{plural} {_list_points(points)} {verb}"


def _list_points(points: Sequence[Sequence[float]]) -> str:
    shown = ", ".join(fmt_point(p) for p in points[:_MAX_LISTED])
    if len(points) > _MAX_LISTED:
        shown += f" and {len(points) - _MAX_LISTED} more"
    return shown
