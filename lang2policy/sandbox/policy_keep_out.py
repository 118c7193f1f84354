"""A privilege policy's keep-out zones: the zones the safety node keeps the gripper out of.

The gate decides each call before it runs, from its planned path; a VLA skill is decided from
where its objects are, and the learned policy then moves on its own. So the zones a policy
keeps the arm out of also go to the safety node (``/lang2policy/plan_zones``), which checks
every command from every source on the gripper's geometry. It sees commands, not skill calls or
arguments, so it can only enforce what holds whatever the call. A zone is keep-out when a forbid
rule

* forbids any point of the gripper inside it (``when.targets_any_in``),
* with no argument condition (a zone forbidden only above some speed stays the gate's alone),
* for a skill that moves the tool: a motion skill other than opening or closing the gripper in
  place (``category: motion``, ``skill: "*"``, or one of them by name).

Zones kept by such a rule for some motion skills only are keep-out for all: the safety node
cannot tell what a command is for, and cutting an allowed motion at the zone stops the arm,
where not cutting would let the other motions in. For the same reason neither the rule's
priority nor its fallback matters (in the graph, no one answers ``ask``: such a call is denied).
Containment zones (``targets_in``, the ``workspace``) are not keep-out. A narrowed policy allows
only what every part allows, so every part's keep-out zones count.
"""

from __future__ import annotations

from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.policy_conditions import Rule
from lang2policy.sandbox.policy_zones import Box
from lang2policy.skills.catalog import SKILLS

# Motion skills that open or close the gripper where it is: no targets, never in a zone.
IN_PLACE = frozenset({"open_gripper", "close_gripper"})
TOOL_MOTIONS = tuple(
    name for name, skill in SKILLS.items() if skill.category == "motion" and name not in IN_PLACE
)


def keep_out_zones(policy: PrivilegePolicy) -> dict[str, Box]:
    """The keep-out zones of ``policy`` (every part of a narrowed one), by name."""
    zones: dict[str, Box] = {}
    for part in policy.parts:
        for rule in part.rules:
            zone = rule.when.targets_any_in
            if zone is not None and is_keep_out_rule(rule):  # a keep-out rule names its zone
                zones[zone] = part.zones[zone]
    return zones


def is_keep_out_rule(rule: Rule) -> bool:
    """True when ``rule`` keeps the gripper out of its ``targets_any_in`` zone for every call
    of some skill that moves the tool (see the module docstring)."""
    when = rule.when
    if rule.effect != "forbid" or when.targets_any_in is None or when.args:
        return False
    return any(rule.selector.selects(name, "motion") for name in TOOL_MOTIONS)
