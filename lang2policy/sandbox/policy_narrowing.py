"""Static check that a plan-level policy only narrows the policy it is applied to.

A plan (e.g. a policy written for one instruction) may lower budgets, add forbids and allow a
subset of what the base allows; it may never widen. At run time the narrowed policy asks both
policies anyway, so a widening rule could not take effect; this check exists to reject such a
plan loudly, saying which rule widens what. It is sound but conservative: when it cannot prove
a plan rule is narrower (e.g. an unsupported JSON Schema keyword) it rejects and says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lang2policy.errors import PolicyWideningError
from lang2policy.sandbox.policy_conditions import Rule, new_validator
from lang2policy.sandbox.policy_types import Budgets
from lang2policy.sandbox.policy_zones import Box, fmt_num, fmt_schema, fmt_value

# Keywords that never change which values a schema accepts.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "$comment",
        "examples",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
# Keywords compared one by one; any other keyword in a base schema needs an identical plan schema.
_SUPPORTED = frozenset(
    {
        "type",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "maxLength",
        "minLength",
        "enum",
        "const",
    }
)


class _Policy(Protocol):
    """What is read of a ``PrivilegePolicy`` (read-only: ``zones`` may be any mapping)."""

    @property
    def source(self) -> str: ...

    @property
    def zones(self) -> Mapping[str, Box]: ...

    @property
    def rules(self) -> tuple[Rule, ...]: ...

    @property
    def budgets(self) -> Budgets: ...

    @property
    def explicit_budgets(self) -> frozenset[str]: ...


def check_narrowing(base_parts: Sequence[_Policy], base_budgets: Budgets, plan: _Policy) -> Budgets:
    """Raise PolicyWideningError if ``plan`` allows more than every one of ``base_parts``.

    Returns the narrowed policy's budgets: the plan's where it sets them, else the base's.
    """
    problems: list[str] = []
    budgets = {}
    for key in ("max_skill_calls", "max_motion_seconds"):
        base_value = getattr(base_budgets, key)
        budgets[key] = base_value
        if key in plan.explicit_budgets:
            value = getattr(plan.budgets, key)
            budgets[key] = value
            if value > base_value:
                problems.append(
                    f"budget {key}={fmt_num(value)} exceeds the base's "
                    f"{fmt_num(base_value)} (a plan may only lower budgets)"
                )
    for name, box in plan.zones.items():
        for part in base_parts:
            theirs = part.zones.get(name)
            if theirs is not None and theirs != box:
                problems.append(
                    f"zone '{name}' is redefined as ({box}) but the base defines "
                    f"it as ({theirs}); give a smaller region a new zone name"
                )
                break
    for rule in plan.rules:
        if any(_uses_regex(cond.schema) for cond in rule.when.args):
            problems.append(
                f"rule '{rule.id}' uses a regular expression ('pattern'); plans may not, since "
                "a hostile pattern can take unbounded time to match: use enum or const"
            )
        if rule.effect != "allow":
            continue  # a forbid only ever removes calls
        for atom in rule.selector.atoms():
            for part in base_parts:
                problem = _uncovered(rule, atom, plan.zones, part)
                if problem:
                    problems.append(problem)
    if problems:
        bases = ", ".join(part.source for part in base_parts)
        raise PolicyWideningError(
            f"plan policy {plan.source} widens base policy {bases} (a plan may only narrow):\n  - "
            + "\n  - ".join(problems)
        )
    return Budgets(**budgets)


def _uses_regex(schema: Any) -> bool:
    if isinstance(schema, dict):
        if "pattern" in schema or "patternProperties" in schema:
            return True
        return any(_uses_regex(value) for value in schema.values())
    if isinstance(schema, list):
        return any(_uses_regex(item) for item in schema)
    return False


def _uncovered(rule: Rule, atom: tuple[str, str], zones: Mapping[str, Box], base: _Policy) -> str:
    """Why no allow rule of ``base`` covers ``rule`` for ``atom``; "" when one does."""
    what = "any skill" if atom == ("skill", "*") else f"{atom[0]} '{atom[1]}'"
    candidates = [r for r in base.rules if r.effect == "allow" and r.selector.covers(atom)]
    if not candidates:
        return f"rule '{rule.id}' allows {what}, which no allow rule of {base.source} allows"
    why = []
    for candidate in candidates:
        reasons = implied_conditions(rule, zones, candidate, base.zones)
        if not reasons:
            return ""
        why.append(f"base rule '{candidate.id}': " + ", ".join(reasons))
    return (
        f"rule '{rule.id}' allows {what} under weaker conditions than the base allows; "
        + "; ".join(why)
    )


def implied_conditions(
    plan: Rule, plan_zones: Mapping[str, Box], base: Rule, base_zones: Mapping[str, Box]
) -> list[str]:
    """Why ``plan``'s conditions do not provably imply ``base``'s ([] when they do)."""
    p, b = plan.when, base.when
    why = []
    for key in ("targets_in", "targets_any_in"):
        base_zone = getattr(b, key)
        if base_zone is None:
            continue
        plan_zone = getattr(p, key)
        if plan_zone is None:
            why.append(f"the plan rule drops '{key}: {base_zone}'")
        elif not base_zones[base_zone].contains_box(plan_zones[plan_zone]):
            why.append(
                f"plan zone '{plan_zone}' ({plan_zones[plan_zone]}) is not inside "
                f"base zone '{base_zone}' ({base_zones[base_zone]}) for {key}"
            )
    if b.objects_in_scene and not p.objects_in_scene:
        why.append("the plan rule drops 'objects_in_scene: true'")
    plan_args = {c.name: c for c in p.args}
    for cond in b.args:
        if cond.name not in plan_args:
            why.append(
                f"the plan rule drops the condition args.{cond.name} {fmt_schema(cond.schema)}"
            )
            continue
        mine = plan_args[cond.name].schema
        reason = schema_narrower(mine, cond.schema)
        if reason:
            why.append(
                f"cannot prove args.{cond.name} {fmt_schema(mine)} is narrower than "
                f"{fmt_schema(cond.schema)}: {reason}"
            )
    return why


def schema_narrower(plan: Any, base: Any) -> str:
    """Why ``plan`` is not provably narrower than ``base``; "" when every value it accepts is."""
    if base is True or (isinstance(base, dict) and not set(base) - _ANNOTATIONS):
        return ""
    if plan is False:
        return ""
    if isinstance(plan, dict) and ("const" in plan or "enum" in plan):
        values = [plan["const"]] if "const" in plan else plan["enum"]
        validator = new_validator(base)  # never retrieves a $ref (refused at load anyway)
        rejected = [v for v in values if not validator.is_valid(v)]
        if rejected:
            return f"the plan allows {fmt_value(rejected[0])}, which the base schema rejects"
        return ""
    if _canonical(plan) == _canonical(base):
        return ""
    if not isinstance(plan, dict) or not isinstance(base, dict):
        return "only an identical schema is provably narrower"
    keys = set(base) - _ANNOTATIONS
    unsupported = sorted(keys - _SUPPORTED)
    if unsupported:
        return (
            f"the base schema uses {unsupported}; only an identical schema or an enum/const "
            "of allowed values is provably narrower"
        )
    for key in sorted(keys):
        reason = _keyword_implied(key, plan, base)
        if reason:
            return reason
    return ""


def _keyword_implied(key: str, plan: dict, base: dict) -> str:
    limit = base[key]
    if key == "type":
        return _type_implied(plan, limit)
    if key in ("enum", "const"):
        return f"the base restricts values with '{key}'; list the allowed values with enum/const"
    if key in ("minimum", "exclusiveMinimum"):
        bounds = [
            (plan[k], k == "exclusiveMinimum") for k in ("minimum", "exclusiveMinimum") if k in plan
        ]
        ok = any(
            v > limit or (v == limit and (exclusive or key == "minimum")) for v, exclusive in bounds
        )
        return (
            ""
            if ok
            else f"the base requires {key} {fmt_num(limit)}; the plan's lower bound "
            f"is {_bounds_text(bounds)}"
        )
    if key in ("maximum", "exclusiveMaximum"):
        bounds = [
            (plan[k], k == "exclusiveMaximum") for k in ("maximum", "exclusiveMaximum") if k in plan
        ]
        ok = any(
            v < limit or (v == limit and (exclusive or key == "maximum")) for v, exclusive in bounds
        )
        return (
            ""
            if ok
            else f"the base requires {key} {fmt_num(limit)}; the plan's upper bound "
            f"is {_bounds_text(bounds)}"
        )
    if key == "maxLength":
        ok = "maxLength" in plan and plan["maxLength"] <= limit
        return (
            ""
            if ok
            else f"the base requires maxLength {limit}; the plan has "
            f"{plan.get('maxLength', 'none')}"
        )
    ok = "minLength" in plan and plan["minLength"] >= limit  # minLength
    return (
        ""
        if ok
        else f"the base requires minLength {limit}; the plan has {plan.get('minLength', 'none')}"
    )


def _type_implied(plan: dict, base_type: Any) -> str:
    allowed = {base_type} if isinstance(base_type, str) else set(base_type)
    if "number" in allowed:
        allowed.add("integer")
    if "type" not in plan:
        return f"the base requires type {fmt_schema(base_type)}; the plan does not restrict type"
    mine = {plan["type"]} if isinstance(plan["type"], str) else set(plan["type"])
    extra = sorted(mine - allowed)
    return f"the plan allows type {extra} that the base does not" if extra else ""


def _bounds_text(bounds: list[tuple[float, bool]]) -> str:
    if not bounds:
        return "none"
    return " and ".join(f"{'exclusive ' if ex else ''}{fmt_num(v)}" for v, ex in bounds)


def _canonical(schema: Any) -> str:
    # json.dumps tells true from 1 (as JSON Schema does, unlike Python's ==); that it also tells
    # 1 from 1.0 only makes the comparison more conservative.
    return json.dumps(schema, sort_keys=True)
