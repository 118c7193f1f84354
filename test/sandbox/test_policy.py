"""Privilege policy: default deny, Progent rule order, conditions, strict files, narrowing."""

from __future__ import annotations

import copy
import math
import re

import pytest
import yaml

from lang2policy.errors import PolicyError, PolicyWideningError
from lang2policy.paths import config_dir
from lang2policy.sandbox.policy import (
    Box,
    Budgets,
    Decision,
    PolicyRequest,
    PrivilegePolicy,
    default_policy,
    workspace_box,
)
from lang2policy.sandbox.policy_narrowing import schema_narrower
from lang2policy.scene.robot_description import load_robot_description

WS = Box((0.0, -0.3, 0.0), (0.5, 0.3, 0.4))
SCENE = ("red block", "blue bowl", "green block")
MOTION = ["move_to", "pick", "place", "put_first_on_second", "push", "go_home"]
# The skill names of the contract's catalog (lang2policy/skills/catalog.py SKILLS keys).
KNOWN_SKILLS = [
    *MOTION,
    "open_gripper",
    "close_gripper",
    "get_obj_names",
    "get_obj_pos",
    "get_bbox",
    "is_obj_visible",
    "get_ee_pose",
    "get_ee_pos",
    "get_table_bounds",
    "get_corner_pos",
    "say",
    "vla_skill",
]
EXAMPLES = config_dir() / "policies" / "examples"


def make(rules, workspace=WS, **top) -> PrivilegePolicy:
    return PrivilegePolicy.from_dict({"version": 1, "rules": rules, **top}, workspace, "test")


def req(skill="pick", category="motion", args=None, targets=(), objects=(), scene=SCENE):
    return PolicyRequest(
        skill=skill,
        category=category,
        args={"obj": "red block", "speed": 0.15} if args is None else args,
        targets=tuple(tuple(t) for t in targets),
        objects=tuple(objects),
        scene_objects=tuple(scene),
    )


def move(x, y, z, speed=0.15):
    return req("move_to", args={"position": [x, y, z], "speed": speed}, targets=[(x, y, z)])


ALLOW_PICK = {"id": "pick-ok", "skill": "pick", "effect": "allow"}
MOTION_RULE = {
    "id": "motion",
    "skill": MOTION,
    "effect": "allow",
    "priority": 50,
    "when": {
        "targets_in": "workspace",
        "objects_in_scene": True,
        "args": {"speed": {"type": "number", "maximum": 0.25}},
    },
}
SPEED_FORBID = {
    "id": "speed-limit",
    "skill": "*",
    "effect": "forbid",
    "priority": 10,
    "when": {"args": {"speed": {"type": "number", "exclusiveMinimum": 0.25}}},
    "message": "too fast",
}


# --- default deny and rule order ---------------------------------------------------------------


def test_a_policy_without_rules_denies_everything():
    decision = make([]).decide(req())
    assert decision == Decision(
        False,
        "default-deny",
        "no rule allows skill 'pick' (default deny); this policy can allow: nothing",
        "error",
    )


def test_unknown_skill_is_denied_and_the_reason_lists_what_is_allowed():
    policy = make([ALLOW_PICK, {"id": "talk", "skill": "say", "effect": "allow"}])
    decision = policy.decide(req("dance", args={}))
    assert not decision.allowed and decision.rule == "default-deny"
    assert "no rule allows skill 'dance'" in decision.reason
    assert "can allow: pick, say" in decision.reason
    assert policy.decide(req()).allowed


def test_forbid_beats_allow_at_equal_priority_regardless_of_file_order():
    rules = [
        {**ALLOW_PICK, "priority": 50},
        {
            "id": "no-red",
            "skill": "pick",
            "effect": "forbid",
            "priority": 50,
            "when": {"args": {"obj": {"const": "red block"}}},
        },
    ]
    policy = make(rules)
    assert policy.decide(req()).rule == "no-red"
    assert not policy.decide(req()).allowed
    other = policy.decide(req(args={"obj": "blue bowl", "speed": 0.1}))
    assert other.allowed and other.rule == "pick-ok"


def test_lower_priority_number_wins_over_a_later_forbid():
    rules = [
        {"id": "no-pick", "skill": "pick", "effect": "forbid", "priority": 10},
        {**ALLOW_PICK, "priority": 5},
    ]
    assert make(rules).decide(req()) == Decision(
        True, "pick-ok", "allowed by rule 'pick-ok' (test)", "error"
    )
    rules[1]["priority"] = 11
    assert make(rules).decide(req()).rule == "no-pick"


def test_first_matching_rule_in_file_order_decides_ties():
    rules = [
        {"id": "stop-first", "skill": "pick", "effect": "forbid", "fallback": "stop"},
        {"id": "ask-second", "skill": "pick", "effect": "forbid", "fallback": "ask"},
        {"id": "allow-a", "skill": "say", "effect": "allow"},
        {"id": "allow-b", "skill": "say", "effect": "allow"},
    ]
    policy = make(rules)
    assert (policy.decide(req()).rule, policy.decide(req()).fallback) == ("stop-first", "stop")
    assert policy.decide(req("say", "speech", {"text": "hi"})).rule == "allow-a"


def test_a_rule_whose_conditions_fail_passes_to_the_next():
    rules = [
        {
            "id": "fast-forbid",
            "skill": "pick",
            "effect": "forbid",
            "priority": 1,
            "when": {"args": {"speed": {"exclusiveMinimum": 0.2}}},
        },
        {**ALLOW_PICK, "priority": 2},
    ]
    policy = make(rules)
    assert policy.decide(req(args={"obj": "red block", "speed": 0.1})).allowed
    assert policy.decide(req(args={"obj": "red block", "speed": 0.3})).rule == "fast-forbid"


def test_category_selector_and_star_select_calls():
    policy = make(
        [
            {"id": "queries", "category": "query", "effect": "allow"},
            {
                "id": "any-fast",
                "skill": "*",
                "effect": "forbid",
                "when": {"args": {"speed": {"exclusiveMinimum": 0.25}}},
            },
        ]
    )
    assert policy.decide(req("get_obj_names", "query", {})).allowed
    assert not policy.decide(req("pick")).allowed  # motion: no allow rule
    assert policy.decide(req(args={"obj": "x", "speed": 0.3})).rule == "any-fast"


# --- conditions --------------------------------------------------------------------------------


def test_args_json_schema_conditions_and_their_reasons():
    policy = make(
        [
            {
                "id": "careful-pick",
                "skill": "pick",
                "effect": "allow",
                "when": {
                    "args": {
                        "obj": {"enum": ["red block", "blue bowl"]},
                        "speed": {"maximum": 0.25},
                    }
                },
            }
        ]
    )
    assert policy.decide(req(args={"obj": "blue bowl", "speed": 0.25})).allowed
    fast = policy.decide(req(args={"obj": "red block", "speed": 0.4}))
    assert not fast.allowed and fast.rule == "default-deny"
    assert "rule 'careful-pick' does not apply" in fast.reason
    assert 'speed=0.4 fails {"maximum": 0.25}' in fast.reason
    cat = policy.decide(req(args={"obj": "purple cat", "speed": 0.1}))
    assert 'obj="purple cat" fails {"enum": ["red block", "blue bowl"]}' in cat.reason
    # A constrained argument must exist (checked on the fully bound args).
    missing = policy.decide(req(args={"obj": "red block"}))
    assert "argument 'speed' is missing" in missing.reason


def test_args_schema_sees_tuples_as_arrays():
    policy = make(
        [
            {
                "id": "low",
                "skill": "move_to",
                "effect": "allow",
                "when": {
                    "args": {
                        "position": {
                            "type": "array",
                            "maxItems": 3,
                            "prefixItems": [{}, {}, {"maximum": 0.2}],
                        }
                    }
                },
            }
        ]
    )
    low = req("move_to", args={"position": (0.1, 0.0, 0.1)})
    assert policy.decide(low).allowed
    assert not policy.decide(req("move_to", args={"position": (0.1, 0.0, 0.3)})).allowed


def test_targets_in_requires_every_target_in_the_zone():
    policy = make([{**MOTION_RULE, "when": {"targets_in": "workspace"}}])
    assert policy.decide(move(0.2, 0.0, 0.1)).allowed
    assert policy.decide(req("go_home", args={"speed": 0.1})).allowed  # no targets: vacuous
    two = req("pick", targets=[(0.2, 0.0, 0.1), (0.9, 0.0, 0.1)], objects=["red block"])
    decision = policy.decide(two)
    assert not decision.allowed
    assert (
        "target [0.9, 0, 0.1] is outside zone 'workspace' (min [0, -0.3, 0], max [0.5, 0.3, 0.4])"
        in decision.reason
    )


def test_targets_any_in_forbids_a_keep_out_zone():
    policy = make(
        [
            {
                "id": "keep-out",
                "category": "motion",
                "effect": "forbid",
                "priority": 1,
                "when": {"targets_any_in": "camera_mount"},
                "fallback": "stop",
            },
            {**MOTION_RULE, "when": {"targets_in": "workspace"}},
        ],
        zones={"camera_mount": {"min": [0.4, 0.2, 0.0], "max": [0.5, 0.3, 0.4]}},
    )
    hit = req("pick", targets=[(0.2, 0.0, 0.1), (0.45, 0.25, 0.2)], objects=["red block"])
    decision = policy.decide(hit)
    assert (decision.allowed, decision.rule, decision.fallback) == (False, "keep-out", "stop")
    assert "target [0.45, 0.25, 0.2] is inside zone 'camera_mount'" in decision.reason
    assert policy.decide(move(0.2, 0.0, 0.1)).allowed
    assert policy.decide(req("go_home", args={"speed": 0.1})).allowed  # no targets: no match


def test_targets_any_in_as_an_allow_condition_needs_a_target():
    policy = make(
        [{"id": "bin", "skill": "place", "effect": "allow", "when": {"targets_any_in": "bin"}}],
        zones={"bin": {"min": [0.0, 0.0, 0.0], "max": [0.1, 0.1, 0.1]}},
    )
    assert policy.decide(req("place", args={}, targets=[(0.05, 0.05, 0.05)])).allowed
    none = policy.decide(req("place", args={}))
    assert "the call has no targets, so none is in zone 'bin'" in none.reason
    away = policy.decide(req("place", args={}, targets=[(0.3, 0.0, 0.0)]))
    assert "no target is inside zone 'bin'" in away.reason and "[0.3, 0, 0]" in away.reason


def test_objects_in_scene_lists_the_objects_present():
    policy = make([{**ALLOW_PICK, "when": {"objects_in_scene": True}}])
    assert policy.decide(req(objects=["red block"])).allowed
    decision = policy.decide(req(objects=["purple cat"]))
    assert not decision.allowed
    assert (
        "object 'purple cat' is not in the scene; objects present: "
        "['red block', 'blue bowl', 'green block']" in decision.reason
    )


@pytest.mark.parametrize(
    ("request_", "what"),
    [
        (move(math.nan, 0.0, 0.1), "position=[nan, 0, 0.1] is not finite"),
        (move(0.2, 0.0, 0.1, speed=math.inf), "speed=inf is not finite"),
        (req("move_to", args={}, targets=[(0.2, -math.inf, 0.1)]), "target [0.2, -inf, 0.1]"),
    ],
)
def test_non_finite_numbers_are_never_allowed(request_, what):
    policy = make([{"id": "anything", "skill": "*", "effect": "allow"}])
    decision = policy.decide(request_)
    assert (decision.allowed, decision.rule) == (False, "default-deny")
    assert what in decision.reason
    assert not Box((0, 0, 0), (1, 1, 1)).contains((math.nan, 0.5, 0.5))


def test_box_containment():
    box = Box((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    assert box.contains((0.0, 1.0, 0.5)) and not box.contains((0.5, 0.5, 1.01))
    assert box.contains_box(Box((0.1, 0.1, 0.1), (1.0, 0.9, 0.9)))
    assert not box.contains_box(Box((-0.1, 0.1, 0.1), (0.9, 0.9, 0.9)))
    assert not box.contains_box(Box((0.1, 0.1, 0.1), (0.9, 0.9, 1.1)))
    with pytest.raises(ValueError, match="exceeds max"):
        Box((1.0, 0.0, 0.0), (0.0, 1.0, 1.0))


@pytest.mark.parametrize("fallback", ["error", "ask", "stop"])
def test_each_fallback_is_carried_in_the_decision(fallback):
    rule = {"id": "no-push", "skill": "push", "effect": "forbid", "fallback": fallback}
    assert make([rule]).decide(req("push")).fallback == fallback
    # Without its own fallback a forbid, and a default deny, use default_fallback.
    del rule["fallback"]
    policy = make([rule], default_fallback=fallback)
    assert policy.decide(req("push")) == Decision(
        False, "no-push", "rule 'no-push' forbids every call of skill push", fallback
    )
    assert policy.decide(req("pick")).fallback == fallback


def test_forbid_reason_names_the_condition_that_matched():
    policy = make([{k: v for k, v in SPEED_FORBID.items() if k != "message"}])
    decision = policy.decide(move(0.1, 0.0, 0.1, speed=0.4))
    assert decision.reason == (
        "rule 'speed-limit' forbids this move_to call: "
        'speed=0.4 matches {"type": "number", "exclusiveMinimum": 0.25}'
    )
    with_message = make([SPEED_FORBID]).decide(move(0.1, 0.0, 0.1, speed=0.4))
    assert with_message.reason.startswith("too fast (rule 'speed-limit': speed=0.4 matches")


# --- strict loading ----------------------------------------------------------------------------

GOOD = {
    "version": 1,
    "zones": {"shelf": {"min": [0.0, 0.0, 0.0], "max": [0.1, 0.1, 0.1]}},
    "budgets": {"max_skill_calls": 10, "max_motion_seconds": 5},
    "default_fallback": "ask",
    "rules": [copy.deepcopy(MOTION_RULE), copy.deepcopy(SPEED_FORBID)],
}


def _bad(path, value):
    def edit(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return edit


_DELETE = object()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_bad(["colour"], "red"), r"top level: unknown key\(s\) \['colour'\]; allowed keys"),
        (_bad(["version"], 2), r"version: got 2; allowed: 1"),
        (
            _bad(["rules", 0, "whenn"], {}),
            r"rules\[0\] \(id 'motion'\): unknown key\(s\) \['whenn'\]",
        ),
        (
            _bad(["rules", 0, "when", "targets_in"], "kitchen"),
            r"rules\[0\] \(id 'motion'\)\.when\.targets_in: unknown zone 'kitchen'; zones defined: "
            r"\['shelf', 'workspace'\]",
        ),
        (
            _bad(["rules", 1, "fallback"], "explode"),
            r"rules\[1\] \(id 'speed-limit'\)\.fallback: got 'explode'; "
            r"allowed: \['error', 'ask', 'stop'\]",
        ),
        (
            _bad(["rules", 0, "effect"], "maybe"),
            r"\.effect: got 'maybe'; allowed: \['allow', 'forbid'\]",
        ),
        (
            _bad(["rules", 0, "skill"], []),
            r"\.skill: got \[\]; allowed: a name or a non-empty list",
        ),
        (_bad(["rules", 0, "priority"], "high"), r"\.priority: got 'high'; allowed: an integer"),
        (
            _bad(["rules", 0, "when", "args", "speed", "maximum"], math.nan),
            r"\.when\.args\.speed: non-finite number nan",
        ),
        (
            _bad(["rules", 0, "when", "args", "speed"], {"maximum": "fast"}),
            r"\.when\.args\.speed: not a valid JSON Schema",
        ),
        (_bad(["rules", 0, "when", "objects_in_scene"], "yes"), r"objects_in_scene: got 'yes'"),
        (_bad(["zones", "shelf", "min"], [0.2, 0.0, 0.0]), r"zones\.shelf: min .* exceeds max"),
        (_bad(["zones", "shelf", "max"], [0.1, math.inf, 0.1]), r"zones\.shelf\.max: .*3 finite"),
        (_bad(["budgets", "max_motion_seconds"], -1), r"budgets\.max_motion_seconds: got -1"),
        (_bad(["budgets", "max_skill_calls"], 2.5), r"budgets\.max_skill_calls: got 2\.5"),
        (_bad(["default_fallback"], "panic"), r"default_fallback: got 'panic'"),
        (_bad(["rules", 1, "id"], "motion"), r"rules\[1\] \(id 'motion'\): duplicate id"),
        (_bad(["rules", 0, "id"], _DELETE), r"rules\[0\]: 'id' is required"),
        (_bad(["rules", 0, "category"], "motion"), r"give exactly one of 'skill'.*or 'category'"),
        (_bad(["rules", 0, "message"], "hi"), r"'fallback' and 'message' apply only to forbid"),
        (_bad(["rules", 1, "skill"], ["*", "pick"]), r"'\*' \(any skill\) must stand alone"),
        (_bad(["rules"], _DELETE), r"rules: expected a list of rules"),
    ],
)
def test_bad_policy_files_name_the_file_the_rule_and_what_is_allowed(tmp_path, edit, message):
    data = copy.deepcopy(GOOD)
    PrivilegePolicy.from_dict(copy.deepcopy(data), WS)  # the unedited file is fine
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError, match=message) as info:
        PrivilegePolicy.load(path, WS)
    assert str(info.value).startswith(f"{path}: ")


def test_workspace_zone_exists_only_when_given(tmp_path):
    with pytest.raises(PolicyError, match=r"unknown zone 'workspace'.*predefined only when"):
        PrivilegePolicy.from_dict(copy.deepcopy(GOOD), None, "plan.yaml")
    data = copy.deepcopy(GOOD)
    data["zones"]["workspace"] = {"min": [0, 0, 0], "max": [1, 1, 1]}
    assert PrivilegePolicy.from_dict(data, None).zones["workspace"] == Box((0, 0, 0), (1, 1, 1))


def test_unreadable_files_raise_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="not found"):
        PrivilegePolicy.load(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("rules: [\n")
    with pytest.raises(PolicyError, match="not valid YAML"):
        PrivilegePolicy.load(tmp_path / "broken.yaml")


def test_known_skills_rejects_unknown_skill_names():
    data = {"version": 1, "rules": [{"id": "r", "skill": ["pick", "pik"], "effect": "allow"}]}
    with pytest.raises(
        PolicyError,
        match=r"rules\[0\] \(id 'r'\)\.skill: unknown skill\(s\) "
        r"\['pik'\]; allowed: \['close_gripper'",
    ):
        PrivilegePolicy.from_dict(data, WS, known_skills=KNOWN_SKILLS)
    PrivilegePolicy.from_dict(data, WS)  # None: names are not checked


def test_budgets_and_describe():
    policy = PrivilegePolicy.from_dict(copy.deepcopy(GOOD), WS, "good.yaml")
    assert policy.budgets == Budgets(10, 5.0)
    assert make([]).budgets == Budgets(200, 120.0)
    text = policy.describe()
    assert "default deny (fallback ask); budgets: 10 skill calls, 5 s of motion" in text
    lines = text.splitlines()
    # Checked order: the priority-10 forbid before the priority-50 allow.
    assert [line.split()[2] for line in lines if line.startswith("  ")] == [
        "speed-limit:",
        "motion:",
    ]


# --- narrowing ---------------------------------------------------------------------------------

BASE = {
    "version": 1,
    "budgets": {"max_skill_calls": 100, "max_motion_seconds": 60},
    "rules": [
        copy.deepcopy(SPEED_FORBID),
        copy.deepcopy(MOTION_RULE),
        {"id": "queries", "skill": ["get_obj_pos", "get_obj_names"], "effect": "allow"},
    ],
}


def base() -> PrivilegePolicy:
    return PrivilegePolicy.from_dict(copy.deepcopy(BASE), WS, "base.yaml")


def plan(rules, **top) -> PrivilegePolicy:
    return PrivilegePolicy.from_dict({"version": 1, "rules": rules, **top}, WS, "plan.yaml")


def narrow_motion(**when) -> dict:
    rule = copy.deepcopy(MOTION_RULE)
    rule["id"] = "plan-motion"
    rule["when"].update(when)
    return rule


def test_a_narrowing_plan_is_accepted_and_both_policies_decide():
    plan_policy = plan(
        [
            narrow_motion(
                targets_in="left",
                args={"speed": {"type": "number", "maximum": 0.1}, "obj": {"enum": ["red block"]}},
            ),
            {
                "id": "no-bowl",
                "skill": "*",
                "effect": "forbid",
                "fallback": "ask",
                "when": {"args": {"obj": {"const": "blue bowl"}}},
            },
            {"id": "names", "skill": "get_obj_names", "effect": "allow"},
        ],
        zones={"left": {"min": [0.1, 0.0, 0.0], "max": [0.4, 0.3, 0.3]}},
        budgets={"max_skill_calls": 20},
    )
    narrowed = base().narrowed(plan_policy)
    assert narrowed.budgets == Budgets(20, 60.0)  # max_motion_seconds inherited from the base
    ok = req(
        args={"obj": "red block", "speed": 0.1}, targets=[(0.2, 0.1, 0.05)], objects=["red block"]
    )
    decision = narrowed.decide(ok)
    assert (decision.allowed, decision.rule) == (True, "plan-motion")
    assert (
        "'motion' (base.yaml)" in decision.reason and "'plan-motion' (plan.yaml)" in decision.reason
    )
    # The base forbids (speed) and its reason and fallback come back.
    fast = narrowed.decide(
        req(
            args={"obj": "red block", "speed": 0.3},
            targets=[(0.2, 0.1, 0.05)],
            objects=["red block"],
        )
    )
    assert (fast.allowed, fast.rule) == (False, "speed-limit")
    # Allowed by the base, refused by the plan: outside the plan's smaller box...
    right = narrowed.decide(
        req(
            args={"obj": "red block", "speed": 0.1},
            targets=[(0.2, -0.1, 0.05)],
            objects=["red block"],
        )
    )
    assert (right.allowed, right.rule) == (False, "default-deny")
    assert "outside zone 'left'" in right.reason
    # ... an object the plan does not list, a plan forbid with its fallback, a skill it drops.
    green = req(args={"obj": "green block", "speed": 0.1}, objects=["green block"])
    assert 'obj="green block" fails' in narrowed.decide(green).reason
    bowl = narrowed.decide(req(args={"obj": "blue bowl", "speed": 0.1}, objects=["blue bowl"]))
    assert (bowl.rule, bowl.fallback) == ("no-bowl", "ask")
    assert not narrowed.decide(req("get_obj_pos", "query", {"obj": "red block"})).allowed
    assert narrowed.decide(req("get_obj_names", "query", {})).allowed


def test_narrowing_twice_keeps_every_restriction():
    first = base().narrowed(
        plan([narrow_motion(args={"speed": {"type": "number", "maximum": 0.2}})])
    )
    second = first.narrowed(
        plan([narrow_motion(args={"speed": {"type": "number", "maximum": 0.1}})])
    )
    assert second.decide(req(args={"obj": "red block", "speed": 0.1})).allowed
    assert not second.decide(req(args={"obj": "red block", "speed": 0.15})).allowed
    with pytest.raises(PolicyWideningError, match=r"maximum 0\.2"):
        first.narrowed(plan([narrow_motion(args={"speed": {"type": "number", "maximum": 0.25}})]))
    assert len(second.parts) == 3 and "narrowed policy" in second.describe()


@pytest.mark.parametrize(
    ("plan_kwargs", "message"),
    [
        (
            {
                "rules": [narrow_motion(targets_in="big")],
                "zones": {"big": {"min": [-1, -1, 0], "max": [1, 1, 1]}},
            },
            r"rule 'plan-motion' allows skill 'move_to' under weaker conditions than the base "
            r"allows; base rule 'motion': plan zone 'big' \(min \[-1, -1, 0\], max \[1, 1, 1\]\) "
            r"is not inside base zone 'workspace'",
        ),
        (
            {"rules": [{"id": "dance", "skill": ["say", "get_obj_names"], "effect": "allow"}]},
            r"rule 'dance' allows skill 'say', which no allow rule of base\.yaml allows",
        ),
        (
            {"rules": [{"id": "all", "skill": "*", "effect": "allow"}]},
            r"rule 'all' allows any skill, which no allow rule of base\.yaml allows",
        ),
        (
            {
                "rules": [narrow_motion(targets_in="low")],
                "zones": {"low": {"min": [0.0, -0.3, -0.2], "max": [0.5, 0.3, 0.4]}},
            },
            r"plan zone 'low' \(min \[0, -0\.3, -0\.2\], max \[0\.5, 0\.3, 0\.4\]\) is not "
            r"inside base zone 'workspace'",
        ),
        (
            {"rules": [narrow_motion(args={"speed": {"type": "number", "maximum": 0.4}})]},
            r"cannot prove args\.speed \{\"type\": \"number\", \"maximum\": 0\.4\} is narrower "
            r"than \{\"type\": \"number\", \"maximum\": 0\.25\}: the base requires maximum 0\.25; "
            r"the plan's upper bound is 0\.4",
        ),
        (
            {"rules": [narrow_motion(args={"speed": {"maximum": 0.1}})]},
            r"the base requires type \"number\"; the plan does not restrict type",
        ),
        (
            {"rules": [narrow_motion(args={})]},
            r"the plan rule drops the condition args\.speed",
        ),
        (
            {"rules": [narrow_motion(objects_in_scene=False)]},
            r"the plan rule drops 'objects_in_scene: true'",
        ),
        (
            {
                "rules": [
                    {
                        **narrow_motion(),
                        "when": {"objects_in_scene": True, "args": MOTION_RULE["when"]["args"]},
                    }
                ]
            },
            r"the plan rule drops 'targets_in: workspace'",
        ),
        (
            {"rules": [], "budgets": {"max_skill_calls": 500}},
            r"budget max_skill_calls=500 exceeds the base's 100 \(a plan may only lower budgets\)",
        ),
        (
            {"rules": [], "budgets": {"max_motion_seconds": 61}},
            r"budget max_motion_seconds=61 exceeds the base's 60",
        ),
        (
            {"rules": [], "zones": {"workspace": {"min": [-1, -1, 0], "max": [1, 1, 1]}}},
            r"zone 'workspace' is redefined as \(min \[-1, -1, 0\], max \[1, 1, 1\]\) but the base "
            r"defines it as \(min \[0, -0\.3, 0\], max \[0\.5, 0\.3, 0\.4\]\)",
        ),
    ],
)
def test_widening_plans_are_rejected_with_the_reason(plan_kwargs, message):
    with pytest.raises(PolicyWideningError, match=message) as info:
        base().narrowed(plan(**plan_kwargs))
    assert str(info.value).startswith("plan policy plan.yaml widens base policy base.yaml")


def test_plan_forbids_and_category_selectors_are_checked_soundly():
    # Forbid rules never widen, whatever they select.
    base().narrowed(plan([{"id": "f", "skill": "*", "effect": "forbid"}]))
    # A category allow is not covered by skill-list allows (the base may not allow all of it).
    with pytest.raises(PolicyWideningError, match=r"allows category 'query', which no allow"):
        base().narrowed(plan([{"id": "q", "category": "query", "effect": "allow"}]))


@pytest.mark.parametrize(
    ("plan_schema", "base_schema", "ok"),
    [
        ({"type": "number", "maximum": 0.1}, {"type": "number", "maximum": 0.25}, True),
        ({"type": "integer", "maximum": 0}, {"type": "number", "maximum": 0.25}, True),
        ({"type": "number", "exclusiveMaximum": 0.25}, {"type": "number", "maximum": 0.25}, True),
        ({"type": "number", "maximum": 0.25}, {"type": "number", "exclusiveMaximum": 0.25}, False),
        ({"minimum": 0.2}, {"exclusiveMinimum": 0.1}, True),
        ({"minimum": 0.1}, {"exclusiveMinimum": 0.1}, False),
        ({"enum": [0.1, 0.2]}, {"type": "number", "maximum": 0.25}, True),
        ({"enum": [0.1, 0.3]}, {"type": "number", "maximum": 0.25}, False),
        ({"const": "red block"}, {"enum": ["red block", "blue bowl"]}, True),
        ({"type": "string"}, {"enum": ["red block"]}, False),
        ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 20}, True),
        ({"type": "string", "maxLength": 30}, {"type": "string", "maxLength": 20}, False),
        ({"pattern": "^red"}, {"pattern": "^red"}, True),
        ({"pattern": "^red b"}, {"pattern": "^red"}, False),  # true, but not provable here
        ({"type": "string"}, {"type": "string", "title": "a label"}, True),
        (False, {"maximum": 1}, True),
        (True, {"maximum": 1}, False),
    ],
)
def test_schema_narrowing_is_sound_and_conservative(plan_schema, base_schema, ok):
    assert (schema_narrower(plan_schema, base_schema) == "") is ok


def test_a_narrowed_policy_is_not_a_plan():
    narrowed = base().narrowed(plan([]))
    with pytest.raises(PolicyError, match="the plan must be one policy"):
        base().narrowed(narrowed)


# --- the shipped policy files and the real robots ---------------------------------------------


@pytest.mark.parametrize("robot", ["so101", "panda"])
def test_workspace_box_holds_the_home_tool_position(robot):
    from lang2policy.session.sim import SimSession  # MuJoCo: forward kinematics of the home posture

    session = SimSession(robot)
    box = workspace_box(session.world.description)
    home = [float(v) for v in session.world.ee_pose().position]
    assert box.contains(home), f"{robot} home {home} is outside {box}"
    ws = session.world.description.workspace
    assert box.min[:2] == pytest.approx((ws.x[0] - 0.05, ws.y[0] - 0.05))
    assert box.max[:2] == pytest.approx((ws.x[1] + 0.05, ws.y[1] + 0.05))
    assert home[2] < box.max[2] - 0.02  # a margin above home, not a razor-thin fit


@pytest.mark.parametrize("robot", ["so101", "panda"])
def test_default_policy_for_each_robot(robot):
    description = load_robot_description(robot)
    policy = default_policy(description, known_skills=KNOWN_SKILLS)
    assert policy.budgets == Budgets(200, 120.0)
    ws = description.workspace
    cx, cy = sum(ws.x) / 2, sum(ws.y) / 2
    pick = req(
        args={"obj": "red block", "speed": 0.15},
        targets=[(cx, cy, 0.06), (cx, cy, 0.015)],
        objects=["red block"],
    )
    assert policy.decide(pick) == Decision(
        True, "motion", "allowed by rule 'motion' (default.yaml)", "error"
    )
    outside = policy.decide(move(ws.x[1] + 0.3, cy, 0.1))
    assert (outside.allowed, outside.rule) == (False, "default-deny")
    assert re.search(
        r"target \[[\d.]+, [-\d.]+, 0\.1\] is outside zone 'workspace'", outside.reason
    )
    fast = policy.decide(move(cx, cy, 0.1, speed=0.4))
    assert (fast.allowed, fast.rule, fast.fallback) == (False, "speed-limit", "error")
    assert "speed=0.4" in fast.reason and "0.25" in fast.reason
    assert policy.decide(move(cx, cy, 0.1, speed=0.25)).allowed
    unknown = policy.decide(req(args={"obj": "purple cat", "speed": 0.1}, objects=["purple cat"]))
    assert "object 'purple cat' is not in the scene" in unknown.reason
    for skill, category, args in [
        ("get_obj_pos", "query", {"obj": "purple cat"}),  # queries report unknown names themselves
        ("get_obj_names", "query", {}),
        ("say", "speech", {"text": "hello"}),
        ("open_gripper", "motion", {}),
    ]:
        assert policy.decide(req(skill, category, args)).allowed, skill
    assert not policy.decide(req("self_destruct", "motion", {})).allowed


@pytest.mark.parametrize("robot", ["so101", "panda"])
def test_example_plans_narrow_the_default(robot):
    description = load_robot_description(robot)
    base_policy = default_policy(description)
    box = workspace_box(description)
    keep_out = base_policy.narrowed(
        PrivilegePolicy.load(EXAMPLES / "keep_out.yaml", box, KNOWN_SKILLS)
    )
    ask = base_policy.narrowed(
        PrivilegePolicy.load(EXAMPLES / "ask_before_push.yaml", box, KNOWN_SKILLS)
    )
    assert keep_out.budgets == Budgets(200, 60.0) and ask.budgets == Budgets(50, 120.0)
    x = sum(description.workspace.x) / 2
    left = keep_out.decide(move(x, 0.15, 0.1, speed=0.1))
    assert (left.rule, left.fallback) == ("keep-out", "stop")
    assert keep_out.decide(move(x, -0.05, 0.1, speed=0.1)).allowed
    assert keep_out.decide(move(x, -0.05, 0.1, speed=0.15)).rule == "slow-speed"
    push = req(
        "push",
        args={"obj": "red block", "target": [x, 0.0, 0.0], "speed": 0.1},
        targets=[(x, 0.0, 0.02)],
        objects=["red block"],
    )
    assert (ask.decide(push).rule, ask.decide(push).fallback) == ("ask-before-push", "ask")
    assert ask.decide(move(x, 0.0, 0.1)).allowed


def test_plans_may_not_use_regular_expressions():
    hostile = {"obj": {"type": "string", "pattern": "^(a+)+$"}}
    for effect in ("allow", "forbid"):
        rule = (
            narrow_motion(args=hostile)
            if effect == "allow"
            else {"id": "f", "skill": "*", "effect": "forbid", "when": {"args": hostile}}
        )
        with pytest.raises(PolicyWideningError, match="regular expression"):
            base().narrowed(plan([rule]))
