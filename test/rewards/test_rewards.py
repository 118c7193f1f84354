"""Reward spec validation and the reward-term library, on hand-built states (no physics)."""

from __future__ import annotations

import json
import math

import jsonschema
import numpy as np
import pytest

from lang2policy.errors import RewardSpecError
from lang2policy.rewards.features import Features
from lang2policy.rewards.spec import json_schema, validate_spec
from lang2policy.rewards.terms import TERMS

OBJECTS = ["red block", "blue bowl"]
LIFT = {"version": 1, "task": "lift", "duration": 8,
        "terms": [{"term": "reach", "params": {"object": "red block"}},
                  {"id": "lift", "term": "object_height", "weight": 3.0,
                   "params": {"object": "red block", "height": 0.1}}],
        "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5}}


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def state(tool=(0.2, 0.0, 0.1), block=(0.2, 0.0, 0.0125), block_quat=(1, 0, 0, 0),
          gripper=1.0, tool_vel=(0, 0, 0), block_vel=(0, 0, 0), closing=(0, 1, 0),
          axis=(0, 0, -1), points=((0.2, 0.0, 0.2),)) -> Features:
    """Features of one hand-built state (K = T = 1)."""
    a = lambda v: np.asarray(v, float).reshape(1, 1, -1)  # noqa: E731
    return Features(
        tool=a(tool), tool_vel=a(tool_vel), tool_axis=a(axis), closing_axis=a(closing),
        objects={"red block": {"pos": a(block), "quat": a(block_quat), "vel": a(block_vel),
                               "rest_z": 0.0125},
                 "blue bowl": {"pos": a((0.25, 0.1, 0.0)), "quat": a((1, 0, 0, 0)),
                               "vel": a((0, 0, 0)), "rest_z": 0.0}},
        gripper=np.full((1, 1), gripper), arm_q=np.zeros((1, 1, 5)), home_q=np.zeros(5),
        clearance_points=np.asarray(points, float).reshape(1, 1, -1, 3),
        ctrl=np.zeros((1, 2, 6)), dt=0.01)


def measure(term: str, features: Features, **params) -> float:
    spec = TERMS[term]
    full = {p.name: p.default for p in spec.params} | params
    return float(spec.measure(features, full).ravel()[0])


# ------------------------------------------------------------------ validation
def test_a_good_spec_validates_and_round_trips():
    result = validate_spec(LIFT, OBJECTS)
    assert not result.notes
    spec = result.spec
    assert spec.term("lift").params["height"] == 0.1
    assert {t.id for t in spec.terms} >= {"reach", "lift", "table_clearance"}  # defaults added
    again = validate_spec(spec.to_json(), OBJECTS, add_defaults=False).spec
    assert again == spec


def test_unknown_term_lists_the_valid_terms():
    bad = {**LIFT, "terms": [{"term": "teleport", "params": {}}]}
    with pytest.raises(RewardSpecError, match=r"unknown term 'teleport'.*object_height"):
        validate_spec(bad, OBJECTS)


def test_unknown_object_lists_the_scene_objects():
    bad = {**LIFT, "terms": [{"term": "reach", "params": {"object": "green block"}}]}
    with pytest.raises(RewardSpecError, match=r"'green block'.*blue bowl.*red block"):
        validate_spec(bad, OBJECTS)


def test_unknown_parameter_and_key_are_rejected():
    with pytest.raises(RewardSpecError, match="unknown keys \\['speed'\\]"):
        validate_spec({**LIFT, "terms": [{"term": "reach",
                                          "params": {"object": "red block", "speed": 1}}]},
                      OBJECTS)
    with pytest.raises(RewardSpecError, match="unknown keys \\['colour'\\]"):
        validate_spec({**LIFT, "colour": "red"}, OBJECTS)


def test_out_of_range_numbers_are_clamped_and_reported():
    high = json.loads(json.dumps(LIFT))
    high["terms"][1]["params"]["height"] = 2.0
    high["terms"][1]["weight"] = 1e6
    result = validate_spec(high, OBJECTS)
    assert result.spec.term("lift").params["height"] == 0.3
    assert result.spec.term("lift").weight == 100.0
    assert len(result.notes) == 2 and "clamped to 0.3" in " ".join(result.notes)
    with pytest.raises(RewardSpecError, match="strict"):
        validate_spec(high, OBJECTS, strict=True)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "high", None, True])
def test_non_finite_and_wrong_types_are_rejected(value):
    bad = json.loads(json.dumps(LIFT))
    bad["terms"][1]["params"]["height"] = value
    with pytest.raises(RewardSpecError, match="height"):
        validate_spec(bad, OBJECTS)


def test_success_conditions_must_name_term_ids():
    bad = {**LIFT, "success": {"all": [{"term": "nope", "below": 0.1}]}}
    with pytest.raises(RewardSpecError, match="not a term id"):
        validate_spec(bad, OBJECTS)
    both = {**LIFT, "success": {"all": [{"term": "lift", "below": 0.1, "always_below": 1}]}}
    with pytest.raises(RewardSpecError, match="exactly one"):
        validate_spec(both, OBJECTS)


def test_version_and_garbage_are_rejected():
    with pytest.raises(RewardSpecError, match="version 2"):
        validate_spec({**LIFT, "version": 2}, OBJECTS)
    with pytest.raises(RewardSpecError, match="not valid JSON"):
        validate_spec("{terms: [", OBJECTS)
    with pytest.raises(RewardSpecError, match="non-empty list"):
        validate_spec({"terms": []}, OBJECTS)


def test_json_schema_accepts_the_reference_and_rejects_unknown_objects():
    schema = json_schema(OBJECTS)
    jsonschema.validate(LIFT, schema)
    bad = {**LIFT, "terms": [{"term": "reach", "params": {"object": "green block"}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_every_parameter_declares_a_default_and_a_range():
    for term in TERMS.values():
        assert term.weight.low <= term.weight.default <= term.weight.high, term.name
        for p in term.params:
            if hasattr(p, "low"):
                low, high, default = np.atleast_1d(p.low), np.atleast_1d(p.high), np.atleast_1d(
                    p.default)
                assert np.all(low <= default) and np.all(default <= high), (term.name, p.name)


# ------------------------------------------------------------------ term signs and scales
def test_reach_is_the_distance_in_metres():
    assert measure("reach", state(tool=(0.2, 0.0, 0.0125)), object="red block",
                   approach="direct") == pytest.approx(0.0)
    assert measure("reach", state(tool=(0.3, 0.0, 0.0125)), object="red block",
                   approach="direct") == pytest.approx(0.1)
    # approaching from above: straight over the object costs only the height difference
    assert measure("reach", state(tool=(0.2, 0.0, 0.0625)), object="red block") == \
        pytest.approx(0.05)


def test_object_height_counts_lift_above_rest():
    resting = state()
    lifted = state(block=(0.2, 0.0, 0.1125))
    assert measure("object_height", resting, object="red block", height=0.1) == \
        pytest.approx(0.1)
    assert measure("object_height", lifted, object="red block", height=0.1) == \
        pytest.approx(0.0)
    assert measure("object_height", lifted, object="red block", height=0.05,
                   mode="at_least") == 0.0


def test_object_to_point_and_on():
    f = state(block=(0.25, 0.1, 0.0325))
    assert measure("object_to_point", f, object="red block", point=[0.25, 0.0, 0.0],
                   axes="xy") == pytest.approx(0.1)
    assert measure("object_on", f, object="red block", target="blue bowl",
                   offset=0.0325) == pytest.approx(0.0, abs=1e-9)


def test_yaw_respects_symmetry_and_upright_detects_tilt():
    turned = state(block_quat=_yaw_quat(math.radians(100)))
    assert measure("object_yaw", turned, object="red block", yaw_deg=10,
                   symmetry=4) == pytest.approx(0.0, abs=1e-9)
    assert measure("object_yaw", turned, object="red block", yaw_deg=55,
                   symmetry=4) == pytest.approx(math.radians(45))
    tilt = [math.cos(0.2), math.sin(0.2), 0.0, 0.0]  # 0.4 rad about x
    assert measure("object_upright", state(block_quat=tilt), object="red block") == \
        pytest.approx(0.4)
    assert measure("object_upright", state(), object="red block") == pytest.approx(0.0)


def test_speed_terms_are_one_sided_by_default():
    fast = state(tool_vel=(0.3, 0.0, 0.0))
    assert measure("tool_speed", fast, speed=0.1) == pytest.approx(0.2)
    assert measure("tool_speed", state(tool_vel=(0.05, 0, 0)), speed=0.1) == 0.0
    assert measure("object_speed", state(block_vel=(0, 0.2, 0)), object="red block",
                   speed=0.0) == pytest.approx(0.2)


def test_gripper_grasp_and_alignment():
    assert measure("gripper", state(gripper=0.25), opening=1.0) == pytest.approx(0.75)
    far = state(tool=(0.3, 0.0, 0.0125), gripper=0.5)
    near_open = state(tool=(0.2, 0.0, 0.0125), gripper=0.5)
    near_closed = state(tool=(0.2, 0.0, 0.0125), gripper=0.0)
    assert measure("grasp", far, object="red block") == pytest.approx(0.0)
    assert measure("grasp", near_open, object="red block") == pytest.approx(0.5)
    assert measure("grasp", near_closed, object="red block") == pytest.approx(0.0)
    square = state(closing=(0, 1, 0))
    skew = state(closing=(math.cos(0.3), math.sin(0.3), 0))
    assert measure("grasp_align", square, object="red block") == pytest.approx(0.0, abs=1e-9)
    assert measure("grasp_align", skew, object="red block") == pytest.approx(0.3)


def test_push_spot_is_behind_the_object():
    # object at x=0.2 pushed toward x=0.3: the spot is standoff behind it, at x=0.17
    f = state(tool=(0.17, 0.0, 0.0125))
    assert measure("push", f, object="red block", point=[0.3, 0.0, 0.0125],
                   standoff=0.03) == pytest.approx(0.0, abs=1e-9)
    assert measure("push", state(tool=(0.23, 0.0, 0.0125)), object="red block",
                   point=[0.3, 0.0, 0.0125], standoff=0.03) == pytest.approx(0.06)


def test_keep_out_and_table_clearance_penalise_only_inside():
    box = {"point": [0.2, 0.0, 0.1], "half_size": [0.05, 0.05, 0.05], "margin": 0.0,
           "subject": "tool"}
    assert measure("keep_out", state(tool=(0.2, 0.0, 0.1)), **box) == pytest.approx(0.05)
    assert measure("keep_out", state(tool=(0.2, 0.2, 0.1)), **box) == 0.0
    assert measure("keep_out", state(block=(0.2, 0.0, 0.06)), **{**box, "subject": "red block"}
                   ) == pytest.approx(0.01)
    below = state(points=((0.2, 0, -0.01), (0.2, 0, 0.2), (0.2, 0, 0.003)))
    assert measure("table_clearance", below, margin=0.005) == pytest.approx(0.015 + 0.002)
    assert measure("table_clearance", state(), margin=0.005) == 0.0


def test_pointing_down_posture_effort():
    assert measure("tool_pointing_down", state()) == pytest.approx(0.0, abs=1e-6)
    assert measure("tool_pointing_down", state(axis=(1, 0, 0))) == pytest.approx(math.pi / 2)
    f = state()
    f.arm_q[:] = 0.1
    assert measure("posture", f) == pytest.approx(0.1)
    f.ctrl[0, 1] = 0.01
    values = TERMS["control_effort"].measure(f, {})
    assert values.shape == (1, 2) and values[0, 1] > 0 and values[0, 0] == 0
