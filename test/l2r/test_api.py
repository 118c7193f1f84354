"""The reward API: what every function does to a spec, edits, and reward code in the sandbox."""

from __future__ import annotations

import time

import pytest

from lang2policy.errors import InvalidIntentError, RewardSpecError, UnknownObjectError
from lang2policy.l2r.api import REWARD_API, RewardBuilder, prompt_api
from lang2policy.l2r.sandboxed import RewardCodeError, run_reward_code
from lang2policy.rewards.spec import validate_spec
from lang2policy.sandbox.runner import SandboxLimits

OBJECTS = ["red block", "blue bowl", "green block"]
POSITIONS = {"red block": (0.2, 0.1, 0.0124), "green block": (0.2, 0.0, 0.0124)}
HEADINGS = {"red block": 170.0}
DEFAULTS = {"table_clearance", "control_effort", "posture"}
# function call -> (term id -> (term, expected params), success conditions, duration)
MAPPING = {
    'set_reach("red block")': (
        {"reach": ("reach", {"object": "red block"}), "pointing_down": ("tool_pointing_down", {})},
        {"reach": ("below", 0.02)}, 10.0),
    'set_grasp("red block")': (
        {"reach": ("reach", {}), "grasp": ("grasp", {"object": "red block", "radius": 0.01}),
         "grasp_align": ("grasp_align", {"object": "red block"}),
         "pointing_down": ("tool_pointing_down", {})},
        {"reach": ("below", 0.02), "grasp": ("below", 0.1)}, 10.0),
    'set_lift("red block", 0.08)': (
        {"reach": ("reach", {}), "grasp": ("grasp", {}), "grasp_align": ("grasp_align", {}),
         "pointing_down": ("tool_pointing_down", {}),
         "lift": ("object_height", {"object": "red block", "height": 0.08, "mode": "exactly"})},
        {"lift": ("below", 0.02)}, 20.0),
    'set_object_target("red block", 0.25, -0.1)': (
        {"push": ("push", {"point": (0.25, -0.1, 0.0125)}), "gripper": ("gripper",
                                                                        {"opening": 0.0}),
         "to_point": ("object_to_point", {"point": (0.25, -0.1, 0.0125), "axes": "xy"})},
        {"to_point": ("below", 0.03)}, 15.0),
    'set_place_on("red block", "blue bowl")': (
        {"reach": ("reach", {}), "grasp": ("grasp", {}), "grasp_align": ("grasp_align", {}),
         "pointing_down": ("tool_pointing_down", {}),
         "place_on": ("object_on", {"target": "blue bowl", "offset": 0.02})},
        {"place_on": ("below", 0.025)}, 15.0),
    'set_push("red block", 0.25, 0.1)': (
        {"push": ("push", {"object": "red block"}), "gripper": ("gripper", {"opening": 0.0}),
         "push_to": ("object_to_point", {"point": (0.25, 0.1, 0.0125)}),
         "flat_on_table": ("object_height", {"height": 0.0, "mode": "at_most"})},
        {"push_to": ("below", 0.02), "flat_on_table": ("always_below", 0.02)}, 15.0),
    'set_push_by("red block", 0.1, "to the right")': (
        {"push": ("push", {}), "gripper": ("gripper", {}), "flat_on_table": ("object_height", {}),
         "push_to": ("object_to_point", {"point": (0.2, 0.0, 0.0125)})},
        {"push_to": ("below", 0.02), "flat_on_table": ("always_below", 0.02)}, 15.0),
    'set_yaw("red block", -30)': (
        {"reach": ("reach", {}), "grasp": ("grasp", {}), "grasp_align": ("grasp_align", {}),
         "pointing_down": ("tool_pointing_down", {}),
         "yaw": ("object_yaw", {"yaw_deg": -30.0}), "upright": ("object_upright", {})},
        {"yaw": ("below", 0.17), "upright": ("below", 0.1)}, 15.0),
    'set_turn("red block", 20)': (  # heading 170 + 20 wraps to -170
        {"reach": ("reach", {}), "grasp": ("grasp", {}), "grasp_align": ("grasp_align", {}),
         "pointing_down": ("tool_pointing_down", {}),
         "yaw": ("object_yaw", {"yaw_deg": -170.0}), "upright": ("object_upright", {})},
        {"yaw": ("below", 0.17), "upright": ("below", 0.1)}, 15.0),
    'set_upright("red block")': (
        {"reach": ("reach", {}), "pointing_down": ("tool_pointing_down", {}),
         "upright": ("object_upright", {"object": "red block"})},
        {"upright": ("below", 0.1)}, 15.0),
    "set_hover(0.2, 0.05, 0.1)": (
        {"hover": ("tool_above", {"point": (0.2, 0.05, 0.0), "height": 0.1})},
        {"hover": ("below", 0.015)}, 8.0),
    "set_tool_target(0.2, 0.05, 0.08)": (
        {"tool_to": ("tool_to_point", {"point": (0.2, 0.05, 0.08)})},
        {"tool_to": ("below", 0.015)}, 15.0),
    "set_speed_limit(0.05)": (
        {"speed": ("tool_speed", {"speed": 0.05, "mode": "at_most"})}, {}, 10.0),
    "set_min_speed(0.2)": (
        {"speed": ("tool_speed", {"speed": 0.2, "mode": "at_least"})}, {}, 10.0),
    "avoid_region([0.2, 0.05, 0.05], 0.04)": (
        {"keep_out": ("keep_out", {"point": (0.2, 0.05, 0.05), "half_size": (0.04, 0.04, 0.04),
                                   "subject": "tool"})},
        {"keep_out": ("always_below", 0.005)}, 10.0),
    "set_gripper(1.0)": ({"gripper": ("gripper", {"opening": 1.0})}, {}, 10.0),
    "set_duration(7)": ({}, {}, 7.0),
}


def build(*calls: tuple[str, dict], base=None) -> RewardBuilder:
    builder = RewardBuilder(OBJECTS, base, positions=POSITIONS, headings=HEADINGS)
    for name, args in calls:
        builder.call(name, REWARD_API[name].bind(args))
    return builder


def test_every_api_function_has_a_mapping_test():
    tested = {code.split("(")[0] for code in MAPPING}
    assert tested | {"reset_reward", "execute_plan"} == set(REWARD_API)
    assert "def set_push_by(obj, distance, direction):" in prompt_api()
    assert "one of ['away from the robot'" in prompt_api()


@pytest.mark.parametrize("code", list(MAPPING))
def test_each_api_function_maps_to_spec_terms(code):
    expected_terms, expected_conditions, duration = MAPPING[code]
    base = "set_tool_target(0.2, 0.0, 0.1)\n" if code.startswith("set_duration") else ""
    result = run_reward_code(base + code + "\nexecute_plan()", OBJECTS, code,
                             positions=POSITIONS, headings=HEADINGS)
    spec = result.spec
    terms = {t.id: t for t in spec.terms}
    if base:
        expected_terms = {**expected_terms, "tool_to": ("tool_to_point", {})}
        expected_conditions = {"tool_to": ("below", 0.015)}
    assert set(terms) - DEFAULTS == set(expected_terms), code
    for term_id, (term, params) in expected_terms.items():
        assert terms[term_id].term == term
        for key, value in params.items():
            assert terms[term_id].params[key] == pytest.approx(value), (code, term_id, key)
    conditions = {c.term: ("always_below" if c.always else "below", c.tolerance)
                  for c in spec.conditions}
    assert conditions == expected_conditions
    assert spec.duration == duration and result.executed


def test_the_calls_of_a_correction_edit_the_running_spec():
    first = validate_spec(build(("set_lift", {"obj": "red block", "height": 0.1}))
                          .to_dict("lift"), OBJECTS).spec
    edited = build(("set_lift", {"obj": "red block", "height": 0.15}),
                   ("set_speed_limit", {"m_per_s": 0.05}), base=first)
    spec = validate_spec(edited.to_dict("higher, slowly"), OBJECTS).spec
    assert spec.term("lift").params["height"] == 0.15
    assert spec.term("speed").params["speed"] == 0.05
    assert [t.id for t in spec.terms][: len(first.terms)] == [t.id for t in first.terms]
    replaced = build(("reset_reward", {}), ("set_hover", {"x": 0.2, "y": 0.0, "height": 0.1}),
                     base=first)
    assert set(replaced.terms) == {"hover"}
    pushed = build(("set_push", {"obj": "red block", "x": 0.25, "y": 0.0}), base=first)
    assert {"reach", "grasp", "grasp_align"}.isdisjoint(pushed.terms)  # pushing, not grasping
    grasped = build(("set_grasp", {"obj": "red block"}), base=validate_spec(
        pushed.to_dict("push"), OBJECTS).spec)
    assert "gripper" not in grasped.terms and "push" not in grasped.terms


def test_regions_are_kept_apart_by_centre():
    builder = build(("avoid_region", {"center": [0.2, 0.05, 0.05], "half_size": 0.04}),
                    ("avoid_region", {"center": [0.2, -0.05, 0.05], "half_size": 0.04}),
                    ("avoid_region", {"center": [0.2, 0.05, 0.05], "half_size": 0.06}))
    assert [i for i in builder.terms] == ["keep_out", "keep_out_2"]
    assert builder.terms["keep_out"]["params"]["half_size"] == [0.06] * 3


def test_bad_calls_say_what_is_allowed():
    with pytest.raises(UnknownObjectError, match=r"unknown object 'unicorn'; objects: \["):
        build(("set_lift", {"obj": "unicorn", "height": 0.1}))
    with pytest.raises(InvalidIntentError, match="cannot be placed on itself"):
        build(("set_place_on", {"obj": "red block", "target": "red block"}))
    with pytest.raises(InvalidIntentError, match="heading of the blue bowl is not known"):
        build(("set_turn", {"obj": "blue bowl", "degrees": 10}))
    with pytest.raises(InvalidIntentError, match="position of the blue bowl is not known"):
        build(("set_push_by", {"obj": "blue bowl", "distance": 0.05, "direction": "to the left"}))
    with pytest.raises(InvalidIntentError, match="allowed: one of 'away from the robot'"):
        REWARD_API["set_push_by"].bind({"obj": "red block", "distance": 0.1, "direction": "up"})
    with pytest.raises(InvalidIntentError, match="no reward function 'fly'"):
        RewardBuilder(OBJECTS).call("fly", {})
    with pytest.raises(RewardSpecError, match="non-empty list of terms"):
        validate_spec(build(("set_duration", {"seconds": 5})).to_dict("x"), OBJECTS)


# ---------------------------------------------------------------- in the sandbox
def test_reward_code_runs_in_the_confined_child_and_only_json_comes_back():
    code = ("reset_reward()\nfor h in [0.05, 0.1]:\n    set_lift('red block', h)\n"
            "set_speed_limit(float(np.clip(0.5, 0, 0.1)))\nexecute_plan(12)\n")
    started = time.monotonic()
    result = run_reward_code(code, OBJECTS, "lift")
    assert time.monotonic() - started < 5
    assert result.outcome.layers["seccomp"] == "on" and result.outcome.layers["rlimits"] == "on"
    assert result.calls == ("reset_reward", "set_lift", "set_lift", "set_speed_limit",
                            "execute_plan")
    assert result.spec.term("lift").params["height"] == 0.1 and result.spec.duration == 12
    assert [i.skill for i in result.outcome.intents][-1] == "execute_plan"


@pytest.mark.parametrize(
    ("code", "kind", "message"),
    [
        ("import os\nset_lift('red block', 0.1)", "rejected", "import of 'os' is not allowed"),
        ("open('/etc/passwd').read()", "rejected", "open"),
        ("set_lift('red block', 0.1)\nraise ValueError('boom')", "runtime", "boom"),
        ("set_lift('unicorn', 0.1)", "denied", "'unicorn' is not in the scene"),
        ("set_lift('red block', float('nan'))", "runtime", "not a finite number"),
        ("set_lift('red block', 'high')", "invalid", "not a finite number"),
        ("fly_to_the_moon()", "runtime", "NameError"),
        ("while True:\n    pass", "limit", "compute time"),
    ],
    ids=["import-os", "open", "raise", "unknown-object", "nan", "string", "unknown-name",
         "loop"],
)
def test_forbidden_or_broken_reward_code_fails_cleanly(code, kind, message):
    limits = SandboxLimits(wall_seconds=1.0, cpu_seconds=2.0, memory_mb=512)
    with pytest.raises(RewardCodeError, match=message) as caught:
        run_reward_code(code, OBJECTS, "x", limits=limits)
    assert caught.value.outcome.kind == kind


def test_the_os_layers_hold_without_the_static_check():
    code = "import os\nos.system('touch /tmp/l2r-pwned')\nset_lift('red block', 0.1)"
    with pytest.raises(RewardCodeError, match="ImportError") as caught:
        run_reward_code(code, OBJECTS, "x", ast_check=False)
    assert caught.value.outcome.kind == "runtime"
