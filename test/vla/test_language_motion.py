"""Language motions in the VLA node's core (issue 18, RT-H): correction text to a bounded
motion, the motions of a run added up within their bounds, the Jacobian mapping of a tool
offset to joints (checked by forward kinematics of the real robot model), and the residual on
the policy's targets through ``TargetShaper`` and ``SkillRunner``. No ROS.

A constant policy stands in for the VLA where the residual is measured: its targets do not
move, so whatever moves the sent targets' tool point is the motion.
"""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.corrections import classify
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.vla.skill.actor import EnsembledActor
from lang2policy.vla.skill.judge import ObjectsJudge
from lang2policy.vla.skill.language_motion import (
    MAX_OFFSET,
    SPEED_SCALE,
    MotionState,
    NotAMotionError,
    offset_residual,
    parse_motion,
)
from lang2policy.vla.skill.limits import SkillLimits
from lang2policy.vla.skill.message import Box
from lang2policy.vla.skill.parse import parse_skill
from lang2policy.vla.skill.runner import RUNNING, TIMEOUT, RunnerSettings, SkillRunner
from lang2policy.vla.skill.shaping import TargetShaper

WIDE = Box((0.0, -0.32, 0.0), (0.42, 0.32, 0.40))
RATE = 10.0
LEFT = np.array([0.0, 1.0, 0.0])


def posture(tool, *changes: float) -> np.ndarray:
    """The home posture plus ``changes`` (rad per joint) and a half-open gripper."""
    q = tool.kinematics.arm.home.astype(np.float32).copy()
    q[: len(changes)] += np.asarray(changes, np.float32)
    return np.array([*q, 0.5], np.float32)


@pytest.mark.parametrize(
    "text", ["a bit to the left", "left", "slightly lower", "a lot further forward", "3 cm higher"]
)
def test_offsets_are_the_corrections_offsets(text):
    motion = parse_motion(text)
    assert motion.kind == "offset"
    assert motion.offset == classify(text, []).offset  # the same words and sizes everywhere


def test_directions_and_sizes():
    assert parse_motion("a bit to the left").offset == (0.0, 0.02, 0.0)  # left is +y
    assert parse_motion("slightly to the right").offset == (0.0, -0.01, 0.0)
    assert parse_motion("a lot to the left").offset == (0.0, 0.05, 0.0)
    assert parse_motion("lower").offset == (0.0, 0.0, -0.02)
    assert parse_motion("move arm forward").offset == (0.02, 0.0, 0.0)


def test_speed_and_gripper_motions():
    assert parse_motion("slower").factor == 0.5 and parse_motion("much slower").factor == 0.3
    assert parse_motion("faster").kind == "speed"
    assert parse_motion("open the gripper").gripper == 1.0
    assert parse_motion("close the gripper").gripper == 0.0
    assert parse_motion("please close your hand").gripper == 0.0
    assert parse_motion("let go of the gripper").gripper == 1.0


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("stop", "is a stop"),
        ("no, the blue one", "names an object"),
        ("put it in the bowl instead of the plate", "not a motion"),
        ("at 3 cm/s", "speed in m/s"),
        ("50 cm to the left", "more than 15 cm"),
        ("open the gripper and go left", "not a motion"),
    ],
)
def test_what_is_no_language_motion_is_refused_with_why(text, why):
    with pytest.raises(NotAMotionError, match=why) as caught:
        parse_motion(text)
    assert "language motions are" in str(caught.value) or why in ("is a stop", "speed in m/s")


def test_motions_add_up_within_their_bounds():
    state = MotionState()
    first = state.apply(parse_motion("a bit to the left"))
    assert first.applied and first.offset == (0.0, 0.02, 0.0)
    second = state.apply(parse_motion("a bit to the left"))  # adds: 4 cm
    assert second.applied and second.offset == (0.0, 0.04, 0.0)
    third = state.apply(parse_motion("a bit to the left"))  # 6 cm asked, 5 cm allowed
    assert third.applied and third.offset == (0.0, MAX_OFFSET, 0.0) and "bounded" in third.reason
    fourth = state.apply(parse_motion("a bit to the left"))
    assert not fourth.applied and fourth.reason.startswith("at its bound")
    assert fourth.detail()["action"] == "refused" and fourth.offset == (0.0, MAX_OFFSET, 0.0)
    back = state.apply(parse_motion("a bit to the right"))  # the other way is free
    assert back.applied and back.offset == (0.0, 0.03, 0.0)
    assert state.apply(parse_motion("lower")).offset == (0.0, 0.03, -0.02)


def test_speed_scale_is_bounded_to_the_plans_cap():
    state = MotionState()
    refused = state.apply(parse_motion("faster"))
    assert not refused.applied and "at its bound" in refused.reason  # never above the cap
    assert state.apply(parse_motion("slower")).speed_scale == 0.5
    assert state.apply(parse_motion("much slower")).speed_scale == SPEED_SCALE[0]  # 0.15 asked
    assert not state.apply(parse_motion("slower")).applied
    assert state.apply(parse_motion("faster")).speed_scale == pytest.approx(0.45)


@pytest.mark.parametrize(
    "changes", [(), (0.4, 0.2), (-0.5, 0.3, -0.2, -0.1), (0.0, -0.3, 0.5, -0.4, 1.0)]
)
@pytest.mark.parametrize(
    "offset", [(0.0, 0.02, 0.0), (0.0, -0.05, 0.0), (0.02, 0.0, 0.0), (0.0, 0.0, -0.03)]
)
def test_the_jacobian_mapping_moves_the_tool_point_as_asked(tool, changes, offset):
    q = posture(tool, *changes)[:5].astype(float)
    residual = offset_residual(tool, q, np.array(offset))
    moved = tool.point(q + residual) - tool.point(q)
    np.testing.assert_allclose(moved, offset, atol=0.002)  # within 2 mm of the offset
    assert np.all(q + residual >= tool.lower) and np.all(q + residual <= tool.upper)
    assert not np.any(offset_residual(tool, q, np.zeros(3)))


def test_the_residual_ramps_in_under_the_speed_cap_and_stays(tool):
    limits = SkillLimits(0.5, WIDE)
    shaper = TargetShaper(tool, limits, RATE)
    policy = posture(tool, 0.2, 0.1)
    base = tool.point(policy[:5])
    sent = [shaper.shape(policy, policy), shaper.shape(policy, policy)]
    assert shaper.motion("a bit to the left").applied
    for _ in range(15):
        sent.append(shaper.shape(policy, sent[-1]))
    steps = np.abs(np.diff(np.array(sent)[:, :5], axis=0)).max(axis=1)
    assert steps.max() <= 0.5 / RATE + 1e-6  # the cap holds while the residual blends in
    assert steps[0] == 0.0 and steps[1] > 0.0  # nothing before the motion, then it acts
    shift = tool.point(sent[-1][:5]) - base
    np.testing.assert_allclose(shift, 0.02 * LEFT, atol=0.002)
    assert shaper.stats()["tool_shift_m"][1] == pytest.approx(0.02, abs=0.002)
    assert shaper.motion("open the gripper").applied
    assert shaper.shape(policy, sent[-1])[5] == 1.0  # the gripper override, next cycle


def test_slower_scales_the_cap(tool):
    shaper = TargetShaper(tool, SkillLimits(1.0, WIDE), RATE)
    start = posture(tool)
    far = posture(tool, 0.5)
    first = shaper.shape(far, start)
    assert first[0] - start[0] == pytest.approx(0.1, abs=1e-6)
    shaper.motion("slower")
    second = shaper.shape(far, first)
    assert second[0] - first[0] == pytest.approx(0.05, abs=1e-6)
    assert shaper.stats()["speed_capped_steps"] == 2


class ConstantBackend:
    """A policy whose every chunk is one fixed target (the VLA's action layout)."""

    name, cameras, image_size = "constant", ("front",), 96

    def __init__(self, target: np.ndarray) -> None:
        self.target = target
        self.states: list[np.ndarray] = []  # the joint states the policy was shown

    def reset(self) -> None:
        """Nothing to forget."""

    def close(self) -> None:
        """Nothing to release."""

    def act_chunk(self, images, state, instruction) -> np.ndarray:
        self.states.append(np.array(state))
        return np.tile(self.target, (10, 1))


def test_the_runner_applies_motions_and_the_plans_time_budget(tool):
    world = MirrorWorld("so101")
    skill = parse_skill("lift the red block")
    objects = {"red block": ((0.25, 0.0, 0.0125), (1.0, 0.0, 0.0, 0.0))}
    target = posture(tool, 0.1)
    limits = SkillLimits(1.5, WIDE, time_budget_s=2.0)
    settings = RunnerSettings(startup_grace=1.0)
    backend = ConstantBackend(target)
    runner = SkillRunner(
        skill,
        EnsembledActor(backend),
        ObjectsJudge(skill.task, world, objects),
        ("front",),
        settings,
        0.0,
        TargetShaper(tool, limits, RATE),
    )
    assert runner.budget == 2.0  # the plan's, below the family's
    image = np.zeros((96, 96, 3), np.uint8)
    runner.image("front", image, 0.0)
    runner.joint_state(target, 0.0)
    first = runner.step(0.1)
    assert first.state == RUNNING
    np.testing.assert_allclose(first.target, target, atol=1e-6)
    outcome = runner.motion("a bit to the left")
    assert outcome.applied and outcome.offset == (0.0, 0.02, 0.0)
    now = 0.1
    for _ in range(10):
        now += 0.1
        runner.image("front", image, now)
        runner.joint_state(target, now)
        step = runner.step(now)
    shift = tool.point(step.target[:5]) - tool.point(target[:5])
    assert shift[1] == pytest.approx(0.02, abs=0.002)
    residual = step.target[:5] - target[:5]
    # the policy is shown the joints less the residual sent with the last target
    np.testing.assert_allclose(backend.states[-1][:5], target[:5] - residual, atol=1e-5)
    np.testing.assert_allclose(backend.states[0], target, atol=1e-6)  # none before the motion
    assert runner.step(2.0).state == TIMEOUT
    assert runner.stats(2.0)["tool_shift_m"][1] == pytest.approx(0.02, abs=0.002)
