"""The privilege gate of VLA skills (issue 18): a skill plan is decided by the same default-deny
policy as code calls (config/policies/default.yaml, rule ``vla-skill``), and the decision gives
the plan's limits. Every deny reason, and a plan-level narrowing, checked on the real policy
files. Pure: no ROS, no simulation."""

from __future__ import annotations

import pytest

from lang2policy.paths import config_dir
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.skill_gate import decide_skill, skill_request
from lang2policy.scene.robot_description import load_robot_description
from lang2policy.skills.catalog import PROMPT_SKILLS, SKILLS, prompt_api
from lang2policy.skills.vla_call import VLA_SKILL, named_objects

DESCRIPTION = load_robot_description("so101")
BOX = workspace_box(DESCRIPTION)
POSITIONS = {"red block": (0.2, 0.05, 0.015), "blue bowl": (0.22, -0.08, 0.02)}
SCENE = ("red block", "blue bowl", "green block")


def policy() -> PrivilegePolicy:
    return default_policy(DESCRIPTION, known_skills=SKILLS)


def request(text="put the red block in the blue bowl", budget=30.0, speed=1.0, positions=None):
    return skill_request(
        text,
        time_budget_s=budget,
        max_joint_speed=speed,
        positions=POSITIONS if positions is None else positions,
        scene_objects=SCENE,
    )


def test_the_request_names_the_objects_and_targets_their_positions():
    asked = request()
    assert (asked.skill, asked.category) == (VLA_SKILL, "motion")
    assert asked.args == {
        "instruction": "put the red block in the blue bowl",
        "time_budget_s": 30.0,
        "max_joint_speed": 1.0,
    }
    assert asked.objects == ("red block", "blue bowl")
    assert asked.targets == (POSITIONS["red block"], POSITIONS["blue bowl"])
    assert named_objects("Push the GREEN block to the left") == ("green block",)


def test_allowed_with_the_limits_of_the_decision():
    verdict = decide_skill(policy(), request())
    assert verdict.allowed and verdict.decision.rule == "vla-skill"
    assert verdict.limits is not None
    assert verdict.limits.workspace == BOX  # the zone the rule keeps the targets in
    assert verdict.limits.to_dict() == {
        "time_budget_s": 30.0,
        "max_joint_speed": 1.0,
        "workspace": {"min": [round(v, 4) for v in BOX.min], "max": [round(v, 4) for v in BOX.max]},
    }


@pytest.mark.parametrize(
    ("changes", "rule", "words"),
    [
        ({"text": "lift the yellow block"}, "default-deny", "'yellow block' is not in the scene"),
        ({"positions": {"red block": (0.9, 0.0, 0.02), "blue bowl": (0.2, 0.0, 0.02)}},
         "default-deny", "outside zone 'workspace'"),
        ({"speed": 2.0}, "default-deny", "max_joint_speed=2 fails"),
        ({"budget": 90.0}, "default-deny", "time_budget_s=90 fails"),
        ({"speed": float("nan")}, "default-deny", "is not finite"),
    ],
)  # fmt: skip
def test_each_deny_reason(changes, rule, words):
    verdict = decide_skill(policy(), request(**changes))
    assert not verdict.allowed and verdict.limits is None
    assert verdict.decision.rule == rule
    assert words in verdict.decision.reason, verdict.decision.reason


def test_a_policy_without_the_rule_denies_every_skill():
    plain = PrivilegePolicy.from_dict(
        {"version": 1, "rules": [{"id": "say", "skill": "say", "effect": "allow"}]},
        BOX,
        known_skills=SKILLS,
    )
    verdict = decide_skill(plain, request())
    assert not verdict.allowed
    assert "no rule allows skill 'vla_skill' (default deny)" in verdict.decision.reason


def vla_rule(rule_id: str, zone: str = "workspace") -> dict:
    """A plan rule allowing VLA skills: the base rule's conditions (a plan may only narrow),
    the targets in ``zone``."""
    args = {"max_joint_speed": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5},
            "time_budget_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 60}}
    when = {"targets_in": zone, "objects_in_scene": True, "args": args}
    return {"id": rule_id, "skill": VLA_SKILL, "effect": "allow", "when": when}  # fmt: skip


def narrowed(rules: list[dict], budgets: dict | None = None, zones: dict | None = None):
    plan = {"version": 1, "rules": rules, "budgets": budgets or {}, "zones": zones or {}}
    return policy().narrowed(PrivilegePolicy.from_dict(plan, BOX, "plan", known_skills=SKILLS))


def test_narrowed_policies_apply_too():
    # The shipped example plan allows no VLA skill: narrowed by it, every skill is denied.
    path = config_dir() / "policies" / "examples" / "keep_out.yaml"
    keep_out = policy().narrowed(PrivilegePolicy.load(path, BOX, SKILLS))
    denied = decide_skill(keep_out, request())
    assert not denied.allowed and "no rule allows skill 'vla_skill'" in denied.decision.reason

    left = {"min": [0.05, 0.0, 0.0], "max": [0.35, 0.25, 0.3]}  # inside the workspace
    only_left = narrowed([vla_rule("left-only", "left")], zones={"left": left})
    verdict = decide_skill(only_left, request("lift the red block"))  # y = 0.05: on the left
    assert verdict.allowed
    assert verdict.limits.workspace.min == (0.05, 0.0, 0.0)  # the plan's zone, not the base's
    assert verdict.limits.workspace.max == (0.35, 0.25, 0.3)
    bowl = decide_skill(only_left, request())  # the blue bowl is at y = -0.08
    assert not bowl.allowed and "outside zone 'left'" in bowl.decision.reason

    person = {"min": [-1.0, 0.0, -0.1], "max": [1.5, 1.5, 1.5]}
    keep = {"id": "person", "category": "motion", "effect": "forbid", "priority": 5,
            "when": {"targets_any_in": "person"}, "message": "a person works on the left"}
    guarded = narrowed([keep, vla_rule("skills")], zones={"person": person})
    forbidden = decide_skill(guarded, request())
    assert not forbidden.allowed and forbidden.decision.rule == "person"
    assert "a person works on the left" in forbidden.decision.reason


def test_a_time_budget_above_the_motion_budget_is_denied():
    short = narrowed([vla_rule("skills")], budgets={"max_motion_seconds": 10})
    verdict = decide_skill(short, request(budget=20.0))
    assert not verdict.allowed and verdict.decision.rule == "budget"
    assert "time_budget_s=20 is above the policy's motion budget of 10 s" in (
        verdict.decision.reason
    )
    assert decide_skill(short, request(budget=10.0)).allowed


def test_the_prompt_lists_vla_skill_only_where_a_vla_runs():
    assert VLA_SKILL in SKILLS and VLA_SKILL not in PROMPT_SKILLS
    assert "def vla_skill(" not in prompt_api()
    assert "def vla_skill(instruction: str" in prompt_api(vla=True)
    bound = SKILLS[VLA_SKILL].bind({"instruction": "lift the red block"})
    assert bound == {"instruction": "lift the red block", "time_budget_s": 30.0,
                     "max_joint_speed": 1.0}  # fmt: skip


def test_the_gate_and_the_skill_topic_intersect_boxes_the_same_way():
    """One box intersection (``policy_zones.overlap``) serves the gate's narrowed workspace and
    the skill topic's ``Box.intersection``: same corners, and faces that only touch leave no
    room in both."""
    from lang2policy.sandbox.policy_zones import overlap
    from lang2policy.vla.skill.message import Box as TopicBox

    left = {"min": [0.05, 0.0, 0.0], "max": [0.35, 0.25, 0.3]}
    verdict = decide_skill(narrowed([vla_rule("left", "left")], zones={"left": left}),
                           request("lift the red block"))  # fmt: skip
    topic = TopicBox(BOX.min, BOX.max).intersection(TopicBox((0.05, 0.0, 0.0), (0.35, 0.25, 0.3)))
    assert topic is not None and verdict.limits is not None
    assert (topic.min, topic.max) == (verdict.limits.workspace.min, verdict.limits.workspace.max)
    assert overlap([TopicBox((0, 0, 0), (1, 1, 1)), TopicBox((1, 0, 0), (2, 1, 1))]) is None
    assert TopicBox((0, 0, 0), (1, 1, 1)).intersection(TopicBox((1, 0, 0), (2, 1, 1))) is None
