"""The skill topic's JSON messages and a skill plan's limits in the VLA node's core (issue 18):
parsing and refusals, limits that narrow the node's defaults, and the speed cap and workspace
box on each target, checked with the forward kinematics of the real robot model. No ROS."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lang2policy.vla.skill.limits import (
    SkillLimits,
    TargetLimiter,
    resolve_limits,
)
from lang2policy.vla.skill.message import (
    Box,
    Cancel,
    LimitsRequest,
    MotionMessage,
    SkillMessageError,
    StartSkill,
    parse_skill_message,
)

WIDE = Box((0.0, -0.32, 0.0), (0.42, 0.32, 0.40))  # config/safety.yaml's so101 workspace
DEFAULTS = SkillLimits(1.5, WIDE)


def test_plain_text_and_empty_keep_their_meaning():
    assert parse_skill_message("lift the red block") == StartSkill("lift the red block")
    assert parse_skill_message("") == Cancel() and parse_skill_message("  ") == Cancel()


def test_a_json_start_with_every_field():
    text = json.dumps(
        {
            "skill": "lift the red block",
            "plan_id": "plan-7",
            "limits": {
                "time_budget_s": 12,
                "max_joint_speed": 0.5,
                "workspace": {"min": [0.1, -0.1, 0.0], "max": [0.3, 0.1, 0.2]},
            },
            "motions": ["a bit to the left", "slower"],
        }
    )
    start = parse_skill_message(text)
    assert start == StartSkill(
        "lift the red block",
        "plan-7",
        LimitsRequest(12.0, 0.5, Box((0.1, -0.1, 0.0), (0.3, 0.1, 0.2))),
        ("a bit to the left", "slower"),
    )
    assert parse_skill_message('{"skill": "lift the red block"}') == StartSkill(
        "lift the red block"
    )
    motion = parse_skill_message('{"motion": "lower", "plan_id": "p"}')
    assert motion == MotionMessage("lower", "p")


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ('{"skill": "lift the red block", "speed": 1}', "unknown keys ['speed']"),
        ('{"plan_id": "p"}', "needs 'skill'"),
        ('{"skill": "x", "motion": "lower"}', "not both"),
        ('{"skill": ""}', "'skill' must be non-empty text"),
        ('{"skill": 3}', "'skill' must be non-empty text"),
        ('{"skill": "x", "limits": {"max_joint_speed": -1}}', "speed must be a number > 0"),
        ('{"skill": "x", "limits": {"time_budget_s": "10"}}', "time_budget_s must be a finite"),
        ('{"skill": "x", "limits": {"time_budget_s": 1e999}}', "must be finite"),
        ('{"skill": "x", "limits": {"max_speed": 1}}', "unknown keys ['max_speed']"),
        ('{"skill": "x", "limits": [1]}', "'limits' must be an object"),
        ('{"skill": "x", "limits": {"workspace": {"min": [0, 0, 0]}}}', '"min": [x, y, z]'),
        (
            '{"skill": "x", "limits": {"workspace": {"min": [0, 0, 0], "max": [1, 0, 1]}}}',
            "not on ['y']",
        ),
        ('{"skill": "x", "limits": {"workspace": {"min": [0, 0], "max": [1, 1, 1]}}}', "[x, y, z]"),
        ('{"skill": "x", "motions": "lower"}', "'motions' must be a list"),
        ('{"skill": "x", "motions": [1]}', "'motions[0]' must be non-empty text"),
        ('{"skill": "x", "plan_id": 5}', "'plan_id' must be one line of text"),
        ('{"skill": "x", "plan_id": "a\\nb"}', "'plan_id' must be one line of text"),
        ('{"skill": "x"', "not valid JSON"),
        ("[1]", None),  # not starting with "{": a (bad) skill text, refused by skill_parse
    ],
)
def test_bad_messages_are_refused_with_what_was_wrong(message, problem):
    if problem is None:
        assert parse_skill_message(message) == StartSkill(message)
        return
    with pytest.raises(SkillMessageError) as caught:
        parse_skill_message(message)
    assert problem in str(caught.value)


def test_a_refusal_carries_the_plan_id_when_it_could_be_read():
    with pytest.raises(SkillMessageError) as caught:
        parse_skill_message('{"skill": "x", "plan_id": "p9", "limits": {"max_joint_speed": 0}}')
    assert caught.value.plan_id == "p9"


def test_limits_only_narrow_the_defaults():
    assert resolve_limits(LimitsRequest(), DEFAULTS) == DEFAULTS
    faster = resolve_limits(LimitsRequest(max_joint_speed=5.0), DEFAULTS)
    assert faster.max_joint_speed == 1.5  # never above the node's (the safety node's) cap
    assert resolve_limits(LimitsRequest(max_joint_speed=0.4), DEFAULTS).max_joint_speed == 0.4
    box = resolve_limits(LimitsRequest(workspace=Box((0.1, -1, -1), (1, 0.1, 0.2))), DEFAULTS)
    assert box.workspace == Box((0.1, -0.32, 0.0), (0.42, 0.1, 0.2))
    assert resolve_limits(LimitsRequest(time_budget_s=7.0), DEFAULTS).time_budget_s == 7.0
    with pytest.raises(SkillMessageError, match="does not overlap"):
        resolve_limits(LimitsRequest(workspace=Box((1, 1, 1), (2, 2, 2))), DEFAULTS)


def test_the_speed_cap_bounds_every_joint_step(tool):
    limiter = TargetLimiter(tool, SkillLimits(0.5, WIDE), rate=10.0)
    start = np.array([*tool.kinematics.arm.home, 0.5], np.float32)
    far = start + np.array([0.3, -0.2, 0.01, 0.0, 0.05, 0.4], np.float32)
    limited = limiter.limit(far, start)
    step = limited.target - start
    assert limited.speed_capped and not limited.workspace_limited
    np.testing.assert_allclose(step[:5], [0.05, -0.05, 0.01, 0.0, 0.05], atol=1e-6)
    assert limited.target[5] == pytest.approx(0.9)  # the gripper opening is not an angle
    slow = limiter.limit(far, start, speed_scale=0.5)
    assert np.abs(slow.target[:5] - start[:5]).max() == pytest.approx(0.025, abs=1e-6)
    near = start + np.float32(0.01)
    assert not limiter.limit(near, start).speed_capped


def test_a_step_out_of_the_workspace_is_scaled_back_to_its_face(tool):
    home = np.array([*tool.kinematics.arm.home, 0.5], np.float32)
    point = tool.point(home[:5])
    ceiling = point[2] + 0.005  # 5 mm above the tool
    box = Box((0.0, -0.32, 0.0), (0.42, 0.32, float(ceiling)))
    limiter = TargetLimiter(tool, SkillLimits(1.5, box), rate=10.0)
    up = home.copy()
    up[1] -= 0.15  # shoulder lift back: the tool rises by about 2 cm
    assert tool.point(up[:5])[2] > ceiling + 0.005  # the step as asked leaves the box
    limited = limiter.limit(up, home)
    assert limited.workspace_limited and not limited.speed_capped
    height = tool.point(limited.target[:5])[2]
    assert point[2] < height <= ceiling  # moved up to the face, not past it
    assert ceiling - height < 0.002  # within a bisection step (1/64) of the face
    again = limiter.limit(up, limited.target)  # at the face: what is left is held
    assert tool.point(again.target[:5])[2] <= ceiling


def test_from_outside_the_box_only_steps_toward_it_pass(tool):
    home = np.array([*tool.kinematics.arm.home, 0.5], np.float32)
    height = tool.point(home[:5])[2]
    box = Box((0.0, -0.32, 0.0), (0.42, 0.32, float(height) - 0.03))  # the tool is above it
    limiter = TargetLimiter(tool, SkillLimits(1.5, box), rate=10.0)
    up, down = home.copy(), home.copy()
    up[1] -= 0.1
    down[1] += 0.1
    held = limiter.limit(up, home)
    assert held.workspace_limited
    np.testing.assert_allclose(held.target[:5], home[:5], atol=1e-6)  # hold where it is
    toward = limiter.limit(down, home)
    assert not toward.workspace_limited
    assert tool.point(toward.target[:5])[2] < height
