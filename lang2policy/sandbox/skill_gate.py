"""The privilege gate for VLA skills: a skill plan, or a ``vla_skill`` call in policy code.

A learned policy moves the arm on its own for as long as its time budget, so the gate decides
the whole skill before anything moves, with the same default-deny ``PrivilegePolicy`` as every
code call: the request is skill ``vla_skill`` (category motion) with the arguments
``instruction`` (the skill text), ``time_budget_s`` and ``max_joint_speed`` (rad/s), the objects
the text names and, as its targets, where they are (config/policies/default.yaml, rule
``vla-skill``: the objects in the scene and inside the workspace, the speed and the time within
caps). A plan-level narrowing applies as to code (``PrivilegePolicy.narrowed``): every part must
allow the skill.

An allowed skill leaves with its limits (``GrantedSkillLimits``), which the VLA node enforces
while the policy acts: the time budget and the speed cap asked for, and the workspace box, the
zone the allowing rules keep the targets in (``targets_in``; with several parts, the boxes'
overlap). A time budget longer than the policy's motion budget (``max_motion_seconds``) is
denied too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lang2policy.errors import InvalidIntentError
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.policy_types import Decision, PolicyRequest
from lang2policy.sandbox.policy_zones import Box, fmt_num, overlap
from lang2policy.skills.vla_call import VLA_SKILL, named_objects, object_target

__all__ = [
    "GrantedSkillLimits",
    "SkillVerdict",
    "call_workspace",
    "decide_skill",
    "skill_request",
    "skill_workspace",
]


@dataclass(frozen=True)
class GrantedSkillLimits:
    """What an allowed skill may do: seconds, joint speed (rad/s), where the tool may go. The
    grant that goes out in the start message; the VLA node narrows its own defaults with it
    (``vla.skill.limits.SkillLimits``, the limits a run enforces)."""

    time_budget_s: float
    max_joint_speed: float
    workspace: Box

    def to_dict(self) -> dict[str, Any]:
        """The ``limits`` object of the skill topic's start message."""
        return {
            "time_budget_s": round(float(self.time_budget_s), 3),
            "max_joint_speed": round(float(self.max_joint_speed), 4),
            "workspace": {
                "min": [round(float(v), 4) for v in self.workspace.min],
                "max": [round(float(v), 4) for v in self.workspace.max],
            },
        }


@dataclass(frozen=True)
class SkillVerdict:
    """The gate's answer: the decision, and the limits when it allows the skill."""

    decision: Decision
    limits: GrantedSkillLimits | None = None

    @property
    def allowed(self) -> bool:
        return self.decision.allowed and self.limits is not None


def skill_request(
    instruction: str,
    *,
    time_budget_s: float,
    max_joint_speed: float,
    positions: Mapping[str, Sequence[float]],
    scene_objects: Sequence[str],
) -> PolicyRequest:
    """The policy's view of one VLA skill: its arguments, the objects its text names, and as
    targets where the tool reaches those of them that are known (``object_target``)."""
    objects = named_objects(instruction)
    targets = tuple(object_target(positions[name]) for name in objects if name in positions)
    return PolicyRequest(
        skill=VLA_SKILL,
        category="motion",
        args={
            "instruction": instruction,
            "time_budget_s": time_budget_s,
            "max_joint_speed": max_joint_speed,
        },
        targets=targets,
        objects=objects,
        scene_objects=tuple(scene_objects),
    )


def decide_skill(policy: PrivilegePolicy, request: PolicyRequest) -> SkillVerdict:
    """Allow or deny ``request`` (a ``skill_request``) and, when allowed, its limits."""
    decision = policy.decide(request)
    if not decision.allowed:
        return SkillVerdict(decision)
    budget = request.args["time_budget_s"]
    motion = policy.budgets.max_motion_seconds
    if budget > motion:
        reason = (
            f"{VLA_SKILL}: time_budget_s={fmt_num(budget)} is above the policy's motion budget "
            f"of {fmt_num(motion)} s (budgets.max_motion_seconds)"
        )
        return SkillVerdict(Decision(False, "budget", reason, policy.default_fallback))
    box = skill_workspace(policy, request)
    if box is None:
        reason = (
            f"{VLA_SKILL}: no workspace to bound the skill with (the allowing rules keep no "
            "targets in a zone, and the policy has no zone 'workspace')"
        )
        return SkillVerdict(Decision(False, decision.rule, reason, policy.default_fallback))
    speed = float(request.args["max_joint_speed"])
    return SkillVerdict(decision, GrantedSkillLimits(float(budget), speed, box))


def skill_workspace(policy: PrivilegePolicy, request: PolicyRequest) -> Box | None:
    """The overlap of the ``targets_in`` zones of the rule that allows ``request`` in each part
    of ``policy`` (the ``workspace`` zone when none names one); None when there is none. The
    box a skill plan's limits carry, and the one a ``vla_skill`` call of policy code runs in."""
    boxes = []
    for part in policy.parts:
        decision = part.decide(request)
        rule = next((r for r in part.rules if r.id == decision.rule), None)
        zone = rule.when.targets_in if rule is not None else None
        if zone is not None:
            boxes.append(part.zones[zone])
    if not boxes:
        return policy.zones.get("workspace")
    corners = overlap(boxes)
    return None if corners is None else Box(*corners)  # None: no room to move


def call_workspace(policy: PrivilegePolicy, request: PolicyRequest) -> Box:
    """The workspace box an allowed ``vla_skill`` call of policy code runs in: the one a skill
    plan gets (``skill_workspace``); an error when the allowing rules' zones leave no room."""
    box = skill_workspace(policy, request)
    if box is None:
        raise InvalidIntentError(
            f"{VLA_SKILL}: no workspace to bound the skill with (the allowing rules' zones do "
            "not overlap, or the policy has no zone 'workspace')"
        )
    return box
