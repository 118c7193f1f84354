"""Corrections applied to real, validated reward specs and to skill-call arguments."""

from __future__ import annotations

import pytest

from lang2policy.corrections import (
    CorrectionError,
    apply_to_args,
    apply_to_spec,
    classify,
    objects_in_args,
    objects_in_spec,
)
from lang2policy.errors import UnknownObjectError
from lang2policy.rewards.spec import RewardSpec, validate_spec

OBJECTS = ["red block", "blue block", "green bowl", "yellow bowl"]
POSITIONS = {
    "red block": [0.2, 0.05, 0.0125],
    "blue block": [0.25, -0.1, 0.0125],
    "green bowl": [0.15, 0.15, 0.0],
    "yellow bowl": [0.3, 0.1, 0.0],
}


def spec(data: dict) -> RewardSpec:
    return validate_spec(data, OBJECTS).spec


HOVER = spec(
    {
        "task": "hover over the red block",
        "duration": 8,
        "terms": [
            {
                "id": "above",
                "term": "tool_above",
                "params": {"point": [0.2, 0.05, 0.0], "height": 0.1},
            }
        ],
        "success": {"all": [{"term": "above", "below": 0.015}], "hold": 1.0},
    }
)
LIFT = spec(
    {
        "task": "lift the red block",
        "duration": 20,
        "terms": [
            {"term": "reach", "params": {"object": "red block"}},
            {"term": "grasp", "weight": 0.3, "params": {"object": "red block", "radius": 0.01}},
            {"term": "grasp_align", "weight": 0.1, "params": {"object": "red block"}},
            {
                "id": "lift",
                "term": "object_height",
                "weight": 3.0,
                "params": {"object": "red block", "height": 0.06},
            },
        ],
        "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5},
    }
)
PUSH = spec(
    {
        "task": "push the red block",
        "terms": [
            {"term": "push", "params": {"object": "red block", "point": [0.25, 0.05, 0.0125]}},
            {
                "id": "goal",
                "term": "object_to_point",
                "params": {"object": "red block", "point": [0.25, 0.05, 0.0125], "axes": "xy"},
            },
            {
                "id": "flat",
                "term": "object_height",
                "params": {"object": "red block", "height": 0.0, "mode": "at_most"},
            },
        ],
        "success": {
            "all": [{"term": "goal", "below": 0.02}, {"term": "flat", "always_below": 0.02}],
            "hold": 0.3,
        },
    }
)
MOVE = spec(
    {
        "task": "move slowly",
        "terms": [
            {
                "id": "goal",
                "term": "tool_to_point",
                "weight": 2.0,
                "params": {"point": [0.2, 0.1, 0.08]},
            },
            {
                "id": "speed",
                "term": "tool_speed",
                "weight": 10.0,
                "params": {"speed": 0.1, "mode": "at_most"},
            },
        ],
    }
)
PLACE = spec(
    {
        "task": "put the red block in the green bowl",
        "terms": [
            {"term": "reach", "params": {"object": "red block"}},
            {
                "id": "place_on",
                "term": "object_on",
                "params": {"object": "red block", "target": "green bowl", "offset": 0.02},
            },
        ],
        "success": {"all": [{"term": "place_on", "below": 0.025}]},
    }
)


def corrected(text: str, base: RewardSpec, **kwargs):
    correction = classify(text, OBJECTS, objects_in_spec(base, kwargs.get("positions")))
    return apply_to_spec(correction, base, OBJECTS, **kwargs)


def params(result_spec: RewardSpec, term_id: str) -> dict:
    return dict(result_spec.term(term_id).params)


def unchanged_except(before: RewardSpec, after: RewardSpec, changed: set[str]) -> bool:
    return all(t == before.term(t.id) for t in after.terms if t.id not in changed)


# --------------------------------------------------------------------------- offsets
def test_an_offset_moves_the_point_target_and_nothing_else():
    result = corrected("a bit to the left", HOVER)
    assert result.changed == ("above",)
    assert params(result.spec, "above")["point"] == pytest.approx((0.2, 0.07, 0.0))
    assert params(result.spec, "above")["height"] == 0.1
    assert unchanged_except(HOVER, result.spec, {"above"})
    assert result.spec.conditions == HOVER.conditions
    assert "2.0 cm left" in result.notes[0]


def test_up_and_down_edit_heights_and_3d_points():
    assert params(corrected("much higher", HOVER).spec, "above")["height"] == pytest.approx(0.15)
    assert params(corrected("higher", LIFT).spec, "lift")["height"] == pytest.approx(0.08)
    moved = corrected("2 cm down", MOVE).spec
    assert params(moved, "goal")["point"] == pytest.approx((0.2, 0.1, 0.06))


def test_an_offset_beyond_a_range_is_clamped_with_a_note():
    low = spec(
        {
            "terms": [
                {
                    "id": "above",
                    "term": "tool_above",
                    "params": {"point": [0.2, 0.0, 0.0], "height": 0.01},
                }
            ]
        }
    )
    result = corrected("3 cm lower", low)
    assert params(result.spec, "above")["height"] == 0.0
    assert any("clamped" in note for note in result.notes)


def test_an_offset_without_a_point_target_says_what_would_take_one():
    with pytest.raises(CorrectionError) as caught:
        corrected("a bit to the left", LIFT)
    message = str(caught.value)
    assert "tool_to_point" in message and "object_height" in message
    assert "hover 2 cm left of the red block" in message


def test_a_push_has_no_height_to_raise():
    with pytest.raises(CorrectionError, match="up/down offset"):
        corrected("higher", PUSH)
    sideways = corrected("1 cm to the right", PUSH).spec
    assert params(sideways, "push")["point"] == pytest.approx((0.25, 0.04, 0.0125))
    assert params(sideways, "goal")["point"] == pytest.approx((0.25, 0.04, 0.0125))
    assert params(sideways, "flat")["height"] == 0.0  # a cap, not a target


# --------------------------------------------------------------------------- speed
def test_slower_scales_the_speed_limit():
    result = corrected("slower", MOVE)
    assert params(result.spec, "speed")["speed"] == pytest.approx(0.05)
    assert result.changed == ("speed",)
    assert params(corrected("at 2 cm/s", MOVE).spec, "speed")["speed"] == pytest.approx(0.02)


def test_slower_without_a_limit_adds_one_from_the_speed_now():
    nominal = corrected("slower", HOVER)
    added = nominal.spec.term("speed")
    assert (added.term, added.params["mode"], added.weight) == ("tool_speed", "at_most", 10.0)
    assert added.params["speed"] == pytest.approx(0.05)  # half of a nominal 0.1 m/s
    measured = corrected("much slower", HOVER, current_speed=0.4).spec.term("speed")
    assert measured.params["speed"] == pytest.approx(0.12)


def test_faster_raises_a_limit_or_adds_a_minimum_speed():
    assert params(corrected("faster", MOVE).spec, "speed")["speed"] == pytest.approx(0.15)
    added = corrected("faster", HOVER).spec.term("speed")
    assert added.params["mode"] == "at_least"
    fast = spec(
        {
            "terms": [
                {"id": "speed", "term": "tool_speed", "params": {"speed": 0.8, "mode": "at_most"}}
            ]
        }
    )
    result = corrected("much faster", fast)
    assert params(result.spec, "speed")["speed"] == 1.0  # the term's range ends at 1 m/s
    assert any("clamped" in note for note in result.notes)


# --------------------------------------------------------------------------- targets
def test_a_target_change_renames_the_object_everywhere():
    result = corrected("no, the blue one", LIFT)
    assert objects_in_spec(result.spec) == ["blue block"]
    assert set(result.changed) == {"reach", "grasp", "grasp_align", "lift"}
    assert result.spec.task == "lift the blue block"
    assert result.spec.conditions == LIFT.conditions


def test_a_target_change_picks_the_object_of_the_same_kind():
    result = corrected("no, the yellow bowl", PLACE)
    assert params(result.spec, "place_on") == {
        "object": "red block",
        "target": "yellow bowl",
        "offset": 0.02,
    }


def test_a_point_on_the_old_object_moves_to_the_new_one_given_positions():
    assert objects_in_spec(HOVER) == []
    assert objects_in_spec(HOVER, POSITIONS) == ["red block"]  # the hover point sits on it
    moved = corrected("no, the blue one", HOVER, positions=POSITIONS)
    assert moved.changed == ("above",)
    assert params(moved.spec, "above")["point"] == pytest.approx((0.25, -0.1, 0.0))
    assert moved.spec.task == "hover over the blue block"
    with_reach = spec(
        {
            "terms": [
                {"term": "reach", "params": {"object": "red block"}},
                {"id": "above", "term": "tool_above", "params": {"point": [0.2, 0.05, 0.0]}},
            ]
        }
    )
    kept = corrected("no, the blue one", with_reach)
    assert params(kept.spec, "above")["point"] == pytest.approx((0.2, 0.05, 0.0))
    assert kept.spec.term("reach").params["object"] == "blue block"
    assert any("positions not given" in note for note in kept.notes)


def test_a_target_change_that_fits_nothing_says_why():
    with pytest.raises(CorrectionError, match="cannot tell which object the yellow bowl"):
        corrected("no, the yellow bowl", LIFT)
    onto_block = spec(
        {
            "terms": [
                {
                    "id": "on",
                    "term": "object_on",
                    "params": {"object": "red block", "target": "blue block"},
                }
            ]
        }
    )
    with pytest.raises(CorrectionError, match="twice"):
        apply_to_spec(classify("the blue block, not the red block", OBJECTS), onto_block, OBJECTS)


def test_stop_and_replan_are_not_edits():
    with pytest.raises(CorrectionError, match="not an edit"):
        corrected("stop", HOVER)
    with pytest.raises(CorrectionError, match="plan-level"):
        corrected("put it in the bowl instead of lifting", HOVER)


# --------------------------------------------------------------------------- skill calls
def call(text: str, skill: str, args: dict, **kwargs):
    correction = classify(text, OBJECTS, objects_in_args(skill, args))
    return apply_to_args(correction, skill, args, OBJECTS, **kwargs)


def test_skill_call_offsets_shift_positions_and_point_targets():
    moved = call("a bit to the left", "move_to", {"position": [0.2, 0.0, 0.1]})
    assert moved.args == {"position": pytest.approx([0.2, 0.02, 0.1]), "speed": 0.15}
    pushed = call("3 cm further away", "push", {"obj": "red block", "target": [0.2, 0.0, 0.0]})
    assert pushed.args["target"] == pytest.approx([0.23, 0.0, 0.0])
    placed = call("a bit closer", "place", {"target": "green bowl"}, positions=POSITIONS)
    assert placed.args["target"] == pytest.approx([0.13, 0.15, 0.0])
    with pytest.raises(CorrectionError, match="position of the green bowl is needed"):
        call("a bit closer", "place", {"target": "green bowl"})
    with pytest.raises(CorrectionError, match=r"pick\(\) has no position.*move_to"):
        call("a bit to the left", "pick", {"obj": "red block"})


def test_skill_call_speed_is_scaled_within_the_skills_range():
    assert call("slower", "pick", {"obj": "red block"}).args["speed"] == pytest.approx(0.075)
    fast = call("much faster", "go_home", {"speed": 0.4})
    assert fast.args["speed"] == 0.5
    assert any("clamped" in note for note in fast.notes)
    with pytest.raises(CorrectionError, match=r"open_gripper\(\) takes no speed"):
        call("slower", "open_gripper", {})


def test_skill_call_target_changes_rename_obj_or_target():
    picked = call("no, the blue one", "pick", {"obj": "red block"})
    assert picked.args["obj"] == "blue block"
    put = call(
        "not that one, the yellow bowl",
        "put_first_on_second",
        {"obj": "red block", "target": "green bowl"},
    )
    assert put.args == {"obj": "red block", "target": "yellow bowl", "speed": 0.15}


def test_skill_call_errors():
    with pytest.raises(CorrectionError, match="unknown skill"):
        call("slower", "juggle", {})
    with pytest.raises(UnknownObjectError):
        call("no, the purple one", "pick", {"obj": "red block"})


def test_an_absolute_speed_caps_the_tool_and_leaves_an_objects_target_speed():
    still = spec(
        {
            "terms": [
                {
                    "id": "still",
                    "term": "object_speed",
                    "params": {"object": "red block", "speed": 0.0},
                }
            ]
        }
    )
    result = corrected("at 2 cm/s", still)
    assert params(result.spec, "still")["speed"] == 0.0
    assert params(result.spec, "speed") == {"speed": 0.02, "mode": "at_most"}
