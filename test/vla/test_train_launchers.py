"""``train vla`` at scale on the CPU: real gloo processes, real launchers.

A data-parallel run (2 processes) saves at ``stop_at``; one process resumes it with the saved
global batch and ends where a single-process run of the same global batch ends. The command
line runs under ``torchrun`` (``python -m torch.distributed.run``) and ``accelerate launch``
on a dataset written to disk, rank 0 alone logging and writing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from support.ddp import free_port, launcher_environment, rank_environment, spawn_ranks, write_demos

from lang2policy.commands import train as train_command
from lang2policy.commands import train_rl
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.vla.model.checkpoint import TRAINING_STATE_FILE, load_training_state
from lang2policy.vla.train.augment import AugmentConfig
from lang2policy.vla.train.batches import batch_indices
from lang2policy.vla.train.distributed import check_launcher, per_process_batch
from lang2policy.vla.train.loop import OptimConfig
from lang2policy.vla.train.outputs import SUMMARY_FILE
from lang2policy.vla.train.plot import LOG_FILE
from lang2policy.vla.train.run import TrainSettings, train_vla
from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames, tiny_config

pytestmark = pytest.mark.slow  # processes that start torch: seconds each

STEPS, STOP = 16, 8


def settings(**overrides) -> TrainSettings:
    values = dict(
        steps=STEPS, batch_size=16, model=tiny_config(), log_every=4, val_every=STEPS,
        checkpoint_every=100, device="cpu", progress=False, augment=AugmentConfig(shift=0),
        optim=OptimConfig(lr=3e-3, warmup_steps=2),
    )  # fmt: skip
    values.update(overrides)
    return TrainSettings(**values)


def records(out, kind: str = "train") -> list[dict]:
    lines = (out / LOG_FILE).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def _stop_worker(rank: int, out: str, port: int) -> None:
    rank_environment(rank, port)
    half = settings(batch_size=8, stop_at=STOP)  # 2 x 8: the straight run's 16 a step
    train_vla(synthetic_frames(), out, half, encoder=hash_encoder(8))


def test_two_processes_save_and_one_process_resumes_with_their_global_batch(tmp_path):
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    spawn_ranks(_stop_worker, str(resumed), free_port())
    state = load_training_state(resumed / TRAINING_STATE_FILE)
    assert state["step"] == STOP and state["global_batch"] == 16 and len(state["generators"]) == 2
    assert [r["step"] for r in records(resumed)] == [4, 8]  # rank 0 alone logs: once a step
    summary = train_vla(synthetic_frames(), resumed, settings(batch_size=3, resume=True),
                        encoder=hash_encoder(8))  # fmt: skip
    assert summary["steps"] == STEPS and summary["resumed_from_step"] == STOP
    assert summary["world_size"] == 1 and summary["global_batch"] == 16  # not the 3 asked
    train_vla(synthetic_frames(), straight, settings(), encoder=hash_encoder(8))
    assert [r["step"] for r in records(resumed)] == [r["step"] for r in records(straight)]
    for ours, theirs in zip(records(resumed), records(straight), strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], abs=0.02)
    ours, theirs = (load_file(out / "model.safetensors") for out in (resumed, straight))
    gaps = [float((ours[k] - theirs[k]).abs().max()) for k in theirs]
    assert max(gaps) < 0.02, max(gaps)  # same frames a step, gradients averaged over ranks


def test_batches_follow_the_global_batch_whatever_the_processes():
    frames = np.arange(100, 200)
    one = batch_indices(frames, 20, 0, 1, seed=5, start_step=3)
    halves = [batch_indices(frames, 10, r, 2, seed=5, start_step=3) for r in (0, 1)]
    for _ in range(12):  # across epochs (5 global batches each)
        assert sorted(next(one)) == sorted(np.concatenate([next(h) for h in halves]))


def test_a_resume_refuses_processes_that_cannot_share_the_global_batch():
    assert per_process_batch(48, 3) == 16
    with pytest.raises(ConfigError, match="cannot share evenly"):
        per_process_batch(16, 3)
    with pytest.raises(ConfigError, match="stop_at"):
        settings(stop_at=STEPS + 1)


def test_accelerate_switches_this_training_would_ignore_are_refused():
    check_launcher({"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_USE_DEEPSPEED": "false"})
    with pytest.raises(ConfigError, match="--mixed_precision bf16"):
        check_launcher({"ACCELERATE_MIXED_PRECISION": "bf16"})
    with pytest.raises(ConfigError, match="--use_fsdp"):
        check_launcher({"ACCELERATE_USE_FSDP": "true"})


def test_train_rl_refuses_to_run_in_several_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(Lang2PolicyError, match="runs in one process"):
        train_rl.run(argparse.Namespace(train_kind="rl"))


# ---------------------------------------------------------------- the real launchers
@pytest.fixture(scope="module")
def disk_demos(tmp_path_factory):
    return write_demos(tmp_path_factory.mktemp("launchers") / "demos")


def train_words(dataset, out, *words: str) -> list[str]:
    return ["-m", "lang2policy.cli", "train", "vla", "--design", "plain", "--dataset",
            str(dataset), "--out", str(out), "--device", "cpu", *words]  # fmt: skip


def launch(launcher: list[str], words: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *launcher, *words], capture_output=True, text=True, timeout=120,
        env=launcher_environment(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_torchrun_trains_saves_once_and_one_process_resumes(disk_demos, tmp_path):
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = launch(torchrun, train_words(disk_demos, tmp_path, "--steps", "3", "--batch-size", "4"))
    assert done.stdout.count("trained 3 steps") == 1  # rank 0 alone reports
    assert "cpu x2, 8 frames a step (4 a process), from step 0" in done.stdout
    assert [r["step"] for r in records(tmp_path)] == [3]  # once: the plain recipe logs every 50
    saved = load_training_state(tmp_path / TRAINING_STATE_FILE)
    assert saved["step"] == 3 and saved["global_batch"] == 8  # the one save: the run's end
    parser = argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(train_words(disk_demos, tmp_path, "--resume", "--steps", "6")[2:])
    assert train_command.run(args) == 0  # in this process: a world of one
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["steps"] == 6 and summary["resumed_from_step"] == 3
    assert summary["world_size"] == 1 and summary["global_batch"] == 8
    assert [r["step"] for r in records(tmp_path)] == [3, 6]
    weights = load_file(tmp_path / "model.safetensors")
    assert not all(torch.equal(saved["model"][k], weights[k]) for k in weights)  # trained on


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="no accelerate")
def test_accelerate_launch_trains_in_two_processes(disk_demos, tmp_path):
    accelerate = ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                  "--num_machines", "1", "--mixed_precision", "no",
                  "--dynamo_backend", "no"]  # fmt: skip
    words = train_words(disk_demos, tmp_path, "--steps", "3", "--batch-size", "4")
    done = launch(accelerate, words)
    assert done.stdout.count("trained 3 steps") == 1
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["world_size"] == 2 and summary["global_batch"] == 8
    assert [r["step"] for r in records(tmp_path)] == [3]
