"""Learning from corrections (issue 18, item 5): the scripted corrector's phrases, a corrected
episode of the shipped checkpoint written to and read from the dataset, and fine-tuning on it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.vla.coach.corrector import SIZES, CorrectorSettings, ScriptedCorrector, axis_phrase
from lang2policy.vla.skill.language_motion import parse_motion

MODEL = Path(__file__).resolve().parents[2] / "models" / "vla-so101-tiny"
BLOCK = np.array([0.2, 0.05, 0.015])


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("size", [size for size, _ in SIZES])
def test_every_phrase_is_a_language_motion_along_its_axis(axis, sign, size):
    text = axis_phrase(axis, sign * (size + 0.001))
    offset = np.asarray(parse_motion(text).offset)
    expected = np.zeros(3)
    expected[axis] = sign * size
    assert np.allclose(offset, expected), (text, offset)
    assert axis_phrase(axis, 0.005) is None


def _settled(corrector: ScriptedCorrector, tool, gripper=0.5, block=BLOCK) -> str | None:
    """What the corrector says once the tool has stood at ``tool`` long enough."""
    said = None
    for _ in range(30):
        said = corrector.observe(np.asarray(tool), gripper, block) or said
        if said:
            return said
    return said


def test_the_corrector_says_what_a_person_would():
    settings = CorrectorSettings(start_frames=1, cooldown_frames=1)
    # 3 cm right of the block (y smaller), low: "a bit to the left" (2 cm, the size below 3)
    said = _settled(ScriptedCorrector(BLOCK, 0.0, settings), BLOCK + np.array([0, -0.03, 0.02]))
    assert said == "a bit to the left"
    # aligned, settled 5 cm above the grasp point: lower by "a lot" (5 cm)
    above = BLOCK + np.array([0, 0, 0.05])
    assert _settled(ScriptedCorrector(BLOCK, 0.0, settings), above) == "a lot lower"
    # at the grasp point with the jaws open: close them
    said = _settled(ScriptedCorrector(BLOCK, 0.0, settings), BLOCK + np.array([0.005, 0, 0.005]))
    assert said == "close the gripper"
    # jaws closed 6 cm from the block: open them
    said = _settled(ScriptedCorrector(BLOCK, 0.0, settings), BLOCK + np.array([0.06, 0, 0.05]), 0.0)
    assert said == "open the gripper"
    # the block lifted 2 cm, settled: higher towards the lift point
    held = BLOCK + np.array([0, 0, 0.02])
    assert _settled(ScriptedCorrector(BLOCK, 0.0, settings), held, 0.0, held) == "a lot higher"
    # a refused direction is not said again
    corrector = ScriptedCorrector(BLOCK, 0.0, settings)
    corrector.refused("a bit to the left")
    assert _settled(corrector, BLOCK + np.array([0, -0.03, 0.02])) is None
    with pytest.raises(ConfigError, match="corrector settings"):
        CorrectorSettings(tolerance=0.0)


def test_the_push_corrector_brings_the_tool_behind_the_block_and_pushes_on():
    from lang2policy.vla.coach.push_corrector import PushCorrector

    settings = CorrectorSettings(start_frames=1, cooldown_frames=1)
    start = BLOCK + np.array([0.0, -0.03, 0.0])  # the plan's start: behind it, for a push left

    def corrector() -> PushCorrector:
        return PushCorrector(BLOCK, "left", start, settings)

    # the jaws still open, low beside the start: close them
    assert _settled(corrector(), start + np.array([0.0, 0.0, 0.01])) == "close the gripper"
    # closed, settled 3 cm in front of the start (x larger): "a bit back"
    assert _settled(corrector(), start + np.array([0.03, 0.0, 0.01]), 0.0) == "a bit back"
    # closed, over the start but 5 cm up: said once the policy has stalled there ("a lot
    # lower"), not while it has not moved yet (it may still be looking)
    up = start + np.array([0.0, 0.0, 0.05])
    assert _settled(corrector(), up, 0.0) is None
    assert _settled(_started(corrector(), up), up, 0.0) == "a lot lower"
    # the block pushed only 3 of 7 cm to the left and the tool settled: on to the left
    pushed = BLOCK + np.array([0.0, 0.03, 0.0])
    said = _settled(corrector(), pushed + np.array([0.0, -0.03, 0.0]), 0.0, pushed)
    assert said == "a bit to the left"
    # pushed far enough (6.5 cm, within the 2 cm tolerance of 7): nothing to say
    done = BLOCK + np.array([0.0, 0.065, 0.0])
    assert _settled(corrector(), done + np.array([0.0, -0.03, 0.0]), 0.0, done) is None
    top = PushCorrector(BLOCK, "top", start, settings)  # toward the far side: forward
    ahead = BLOCK + np.array([0.02, 0.0, 0.0])
    assert _settled(top, ahead - np.array([0.03, 0.0, 0.0]), 0.0, ahead) == "a lot forward"
    # the block pushed 3 cm short, but the tool has lifted off it: too late for a nudge
    lifted = pushed + np.array([0.0, -0.03, 0.05])
    assert _settled(_started(corrector(), lifted), lifted, 0.0, pushed) is None


def _started(corrector, tool, frames: int = 6):
    """``corrector`` after watching the tool come to ``tool`` from 10 cm away (the policy has
    begun to move)."""
    for fraction in np.linspace(0.0, 1.0, frames):
        corrector.observe(np.asarray(tool) + (1 - fraction) * np.array([0.0, 0.0, 0.1]), 0.0, BLOCK)
    return corrector


def test_the_push_corrector_waits_while_the_tool_moves():
    """A correction is a lasting offset: a tool still on its way down, 3 cm off the push's
    line, is left alone until it settles there."""
    from lang2policy.vla.coach.push_corrector import PushCorrector

    settings = CorrectorSettings(start_frames=1, cooldown_frames=1)
    start = BLOCK + np.array([0.0, -0.03, 0.0])
    corrector = PushCorrector(BLOCK, "left", start, settings)
    off_line = start + np.array([0.03, 0.0, 0.0])
    descent = [off_line + np.array([0.0, 0.0, z]) for z in np.linspace(0.1, 0.0, 12)]
    assert [corrector.observe(tool, 0.0, BLOCK) for tool in descent] == [None] * 12
    assert _settled(corrector, off_line, 0.0) == "a bit back"


@pytest.fixture(scope="module")
def corrected(tmp_path_factory):
    """One corrected push episode of the shipped checkpoint, written and read back."""
    pytest.importorskip("mujoco")
    from lang2policy.vla.coach.corrected import record_corrections
    from lang2policy.vla.dataset import load_dataset
    from lang2policy.vla.policy.runtime import VLAPolicy
    from lang2policy.vla.sim.demos import training_specs

    out = tmp_path_factory.mktemp("corrections") / "push"
    policy = VLAPolicy.load(MODEL, threads=1)
    rollouts = record_corrections(policy, training_specs(["push"], 1, 2), out)  # corrected: ok
    return rollouts[0], load_dataset(out), out


def test_a_corrected_episode_is_recorded_with_its_corrections(corrected):
    from lang2policy.vla.coach.corrected import CORRECTION, POLICY_ACTION, RESIDUAL, node_limits
    from lang2policy.vla.skill.limits import TargetLimiter, tool_kinematics
    from lang2policy.vla.spec.schema import FPS, JOINT_NAMES

    rollout, data, _ = corrected
    episode = data.episodes[0]
    texts = json.loads(episode["correction_texts"])
    assert episode["corrections"] == len(texts) == len(rollout.corrections) >= 1
    index = data.frame_columns[CORRECTION]
    said = np.nonzero(index >= 0)[0]
    assert [int(f) for f in said] == [frame for frame, _, _ in texts]
    assert [int(i) for i in index[said]] == list(range(len(texts)))
    for _, text, _ in texts:
        parse_motion(text)  # only phrases the language-motion module accepts
    action, policy = data.action, data.frame_columns[POLICY_ACTION]
    residual = data.frame_columns[RESIDUAL]
    first = texts[0][0]
    assert np.all(residual[:first] == 0)  # said before the policy acts: from that frame on
    assert np.abs(residual[first:]).max() > 0.005
    # executed = the node's limits on (policy + residual, the gripper as last said), every frame
    limiter = TargetLimiter(tool_kinematics("so101", JOINT_NAMES), node_limits(), float(FPS))
    gripper = np.full(len(action), np.nan)
    for frame, text, _ in texts:
        if parse_motion(text).kind == "gripper":
            gripper[frame:] = parse_motion(text).gripper
    previous = np.vstack([data.state[:1], action[:-1]])
    for t in range(len(action)):
        shaped = policy[t].copy()
        shaped[:5] = np.clip(policy[t, :5] + residual[t], limiter.tool.lower, limiter.tool.upper)
        shaped[5] = shaped[5] if np.isnan(gripper[t]) else gripper[t]
        assert np.allclose(action[t], limiter.limit(shaped, previous[t]).target, atol=1e-5), t
    changed = np.abs(action[:, :5] - policy[:, :5]).max(axis=1)
    assert changed[first:].max() > 0.005  # the corrections changed what the arm was sent
    closes = [frame for frame, text, _ in texts if text == "close the gripper"]
    if closes:  # held closed from the frame it was said
        assert np.all(action[closes[0] :, 5] == 0.0)
    assert len(data) == len(rollout.correction) == episode["length"]
    assert np.allclose(residual, np.stack(rollout.residual))


def _l1(model_dir: Path, data) -> float:
    """The model's masked action L1 (normalised) on every frame of ``data``, its action head
    reading the recorded first scene and its keyframes (what the latched policy holds)."""
    from lang2policy.vla.model.checkpoint import load_model_dir
    from lang2policy.vla.train.batches import BatchMaker
    from lang2policy.vla.train.loop import masked_l1
    from lang2policy.vla.train.prepare import prepare

    loaded = load_model_dir(model_dir)
    ready = prepare(data, loaded.config, val_episodes=0, seed=0, normalizer=loaded.normalizer)
    batch = BatchMaker(
        data, loaded.config.cameras, loaded.config.chunk, ready.frame_end, ready.task_vectors,
        ready.normalizer, torch.device("cpu"), environment=ready.environment,
        keyframes=ready.keyframes,
    )(np.arange(len(data)))  # fmt: skip
    with torch.inference_mode():
        predicted = loaded.model(
            batch.images, batch.state, batch.language, aux_input=batch.environment,
            keyframes=batch.keyframes,
        )  # fmt: skip
    return float(masked_l1(predicted, batch.actions, batch.mask))


def test_finetuning_on_corrections_keeps_the_stats_and_fits_them(corrected, tmp_path):
    from lang2policy.vla.dataset import load_dataset
    from lang2policy.vla.policy.runtime import VLAPolicy
    from lang2policy.vla.train.augment import AugmentConfig
    from lang2policy.vla.train.loop import OptimConfig
    from lang2policy.vla.train.run import TrainSettings, train_vla

    _, _, path = corrected
    data = load_dataset(path, ("front",))  # the model's one camera: its config, not a default's
    settings = TrainSettings(
        steps=15, batch_size=16, val_episodes=0, checkpoint_every=15, progress=False,
        finetune=str(MODEL), optim=OptimConfig(lr=3e-4, warmup_steps=0),
        augment=AugmentConfig(shift=0),  # the model grounds image positions
    )  # fmt: skip
    out = tmp_path / "finetuned"
    summary = train_vla(data, out, settings)
    assert summary["steps"] == 15
    original = json.loads((MODEL / "normalization.json").read_text())
    assert json.loads((out / "normalization.json").read_text()) == original
    assert _l1(out, data) < _l1(MODEL, data)
    policy = VLAPolicy.load(out)
    assert policy.config == VLAPolicy.load(MODEL).config
    with pytest.raises(ConfigError, match="exclude each other"):
        TrainSettings(finetune=str(MODEL), resume=True)


def test_corrected_episodes_are_kept_from_their_first_correction(corrected):
    """HG-DAgger's intervention data: the frames before the person first spoke (the policy's
    own mistake) are left out, every kept row stays aligned (state, action, images, scene,
    the corrections' columns), and a dataset without corrections is refused."""
    from dataclasses import replace

    from lang2policy.vla.dataset.combine import load_datasets
    from lang2policy.vla.dataset.interventions import CORRECTION, from_first_correction

    rollout, data, path = corrected
    first = rollout.corrections[0][0]
    assert first > 0  # the policy ran alone for a while: there is a lead to drop
    trimmed, dropped = from_first_correction(data)
    assert dropped == first and len(trimmed) == len(data) - first
    episode = trimmed.episodes[0]
    assert (episode["from"], episode["to"], episode["length"]) == (0, len(trimmed), len(trimmed))
    assert trimmed.frame_columns[CORRECTION][0] == 0  # it starts where the first was said
    assert np.array_equal(trimmed.action, data.action[first:])
    assert np.array_equal(trimmed.state, data.state[first:])
    assert np.array_equal(trimmed.frame_index, data.frame_index[first:])
    assert np.array_equal(trimmed.images["front"], data.images["front"][first:])
    assert np.array_equal(trimmed.environment, data.environment[first:])
    loaded = load_datasets([path], ("front",), from_first_correction=True)
    assert len(loaded) == len(trimmed)
    with pytest.raises(Lang2PolicyError, match=r"no 'correction\.index' column"):
        from_first_correction(replace(data, frame_columns={}))


def test_the_bench_reuses_a_recorded_corrected_dataset(corrected, tmp_path):
    from lang2policy.bench.vla_corrections import _check, _recorded, add_arguments

    rollout, data, path = corrected
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--family", "push", "--corrected", "1", "--corrections", str(path),
                              "--out", str(tmp_path / "new")])  # fmt: skip
    _check(args)
    dataset, recorded = _recorded(args)
    assert dataset == path
    assert recorded["episodes"] == 1 and recorded["frames"] == len(data)
    assert recorded["corrections"] == len(rollout.corrections)
    assert recorded["succeeded_with_corrections"] == int(rollout.success)
    args.corrected = 2
    with pytest.raises(ConfigError, match="holds 1 episodes, --corrected says 2"):
        _recorded(args)
    args.corrections = tmp_path
    with pytest.raises(ConfigError, match="--corrections: not a dataset directory"):
        _check(args)


@pytest.mark.slow
def test_ray_workers_correct_the_same_episodes_as_this_process(corrected, tmp_path):
    """``record corrections --executor ray --workers 2``'s path: a real local Ray cluster of 2
    workers corrects 2 push episodes; the first is the one corrected in this process (the
    fixture's), frame for frame, and the rollouts come back in order."""
    pytest.importorskip("ray")
    from lang2policy.parallel.executor import Executor
    from lang2policy.vla.coach.corrected import corrected_in_workers, write_corrections
    from lang2policy.vla.sim.demos import training_specs

    here, _, _ = corrected
    specs = training_specs(["push"], 2, 2)
    assert specs[0] == here.spec
    shown = []
    rollouts = corrected_in_workers(MODEL, specs, Executor("ray", 2))
    done = write_corrections(rollouts, tmp_path / "ray", shown.append)
    assert [r.spec for r in shown] == specs
    first = done[0]
    assert (first.success, first.detail, first.sim_seconds, first.corrections) == (
        here.success, here.detail, here.sim_seconds, here.corrections
    )  # fmt: skip
    for name in ("policy_action", "residual", "environment", "correction"):
        assert np.array_equal(np.asarray(getattr(first, name)), np.asarray(getattr(here, name)))


def test_record_corrections_takes_the_executor_flags(tmp_path, capsys):
    from lang2policy.cli import main

    out = ["record", "corrections", "--episodes", "1", "--out", str(tmp_path / "c")]
    assert main([*out, "--ray-address", "127.0.0.1:6379"]) == 2
    assert "--ray-address goes with --executor ray" in capsys.readouterr().err
    assert main([*out, "--model", str(tmp_path)]) == 2
    assert "no VLA model directory" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
