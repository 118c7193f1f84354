"""Progent-style privilege policy for skill calls: default deny, first matching rule decides.

Every skill call from LLM-written policy code becomes a ``PolicyRequest`` (skill, fully bound
args, the Cartesian targets the tool will reach, the objects named) and is checked here before
anything moves. Rules come from a YAML file (config/policies/default.yaml; format in
``policy_parse``); as in Progent (Alg. 2) the rules that select the skill are tried in order of
priority (lower first, forbid before allow on ties, then file order) and the first whose
conditions hold decides. Unlike Progent's code, which allows every call when no policy is set,
this fails closed: no matching rule, a non-finite number, or a policy that cannot be loaded all
deny. Plans may narrow a policy (``narrowed``) but never widen it.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError, PolicyError
from lang2policy.paths import config_dir
from lang2policy.sandbox.policy_conditions import Rule
from lang2policy.sandbox.policy_narrowing import check_narrowing
from lang2policy.sandbox.policy_parse import check_plain_data, parse_policy
from lang2policy.sandbox.policy_types import (
    DEFAULT_DENY,
    Budgets,
    Decision,
    PolicyRequest,
)
from lang2policy.sandbox.policy_zones import Box, fmt_num, fmt_point, fmt_value, workspace_box

if TYPE_CHECKING:
    from lang2policy.scene.robot_description import RobotDescription

__all__ = [
    "Box",
    "Budgets",
    "Decision",
    "PolicyRequest",
    "PrivilegePolicy",
    "default_policy",
    "workspace_box",
]


class PrivilegePolicy:
    """A set of allow/forbid rules over skill calls, or a base narrowed by plans.

    Build one with ``load`` / ``from_dict`` (or ``default_policy``). Attributes are read-only:
    ``source`` (file or label), ``zones`` (name -> Box), ``budgets``, ``default_fallback``,
    ``rules`` (file order; empty for a narrowed policy) and ``parts`` (the policies a narrowed
    policy asks in turn; ``(self,)`` for a plain one).
    """

    def __init__(
        self,
        *,
        source: str,
        zones: Mapping[str, Box],
        budgets: Budgets,
        default_fallback: str,
        rules: tuple[Rule, ...],
        explicit_budgets: frozenset[str] = frozenset(),
        parts: tuple[PrivilegePolicy, ...] = (),
    ) -> None:
        self.source = source
        self.zones = dict(zones)
        self.budgets = budgets
        self.default_fallback = default_fallback
        self.rules = rules
        self.explicit_budgets = explicit_budgets
        self._parts = parts
        self._ordered = tuple(sorted(rules, key=lambda r: r.sort_key))

    @classmethod
    def load(
        cls,
        path: str | Path,
        workspace: Box | None = None,
        known_skills: Iterable[str] | None = None,
    ) -> PrivilegePolicy:
        """Load a policy file; ``workspace`` predefines the zone of that name.

        ``known_skills`` (e.g. ``SKILLS.keys()``) makes unknown skill names an error. The file
        is read by the strict, bounded YAML reader (``read_yaml``: duplicate keys, aliases,
        huge or deep files refused); any bad file raises a one-line PolicyError naming it.
        """
        try:
            data = read_yaml(Path(path))
        except PolicyError:
            raise
        except ConfigError as exc:
            raise PolicyError(f"privilege policy: {exc}") from exc
        return cls.from_dict(data, workspace, str(path), known_skills)

    @classmethod
    def from_dict(
        cls,
        data: dict,
        workspace: Box | None = None,
        source: str = "<dict>",
        known_skills: Iterable[str] | None = None,
    ) -> PrivilegePolicy:
        """Build a policy from the mapping a policy file holds (see ``policy_parse``)."""
        # Bounded, JSON-like data first: the copy and every check below walk it recursively.
        check_plain_data(data, source)
        # A private copy: rules keep references to their schemas, which the caller could mutate.
        data = copy.deepcopy(data)
        parsed = parse_policy(data, workspace=workspace, source=source, known_skills=known_skills)
        return cls(
            source=source,
            zones=parsed.zones,
            budgets=parsed.budgets,
            default_fallback=parsed.default_fallback,
            rules=parsed.rules,
            explicit_budgets=parsed.explicit_budgets,
        )

    @property
    def parts(self) -> tuple[PrivilegePolicy, ...]:
        return self._parts or (self,)

    @property
    def name(self) -> str:
        """The source's file name (short enough for decision reasons)."""
        return Path(self.source).name if not self._parts else self.source

    def decide(self, request: PolicyRequest) -> Decision:
        """Allow or deny one call; a narrowed policy allows only what every part allows."""
        if not self._parts:
            return self._decide_own(request)
        allowed = []
        for part in self._parts:
            decision = part.decide(request)
            if not decision.allowed:
                return decision
            allowed.append(decision)
        return Decision(True, allowed[-1].rule, "; ".join(d.reason for d in allowed))

    def narrowed(self, plan: PrivilegePolicy) -> PrivilegePolicy:
        """This policy restricted further by ``plan``: a call must pass both.

        Raises PolicyWideningError when ``plan`` would allow something this policy does not
        (a higher budget, a redefined zone, an allow rule not covered by one of ours).
        """
        if plan._parts:
            raise PolicyError(
                f"narrowed(): the plan must be one policy (a file or a dict), not the narrowed "
                f"policy {plan.source}"
            )
        budgets = check_narrowing(self.parts, self.budgets, plan)
        return PrivilegePolicy(
            source=f"{self.source} narrowed by {plan.source}",
            zones={**plan.zones, **self.zones},
            budgets=budgets,
            default_fallback=self.default_fallback,
            rules=(),
            parts=(*self.parts, plan),
        )

    def describe(self) -> str:
        """A short listing of the rules in the order they are checked."""
        if self._parts:
            body = "\n".join(
                "\n".join("  " + line for line in part.describe().splitlines())
                for part in self._parts
            )
            return (
                f"narrowed policy (a call must be allowed by each part in turn); budgets: "
                f"{_budgets_text(self.budgets)}\n{body}"
            )
        lines = [
            f"policy {self.name}: default deny (fallback {self.default_fallback}); budgets: "
            f"{_budgets_text(self.budgets)}",
        ]
        if self.zones:
            lines.append("zones: " + "; ".join(f"{n} ({b})" for n, b in self.zones.items()))
        lines.append("rules (first match decides):")
        lines += ["  " + rule.describe() for rule in self._ordered]
        return "\n".join(lines)

    def _decide_own(self, request: PolicyRequest) -> Decision:
        bad = _non_finite_input(request)
        if bad:
            return Decision(
                False,
                DEFAULT_DENY,
                f"{request.skill}: {bad}; every number must be finite",
                self.default_fallback,
            )
        misses: list[tuple[Rule, list[str]]] = []
        for rule in self._ordered:
            if not rule.selector.selects(request.skill, request.category):
                continue
            failures = rule.when.failures(request, self.zones)
            if failures:
                if rule.effect == "allow":
                    misses.append((rule, failures))
                continue
            if rule.effect == "allow":
                return Decision(True, rule.id, f"allowed by rule '{rule.id}' ({self.name})")
            return Decision(
                False,
                rule.id,
                self._forbid_reason(rule, request),
                rule.fallback or self.default_fallback,
            )
        return Decision(
            False, DEFAULT_DENY, self._deny_reason(request, misses), self.default_fallback
        )

    def _forbid_reason(self, rule: Rule, request: PolicyRequest) -> str:
        matched = "; ".join(rule.when.matched(request, self.zones))
        if rule.message:
            detail = f"rule '{rule.id}'" + (f": {matched}" if matched else "")
            return f"{rule.message} ({detail})"
        if matched:
            return f"rule '{rule.id}' forbids this {request.skill} call: {matched}"
        return f"rule '{rule.id}' forbids every call of {rule.selector}"

    def _deny_reason(self, request: PolicyRequest, misses: list[tuple[Rule, list[str]]]) -> str:
        if not misses:
            return (
                f"no rule allows skill '{request.skill}' (default deny); this policy can allow: "
                f"{self._allowable()}"
            )
        why = "; ".join(
            f"rule '{rule.id}' does not apply: " + "; ".join(failures) for rule, failures in misses
        )
        return f"no rule allows this {request.skill} call (default deny): {why}"

    def _allowable(self) -> str:
        names: dict[str, None] = {}
        for rule in self._ordered:
            if rule.effect == "allow":
                sel = rule.selector
                items = [str(sel)] if sel.any_skill or sel.kind == "category" else sel.names
                names.update(dict.fromkeys(items))
        return ", ".join(names) if names else "nothing"


def default_policy(
    description: RobotDescription, known_skills: Iterable[str] | None = None
) -> PrivilegePolicy:
    """config/policies/default.yaml with the robot's workspace as zone ``workspace``."""
    path = config_dir() / "policies" / "default.yaml"
    return PrivilegePolicy.load(path, workspace_box(description), known_skills)


def _budgets_text(budgets: Budgets) -> str:
    return (
        f"{budgets.max_skill_calls} skill calls, {fmt_num(budgets.max_motion_seconds)} s of motion"
    )


def _non_finite_input(request: PolicyRequest) -> str:
    """What in the request is NaN/infinite ("" when nothing): such a call is never allowed."""
    for name, value in request.args.items():
        if _has_non_finite(value):
            return f"argument {name}={fmt_value(value)} is not finite"
    for target in request.all_points:
        if _has_non_finite(target):
            return f"target {fmt_point(target)} is not finite"
    return ""


def _has_non_finite(value: Any) -> bool:
    if type(value) is float:  # the common case (thousands of sweep coordinates): fast path
        return not math.isfinite(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return not math.isfinite(float(value))
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False
