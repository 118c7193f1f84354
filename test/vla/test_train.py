"""Training the VLA (issue 17): episode selection, chunk batches, the schedule, a tiny model that
must learn, resuming, data-parallel training on CPU and the ``train vla`` command line."""

from __future__ import annotations

import argparse
import json
import sys
import types

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from support.ddp import free_port, rank_environment, spawn_ranks

from lang2policy.commands import train as train_command
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.vla.dataset.combine import ForeignData
from lang2policy.vla.model.checkpoint import MODEL_FILES, TRAINING_STATE_FILE
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.policy.runtime import VLAPolicy
from lang2policy.vla.spec.schema import ENV_KEY
from lang2policy.vla.train.batches import (
    BatchMaker,
    batch_indices,
    episode_ends,
    episode_frames,
    split_episodes,
)
from lang2policy.vla.train.loop import OptimConfig, lr_factor, masked_l1
from lang2policy.vla.train.outputs import SUMMARY_FILE
from lang2policy.vla.train.plot import LOG_FILE, PLOT_FILE, eval_metrics
from lang2policy.vla.train.run import TrainSettings, train_vla
from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames, tiny_config


def settings(steps: int = 50, **overrides) -> TrainSettings:
    values = dict(
        steps=steps,
        batch_size=16,
        model=tiny_config(),
        optim=OptimConfig(lr=3e-3, warmup_steps=5),
        log_every=10,
        val_every=25,
        checkpoint_every=25,
        device="cpu",
        progress=False,
    )
    values.update(overrides)
    return TrainSettings(**values)


def log_records(out) -> list[dict]:
    return [json.loads(line) for line in (out / LOG_FILE).read_text().splitlines()]


# ---------------------------------------------------------------- data
def test_only_successful_training_episodes_are_used():
    episodes = [{"success": True}] * 6 + [{"success": False}, {"success": True, "split": "test"}]
    split = split_episodes(episodes, val_episodes=2, seed=0)
    assert len(split.train) == 4 and len(split.val) == 2
    assert not set(split.train) & set(split.val) and max(split.train + split.val) < 6
    assert (split.failed, split.other_split) == (1, 1)
    marked = split_episodes([*episodes, {"split": "val"}], val_episodes=2, seed=0)
    assert len(marked.train) == 6 and marked.val == [8]
    with pytest.raises(ConfigError, match="no successful training episodes"):
        split_episodes([{"success": False}], val_episodes=0, seed=0)


def test_lerobot_episode_columns_are_read_too():
    data = synthetic_frames(episodes=2, length=5)
    data.episodes = [{"dataset_from_index": 5 * i, "dataset_to_index": 5 * i + 5} for i in (0, 1)]
    assert episode_frames(data, [1]).tolist() == [5, 6, 7, 8, 9]
    assert episode_ends(data).tolist() == [5] * 5 + [10] * 5
    data.episodes[1]["dataset_to_index"] = 99
    with pytest.raises(ConfigError, match="outside the dataset's 10 frames"):
        episode_ends(data)


def test_chunks_are_padded_and_masked_at_the_episode_end():
    data = synthetic_frames(episodes=2, length=5)
    normalizer = Normalizer.from_stats(data.stats)
    vectors = hash_encoder(8)(data.tasks)
    maker = BatchMaker(data, ("front",), 4, episode_ends(data), vectors, normalizer, "cpu")
    batch = maker(np.array([0, 3]))  # frame 3 of 5: actions 3, 4, then padding
    assert batch.images.shape == (2, 1, 3, 32, 32) and batch.actions.shape == (2, 4, 6)
    assert batch.mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    last = normalizer.normalize_action(data.action[4])
    for padded in (2, 3):
        np.testing.assert_allclose(batch.actions[1, padded].numpy(), last, rtol=1e-6)
    prediction = batch.actions.clone()
    prediction[1, 2:] += 100.0  # errors where the mask is 0 do not count
    assert masked_l1(prediction, batch.actions, batch.mask).item() == 0.0


def test_delta_chunks_are_the_motion_from_the_frame_and_come_back_absolute():
    data = synthetic_frames(episodes=2, length=5)
    ends = episode_ends(data)
    frames = np.arange(10)
    normalizer = Normalizer.from_stats(data.stats).with_delta_actions(
        data.state, data.action, frames, ends, chunk=4
    )
    assert normalizer.action_mode == "delta" and normalizer.action_mean.shape == (4, 6)
    vectors = hash_encoder(8)(data.tasks)
    maker = BatchMaker(data, ("front",), 4, ends, vectors, normalizer, "cpu")
    batch = maker(np.array([1]))
    motion = data.action[1:5] - data.state[1]
    expected = (motion - normalizer.action_mean) / normalizer.action_std
    np.testing.assert_allclose(batch.actions[0].numpy(), expected, rtol=1e-5, atol=1e-5)
    back = normalizer.denormalize_chunk(batch.actions[0].numpy(), data.state[1])
    np.testing.assert_allclose(back, data.action[1:5], atol=1e-5)
    with pytest.raises(ConfigError, match="single actions have no normalisation"):
        normalizer.normalize_action(data.action[0])


def test_batches_resume_in_place_and_ranks_share_an_epoch():
    frames = np.arange(100, 200)
    straight = batch_indices(frames, 10, 0, 1, seed=3, start_step=0)
    first = [next(straight) for _ in range(14)]
    resumed = batch_indices(frames, 10, 0, 1, seed=3, start_step=7)
    assert all(np.array_equal(first[7 + i], next(resumed)) for i in range(7))
    ranks = [batch_indices(frames, 10, r, 2, seed=3, start_step=0) for r in (0, 1)]
    seen = [np.concatenate([next(it) for _ in range(5)]) for it in ranks]
    assert not set(seen[0]) & set(seen[1]) and len(set(seen[0]) | set(seen[1])) == 100
    with pytest.raises(ConfigError, match="cannot fill one batch"):
        next(batch_indices(frames, 60, 0, 2, seed=0, start_step=0))


def test_learning_rate_warms_up_then_follows_a_cosine():
    factor = lr_factor(warmup=10, total=110, min_ratio=0.1)
    assert factor(0) == pytest.approx(0.1) and factor(9) == pytest.approx(1.0)
    assert factor(60) == pytest.approx(0.55) and factor(110) == pytest.approx(0.1)


# ---------------------------------------------------------------- training
def test_a_tiny_model_learns_loads_and_runs(tmp_path):
    data = synthetic_frames(failed=(4,))
    summary = train_vla(data, tmp_path, settings(100), encoder=hash_encoder(8))
    train = [r["loss"] for r in log_records(tmp_path) if r["kind"] == "train"]
    assert train[-1] < 0.5 * train[0], train
    assert summary["steps"] == 100 and summary["episodes"]["failed_excluded"] == 1
    assert summary["final_val_loss"] is not None and summary["samples_per_s"] > 0
    for name in (*MODEL_FILES, LOG_FILE, PLOT_FILE, SUMMARY_FILE, TRAINING_STATE_FILE):
        assert (tmp_path / name).is_file(), name
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    images = {c: data.images[c][0] for c in ("front", "wrist")}
    action = policy.act(images, data.state[0], data.tasks[0])
    assert action.shape == (6,) and np.isfinite(action).all()


def test_the_auxiliary_head_learns_the_scene_state_and_is_saved(tmp_path):
    data = synthetic_frames(environment=True)
    train_vla(data, tmp_path, settings(100), encoder=hash_encoder(8))
    aux = [r["aux_loss"] for r in log_records(tmp_path) if r["kind"] == "train"]
    assert len(aux) == 10 and aux[-1] < 0.6 * aux[0], aux
    config = json.loads((tmp_path / "config.json").read_text())
    saved = json.loads((tmp_path / "normalization.json").read_text())
    assert config["aux_dim"] == 4 and saved["action_mode"] == "delta"
    assert len(saved["observation.environment_state"]["mean"]) == 4
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    images = {c: data.images[c][0] for c in ("front", "wrist")}
    chunk = policy.act_chunk(images, data.state[0], data.tasks[0])
    assert chunk.shape == (4, 6) and np.isfinite(chunk).all()
    plain = tmp_path / "plain"
    train_vla(data, plain, settings(10, auxiliary=False, action_mode="absolute"),
              encoder=hash_encoder(8))  # fmt: skip
    assert json.loads((plain / "config.json").read_text())["aux_dim"] == 0
    assert json.loads((plain / "normalization.json").read_text())["action_mode"] == "absolute"


def test_resume_continues_the_step_count_and_the_very_same_run(tmp_path):
    data = synthetic_frames()
    ema = OptimConfig(lr=3e-3, warmup_steps=5, ema_decay=0.9)  # the EMA is resumed too
    train_vla(data, tmp_path / "straight", settings(50, optim=ema), encoder=hash_encoder(8))

    def crash(policy):
        raise KeyboardInterrupt  # after the step-25 checkpoint

    with pytest.raises(KeyboardInterrupt):
        train_vla(
            data,
            tmp_path / "cut",
            settings(50, eval_every=25, optim=ema),
            encoder=hash_encoder(8),
            evaluate=crash,
        )
    assert torch.load(tmp_path / "cut" / TRAINING_STATE_FILE)["step"] == 25
    resumed_settings = settings(50, resume=True, optim=ema)
    summary = train_vla(data, tmp_path / "cut", resumed_settings, encoder=hash_encoder(8))
    assert summary["resumed_from_step"] == 25 and summary["steps"] == 50
    steps = [r["step"] for r in log_records(tmp_path / "cut") if r["kind"] == "train"]
    assert steps == [10, 20, 30, 40, 50]
    straight = load_file(tmp_path / "straight" / "model.safetensors")
    resumed = load_file(tmp_path / "cut" / "model.safetensors")
    for name, tensor in straight.items():
        torch.testing.assert_close(resumed[name], tensor, msg=name)


def test_an_evaluator_runs_on_its_period_and_is_logged(tmp_path):
    data = synthetic_frames(episodes=6)
    calls = []

    def evaluate(policy):
        assert isinstance(policy, VLAPolicy)
        calls.append(policy)
        return {"success": 0.5, "per_family": {"push": 0.25}, "episodes": 4}

    summary = train_vla(data, tmp_path, settings(4, eval_every=2, val_episodes=1),
                        encoder=hash_encoder(8), evaluate=evaluate)  # fmt: skip
    assert len(calls) == 2
    assert summary["last_eval"]["success"] == 0.5
    assert summary["last_eval"]["per_family.push"] == 0.25
    assert eval_metrics(log_records(tmp_path)) == ["success", "per_family.push"]


def test_a_fresh_run_does_not_overwrite_another(tmp_path):
    data = synthetic_frames(episodes=4)
    train_vla(data, tmp_path, settings(2, val_episodes=0), encoder=hash_encoder(8))
    with pytest.raises(ConfigError, match="--resume"):
        train_vla(data, tmp_path, settings(2, val_episodes=0), encoder=hash_encoder(8))



def _ddp_worker(rank: int, out: str, port: int) -> None:
    rank_environment(rank, port)
    train_vla(synthetic_frames(), out, settings(10, log_every=5), encoder=hash_encoder(8))


def test_data_parallel_training_on_cpu_with_two_processes(tmp_path):
    spawn_ranks(_ddp_worker, str(tmp_path), free_port())
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["world_size"] == 2 and summary["steps"] == 10
    assert all((tmp_path / name).is_file() for name in MODEL_FILES)


# ---------------------------------------------------------------- command line
def parse(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", "vla", *words])


@pytest.fixture
def fake_modules(monkeypatch):
    """A dataset reader giving synthetic frames (no scene state) and a hash encoder."""
    combine = types.ModuleType("lang2policy.vla.dataset.combine")
    combine.ForeignData = ForeignData
    combine.load_datasets = lambda paths, cameras=None, from_first_correction=False, foreign=None: (
        synthetic_frames(episodes=6)
    )
    monkeypatch.setitem(sys.modules, "lang2policy.vla.dataset.combine", combine)
    monkeypatch.setattr("lang2policy.vla.train.prepare.encoder_for", lambda name: hash_encoder(384))


def test_the_command_trains_the_plain_design(tmp_path, fake_modules, capsys):
    args = parse("--dataset", "d", "--out", str(tmp_path), "--design", "plain", "--steps", "4",
                 "--batch-size", "8")  # fmt: skip
    assert train_command.run(args) == 0
    assert "trained 4 steps" in capsys.readouterr().out
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["dataset"] == "d" and summary["last_eval"] is None
    assert summary["config"]["image_size"] == 32 and summary["config"]["head_reads"] == "features"
    assert summary["settings"]["progress"] is False  # not a terminal


def test_the_shipped_design_refuses_data_without_the_scene_state(tmp_path, fake_modules):
    with pytest.raises(Lang2PolicyError, match="train the plain design on it"):
        train_command.run(parse("--dataset", "d", "--out", str(tmp_path)))
    assert not (tmp_path / SUMMARY_FILE).exists()


def test_the_command_refuses_bad_numbers(capsys):
    for words in (["--steps", "0"], ["--lr", "5"], ["--batch-size", "x"]):
        with pytest.raises(SystemExit):
            parse("--dataset", "d", "--out", "o", *words)
    assert "must be at least 1" in capsys.readouterr().err


def test_scene_views_train_the_scene_only_and_never_validate():
    data = synthetic_frames(episodes=6, length=5, environment=True)
    for episode in data.episodes[4:]:
        episode["view"] = True
    split = split_episodes(data.episodes, val_episodes=2, seed=0)
    assert {4, 5} <= set(split.train) and not {4, 5} & set(split.val)
    normalizer = Normalizer.from_stats(data.stats)
    vectors = hash_encoder(8)(data.tasks)
    maker = BatchMaker(data, ("front",), 3, episode_ends(data), vectors, normalizer, "cpu")
    batch = maker(np.array([0, 21, 26]))  # a demo frame, then one frame of each view
    assert batch.mask.tolist() == [[1, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert batch.environment.shape == (3, 4)


def test_a_bottleneck_learns_its_motions_from_image_free_frames_too(tmp_path):
    data = synthetic_frames(environment=True)
    scene = np.concatenate([data.environment, data.environment[:, :2]], axis=1)  # 6-d: mm
    data.environment = scene
    data.stats[ENV_KEY] = {"mean": scene.mean(0), "std": scene.std(0)}
    optim = OptimConfig(
        lr=3e-3, warmup_steps=5, scene_forcing=1.0, motor_batch=64, motor_steps=200
    )
    run = settings(100, optim=optim, model=tiny_config(head_reads="scene"))
    train_vla(data, tmp_path, run, encoder=hash_encoder(8))
    records = log_records(tmp_path)
    motor = [r for r in records if r["kind"] == "motor"]
    assert len(motor) == 1 and motor[0]["motor_steps"] == 200
    assert motor[0]["motor_loss_last"] < 0.5 * motor[0]["motor_loss_first"], motor
    train = [r["loss"] for r in records if r["kind"] == "train"]
    assert train[-1] < 0.7 * motor[0]["motor_loss_first"], train
    assert json.loads((tmp_path / "config.json").read_text())["head_reads"] == "scene"
    val = [r for r in log_records(tmp_path) if r["kind"] == "val"]
    assert len(val[-1]["val_block_mae_mm"]) == 3 and len(val[-1]["val_goal_mae_mm"]) == 3
    assert all(v >= 0 for v in val[-1]["val_block_mae_mm"])
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    images = {c: data.images[c][0] for c in ("front", "wrist")}
    assert np.isfinite(policy.act(images, data.state[0], data.tasks[0])).all()
    with pytest.raises(ConfigError, match="needs a bottleneck network"):
        train_vla(data, tmp_path / "plain", settings(5, optim=optim), encoder=hash_encoder(8))
    sizeless = OptimConfig(scene_forcing=1.0, motor_steps=10)
    bottleneck = tiny_config(head_reads="scene")
    with pytest.raises(ConfigError, match="need a motor batch size"):
        train_vla(data, tmp_path / "x", settings(5, optim=sizeless, model=bottleneck),
                  encoder=hash_encoder(8))  # fmt: skip


def test_motor_batches_hold_no_images_and_the_same_targets():
    data = synthetic_frames(environment=True)
    normalizer = Normalizer.from_stats(data.stats)
    vectors = hash_encoder(8)(data.tasks)
    make = BatchMaker(data, ("front", "wrist"), 4, episode_ends(data), vectors, normalizer, "cpu")
    frames = np.array([0, 5, 19])
    batch, motor = make(frames), make.motor(frames)
    assert not hasattr(motor, "images") and len(motor) == 3
    for name in ("state", "language", "actions", "mask", "environment"):
        assert torch.equal(getattr(batch, name), getattr(motor, name)), name
    data.environment = None
    bare = BatchMaker(data, ("front", "wrist"), 4, episode_ends(data), vectors, normalizer, "cpu")
    with pytest.raises(ConfigError, match="need the recorded scene state"):
        bare.motor(frames)
