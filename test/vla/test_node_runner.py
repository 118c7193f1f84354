"""The VLA node's core without ROS (issue 18): skill parsing, the runner's decisions (stale
inputs, backend errors, time budget, success, stop) and the ensembled actor.

A fake backend stands in for the policy where the decisions are tested; the actor's
ensembling is checked against ``VLAPolicy.act`` on the shipped checkpoint (with a cheap
instruction encoder, so MiniLM is not loaded). The success check runs the real ``judge`` on a
``MirrorWorld``.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.vla_node import FakeBackend

from lang2policy.errors import ConfigError, UnknownObjectError
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.vla.skill.actor import EnsembledActor, fit_image
from lang2policy.vla.skill.judge import ObjectsJudge
from lang2policy.vla.skill.look import LOOK_S
from lang2policy.vla.skill.parse import UnknownSkillError, parse_skill
from lang2policy.vla.skill.runner import (
    FAILED,
    HOLDING,
    RUNNING,
    STOPPED,
    SUCCESS,
    TIMEOUT,
    RunnerSettings,
    SkillRunner,
    state_vector,
)
from lang2policy.vla.spec.tasks import FAMILIES, PHRASINGS, SIDE_PHRASES, Task

HALF = 0.0125  # the SO-101 scene's block half size
REST = {"red block": ((0.25, 0.0, HALF), (1.0, 0.0, 0.0, 0.0))}
SETTINGS = RunnerSettings(startup_grace=1.0, success_hold=0.5, max_seconds=0.0)
IMAGE = np.zeros((224, 224, 3), np.uint8)
STATE = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 1.0], np.float32)


@pytest.fixture(scope="module")
def mirror_world() -> MirrorWorld:
    return MirrorWorld("so101")


@pytest.fixture
def fake_backend() -> FakeBackend:
    return FakeBackend()


def make_runner(mirror_world, fake_backend, text="lift the red block", settings=SETTINGS, now=0.0):
    skill = parse_skill(text)
    judge = ObjectsJudge(skill.task, mirror_world, REST)
    actor = EnsembledActor(fake_backend)
    return SkillRunner(skill, actor, judge, fake_backend.cameras, settings, now)


def feed(runner, now, cameras=("front", "wrist"), state=True) -> None:
    for camera in cameras:
        runner.image(camera, IMAGE, now)
    if state:
        runner.joint_state(STATE, now)


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize("family", FAMILIES)
def test_every_trained_phrasing_parses_back_to_its_task(family):
    task = {
        "pick_place": Task("pick_place", "orange block", "cyan bowl"),
        "push": Task("push", "gray block", side="bottom"),
        "lift": Task("lift", "purple block"),
    }[family]
    for number in range(len(PHRASINGS[family])):
        text = task.instruction(number)
        skill = parse_skill(f"  {text.capitalize()}. ")
        assert skill.task == task, text
        assert skill.instruction == text
        assert skill.budget > 0


def test_push_sides_in_both_wordings():
    for side, phrase in SIDE_PHRASES.items():
        assert parse_skill(f"push the red block {phrase}").task.side == side
        assert parse_skill(f"nudge the red block toward the {side}").task.side == side


@pytest.mark.parametrize(
    "text",
    ["dance", "", "put the red block in the blue box", "lift the black block", "x" * 400],
)
def test_unknown_skills_are_refused_with_what_the_vla_can_do(text):
    with pytest.raises(UnknownSkillError) as error:
        parse_skill(text)
    message = str(error.value)
    assert all(family in message for family in FAMILIES)
    assert "put the red block in the blue bowl" in message and "left" in message


# ------------------------------------------------------------------ inputs and holds
def test_waits_quietly_for_first_inputs_then_holds_naming_them(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend)
    runner.joint_state(STATE, 0.0)
    runner.image("front", IMAGE, 0.0)
    step = runner.step(0.5)
    assert (step.state, step.target) == (RUNNING, None)
    assert "camera wrist" in step.reason
    step = runner.step(1.5)  # past the start-up grace
    assert (step.state, step.target) == (HOLDING, None)
    assert "no camera wrist yet" in step.reason
    assert fake_backend.calls == []


def test_fresh_inputs_act_on_images_resized_to_the_model(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend)
    feed(runner, 0.0)
    step = runner.step(0.05)
    assert step.state == RUNNING and step.target is not None
    assert step.target.dtype == np.float32 and step.target.shape == (6,)
    np.testing.assert_allclose(step.target, STATE, atol=1e-6)  # row 0 of the first chunk
    assert fake_backend.calls == [{"front": (96, 96, 3), "wrist": (96, 96, 3)}]


def test_stale_state_holds_then_resumes_with_a_fresh_ensemble(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend)
    feed(runner, 0.0)
    assert runner.step(0.1).target is not None
    assert runner.step(0.2).target is not None
    feed(runner, 0.5, state=False)  # images fresh, the last state 0.6 s old
    step = runner.step(0.6)
    assert (step.state, step.target) == (HOLDING, None)
    assert "stale joint states" in step.reason and "camera" not in step.reason
    feed(runner, 0.7)
    step = runner.step(0.7)
    assert step.state == RUNNING
    np.testing.assert_allclose(step.target, STATE, atol=1e-6)  # step 0 of a new ensemble


def test_a_stale_camera_holds(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend)
    feed(runner, 0.0)
    feed(runner, 0.6, cameras=("front",))
    step = runner.step(0.7)
    assert step.state == HOLDING and "stale camera wrist" in step.reason
    assert "front" not in step.reason


def test_an_old_frame_does_not_hold_a_latched_policy_that_has_looked(mirror_world):
    from lang2policy.vla.backends.local import LocalBackend

    policy = LocalBackend.load()  # the shipped network, which looks once
    assert policy.policy.holds_scene and not policy.has_looked
    runner = SkillRunner(parse_skill("lift the red block"), EnsembledActor(policy),
                         ObjectsJudge(parse_skill("lift the red block").task, mirror_world, REST),
                         policy.cameras, SETTINGS, 0.0)  # fmt: skip
    for camera in policy.cameras:  # the look needs fresh images
        runner.image(camera, IMAGE, 0.0)
    runner.joint_state(STATE, 0.0)
    assert runner.step(0.05).target is not None and policy.has_looked
    for now in (0.7, 1.4, 2.1):  # the camera fell behind on a busy machine; the joints did not
        runner.joint_state(STATE, now)
        step = runner.step(now)
        assert step.state == RUNNING and step.target is not None, step.reason
    runner.joint_state(STATE, 3.0)  # a hold for stale joints restarts the ensemble only:
    policy.reset()  # a new episode forgets the look, and an old frame holds again
    step = runner.step(3.0)
    assert step.state == HOLDING and "stale camera" in step.reason


# ------------------------------------------------------------------ endings
def test_a_backend_error_ends_the_skill_failed_and_nothing_is_sent(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend)
    feed(runner, 0.0)
    fake_backend.fail = True
    step = runner.step(0.1)
    assert (step.state, step.target) == (FAILED, None)
    assert "policy backend error" in step.reason and "went away" in step.reason
    fake_backend.fail = False
    assert runner.step(0.2) is step and runner.final is step


def test_the_time_budget_ends_the_skill(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend, "lift the red block")
    assert runner.budget == 20.0  # rollout.MAX_SECONDS["lift"]
    feed(runner, 19.9)
    assert runner.step(19.95).state == RUNNING
    step = runner.step(20.0)
    assert step.state == TIMEOUT and "20 s" in step.reason
    short = make_runner(mirror_world, fake_backend, settings=RunnerSettings(max_seconds=2.0))
    assert short.budget == 2.0 and short.step(2.5).state == TIMEOUT


def test_success_once_the_check_holds_on_fresh_poses(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend, "lift the red block")
    lifted = {"red block": ((0.25, 0.0, HALF + 0.06), (1.0, 0.0, 0.0, 0.0))}
    feed(runner, 0.0)
    runner.objects(lifted, 0.1)
    runner.objects(REST, 0.2)  # dropped again: the hold time starts over
    runner.objects(lifted, 0.3)
    feed(runner, 0.6)
    assert runner.step(0.6).state == RUNNING  # done for 0.3 s of the 0.5 s needed
    feed(runner, 0.9)
    step = runner.step(0.9)
    assert step.state == SUCCESS and "goal reached" in step.reason and "cm above" in step.reason


def test_stale_poses_confirm_no_success(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend, "push the red block to the left")
    runner.objects({"red block": ((0.25, 0.06, HALF), (1.0, 0.0, 0.0, 0.0))}, 0.0)
    feed(runner, 2.5)
    assert runner.step(2.5).state == RUNNING  # poses 2.5 s old: no verdict
    runner.objects({"red block": ((0.25, 0.06, HALF), (1.0, 0.0, 0.0, 0.0))}, 2.6)
    assert runner.step(3.2).state == SUCCESS


def test_a_stop_ends_the_skill_and_nothing_more_is_asked_of_the_policy(mirror_world, fake_backend):
    runner = make_runner(mirror_world, fake_backend)
    feed(runner, 0.0)
    runner.step(0.1)
    calls = len(fake_backend.calls)
    stopped = runner.end(STOPPED, "stopped by the safety node")
    feed(runner, 0.2)
    assert runner.step(0.2) is stopped and stopped.final and stopped.target is None
    assert runner.end("cancelled", "later") is stopped  # the first end stays
    assert len(fake_backend.calls) == calls
    stats = runner.stats(0.3)
    assert stats["steps"] == 1 and stats["budget_s"] == 20.0


def test_a_skill_needs_its_objects_on_the_table(mirror_world):
    skill = parse_skill("put the red block in the blue bowl")
    with pytest.raises(UnknownObjectError, match=r"blue bowl not on the table.*red block"):
        ObjectsJudge(skill.task, mirror_world, REST)


# ------------------------------------------------------------------ pieces
def test_fit_image_crops_the_centre_square_and_resizes():
    image = np.zeros((120, 160, 3), np.uint8)
    image[:, 20:140] = 200  # the centre square, bright
    fitted = fit_image(image, 96)
    assert fitted.shape == (96, 96, 3) and fitted.min() == 200
    assert fit_image(image, None) is image


def test_settings_and_states_are_checked():
    with pytest.raises(ConfigError, match="rate"):
        RunnerSettings(rate=0.0)
    with pytest.raises(ConfigError, match="query_every"):
        EnsembledActor(FakeBackend(), query_every=0)
    names = ["gripper", "wrist_roll", "wrist_flex", "elbow_flex", "shoulder_lift", "shoulder_pan"]
    order = tuple(reversed(names))
    np.testing.assert_array_equal(state_vector(names, list(range(6)), order), [5, 4, 3, 2, 1, 0])
    with pytest.raises(ValueError, match="lacks"):
        state_vector(names[:5], list(range(5)), order)


def test_the_actor_ensembles_like_the_policy_it_wraps():
    """``EnsembledActor`` over ``LocalBackend.act_chunk`` == ``VLAPolicy.act`` (rollouts)."""
    from lang2policy.vla.backends.local import LocalBackend, default_model_dir
    from lang2policy.vla.model.checkpoint import load_model_dir
    from lang2policy.vla.policy.runtime import VLAPolicy

    dim = load_model_dir(default_model_dir()).config.language_dim

    def encode(texts):
        return np.stack([np.random.default_rng(len(t)).normal(size=dim) for t in texts])

    reference = VLAPolicy.load(default_model_dir(), encoder=encode)
    actor = EnsembledActor(LocalBackend(VLAPolicy.load(default_model_dir(), encoder=encode)))
    actor.reset()
    reference.reset()
    rng = np.random.default_rng(0)
    for _ in range(12):
        images = {c: rng.integers(0, 255, (96, 96, 3), np.uint8) for c in reference.config.cameras}
        state = rng.normal(scale=0.3, size=6).astype(np.float32)
        expected = reference.act(images, state, "lift the red block")
        np.testing.assert_allclose(
            actor.act(images, state, "lift the red block"), expected, atol=1e-5
        )


# ------------------------------------------------------------------ looking before judging
LOOK_POSE = (0.0, -1.7, 1.2, -0.6, 0.0)
BOWL = {"blue bowl": ((0.2, 0.1, 0.0), (1.0, 0.0, 0.0, 0.0))}
IN_BOWL = {"red block": ((0.2, 0.1, HALF + 0.0065), (1.0, 0.0, 0.0, 0.0))}


def run_looking(world, backend, text, seen_after_look=None, limit=40.0):
    """Steps of ``text`` at 10 Hz with a still policy (the fake backend on a constant state),
    the objects as at the start; ``seen_after_look``: what perception reports once it looks."""
    settings = RunnerSettings(startup_grace=1.0, success_hold=0.5, look_pose=LOOK_POSE)
    skill = parse_skill(text)
    objects = {**REST, **BOWL}
    judge = ObjectsJudge(skill.task, world, objects)
    runner = SkillRunner(skill, EnsembledActor(backend), judge, backend.cameras, settings, 0.0)
    steps, now = [], 0.0
    while now < limit:
        feed(runner, now)
        looked = any(s.reason.startswith("looking") for s in steps)
        runner.objects({**objects, **(seen_after_look or {})} if looked else objects, now)
        steps.append(runner.step(now))
        if steps[-1].final:
            break
        now = round(now + 0.1, 3)
    return steps, runner


def test_a_finished_placement_not_seen_done_is_checked_from_the_look_pose(
    mirror_world, fake_backend
):
    steps, runner = run_looking(mirror_world, fake_backend, "put the red block in the blue bowl")
    looking = [i for i, s in enumerate(steps) if s.reason.startswith("looking")]
    assert looking, "the arm went to look"
    first, last = steps[looking[0]], steps[looking[-1]]
    # still from the start, but that early in the budget a still policy only pauses
    assert 0.4 * runner.budget <= looking[0] * 0.1 <= 0.4 * runner.budget + 0.2
    assert np.abs(first.target[:5] - STATE[:5]).max() < 0.05  # from where the arm was ...
    assert last.target[:5] == pytest.approx(LOOK_POSE, abs=1e-4)  # ... folded up to look
    assert last.target[5] == pytest.approx(STATE[5])  # the jaws as they were
    end = steps[-1]
    assert end.state == FAILED and "as seen from the look pose" in end.reason
    assert "red block not in the blue bowl" in end.reason


def test_a_placement_seen_done_from_the_look_pose_succeeds(mirror_world, fake_backend):
    text = "put the red block in the blue bowl"
    steps, _ = run_looking(mirror_world, fake_backend, text, IN_BOWL)
    assert any(s.reason.startswith("looking") for s in steps)
    assert steps[-1].state == SUCCESS and "red block in the blue bowl" in steps[-1].reason


def test_a_lift_never_looks(mirror_world, fake_backend):
    settings = RunnerSettings(startup_grace=1.0, success_hold=0.5, look_pose=LOOK_POSE)
    runner = make_runner(mirror_world, fake_backend, settings=settings)
    for tick in range(60):
        feed(runner, tick * 0.1)
        runner.objects(REST, tick * 0.1)
        assert not runner.step(tick * 0.1).reason.startswith("looking")


def test_a_look_pose_must_be_finite():
    with pytest.raises(ConfigError, match="look_pose"):
        RunnerSettings(look_pose=(0.0, float("nan")))


def test_a_policy_still_moving_near_the_end_of_its_budget_looks_before_it(
    mirror_world, fake_backend
):
    world, backend = mirror_world, fake_backend
    settings = RunnerSettings(startup_grace=1.0, success_hold=0.5, look_pose=LOOK_POSE)
    skill = parse_skill("put the red block in the blue bowl")
    objects = {**REST, **BOWL}
    judge = ObjectsJudge(skill.task, world, objects)
    runner = SkillRunner(skill, EnsembledActor(backend), judge, backend.cameras, settings, 0.0)
    steps = []
    for tick in range(400):
        now = tick * 0.1
        moving = STATE + np.float32(0.02 * (tick % 50))  # the policy never stands still
        for camera in backend.cameras:
            runner.image(camera, IMAGE, now)
        runner.joint_state(moving, now)
        runner.objects(objects, now)
        steps.append(runner.step(now))
        if steps[-1].final:
            break
    first = next(i for i, s in enumerate(steps) if s.reason.startswith("looking"))
    assert runner.budget - first * 0.1 == pytest.approx(LOOK_S, abs=0.15)
    assert steps[-1].state == FAILED and "look pose" in steps[-1].reason  # not a timeout


def test_the_way_to_the_look_pose_obeys_the_plans_speed_cap(mirror_world, fake_backend, tool):
    from lang2policy.vla.skill.limits import SkillLimits
    from lang2policy.vla.skill.message import Box
    from lang2policy.vla.skill.shaping import TargetShaper

    cap, rate = 0.4, 10.0
    shaper = TargetShaper(tool, SkillLimits(cap, Box((-0.5, -0.5, -0.1), (0.6, 0.5, 0.6))), rate)
    settings = RunnerSettings(startup_grace=1.0, success_hold=0.5, look_pose=LOOK_POSE)
    skill = parse_skill("put the red block in the blue bowl")
    objects = {**REST, **BOWL}
    judge = ObjectsJudge(skill.task, mirror_world, objects)
    actor = EnsembledActor(fake_backend)
    runner = SkillRunner(skill, actor, judge, fake_backend.cameras, settings, 0.0, shaper)
    looks = []
    for tick in range(400):
        now = tick * 0.1
        feed(runner, now)
        runner.objects(objects, now)
        step = runner.step(now)
        if step.reason.startswith("looking"):
            looks.append((now, step.target))
        if step.final:
            break
    steps = np.abs(np.diff([target[:5] for _, target in looks], axis=0)).max()
    assert steps <= cap / rate + 1e-4  # 0.04 rad per step, not the unlimited way's 0.13
    assert looks[-1][1][:5] == pytest.approx(LOOK_POSE, abs=1e-3)  # it got there, slowly
    span = looks[-1][0] - looks[0][0]
    assert span > 4.0 and step.state == FAILED  # 1.9 rad at 0.4 rad/s, then the 1 s watch
