"""``train rl --executor ray``: the environments as Ray actors (``RayVecEnv``) step exactly as
``DummyVecEnv`` steps them, auto-reset included, so PPO learns the same weights on a real local
Ray cluster of 2 CPUs as in one process. Each Ray test starts its own loopback-only cluster and
stops it. Ray stays optional: nothing imports it unless ``--executor ray`` is asked for."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lang2policy.cli import main
from lang2policy.rl.train import TrainConfig, make_vec_env

os.environ.setdefault("MUJOCO_GL", "egl")
REPO = Path(__file__).resolve().parents[2]


def without_clock(infos: list[dict]) -> list[dict]:
    """The step infos less Monitor's wall-clock time of a finished episode."""
    return [{**info, "episode": {**info["episode"], "t": None}} if "episode" in info else info
            for info in infos]


def assert_same_infos(ours: list[dict], theirs: list[dict]) -> None:
    assert [sorted(i) for i in ours] == [sorted(i) for i in theirs]
    for mine, other in zip(without_clock(ours), without_clock(theirs), strict=True):
        for key, value in mine.items():
            np.testing.assert_array_equal(value, other[key], err_msg=key)


@pytest.mark.slow
def test_actors_step_and_reset_as_the_dummy_vec_env_does():
    pytest.importorskip("ray")
    import ray
    from stable_baselines3.common.monitor import Monitor

    from lang2policy.parallel.executor import Executor

    config = TrainConfig("reach", envs=2, seed=3)
    dummy, actors = make_vec_env(config), make_vec_env(config, Executor("ray", 1))
    try:
        assert ray.is_initialized() and actors.num_envs == 2
        assert actors.observation_space == dummy.observation_space
        assert actors.action_space == dummy.action_space
        for venv in (dummy, actors):
            venv.seed(7)
        np.testing.assert_array_equal(actors.reset(), dummy.reset())
        assert_same_infos(actors.reset_infos, dummy.reset_infos)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(170):  # a reach episode times out after 160 steps
            actions = rng.uniform(-1, 1, (2, *dummy.action_space.shape)).astype(np.float32)
            *mine, infos = actors.step(actions)
            *theirs, their_infos = dummy.step(actions)
            for ours, other in zip(mine, theirs, strict=True):
                np.testing.assert_array_equal(ours, other)
                assert ours.dtype == other.dtype
            assert_same_infos(infos, their_infos)
            ended += sum("terminal_observation" in info for info in infos)
        assert ended >= 2  # both auto-reset, the terminal observation in the info
        assert actors.get_attr("max_steps") == dummy.get_attr("max_steps") == [160, 160]
        actors.set_attr("near_start", 0.5, indices=[1])
        assert actors.get_attr("near_start") == [0.0, 0.5]
        assert actors.env_method("get_episode_rewards", indices=0) == [
            dummy.env_method("get_episode_rewards", indices=0)[0]]
        assert actors.env_is_wrapped(Monitor) == [True, True]
        assert actors.has_attr("spec") and not actors.has_attr("no_such_thing")
    finally:
        actors.close()
        dummy.close()
    assert not ray.is_initialized()  # the cluster started for the actors is stopped


def train_cli(out: Path, *extra: str) -> None:
    code = main(["train", "rl", "--family", "reach", "--out", str(out), "--steps", "1024",
                 "--envs", "2", "--eval-episodes", "2", "--no-video", "--no-progress", *extra])
    assert code == 0


def network(out: Path) -> dict:
    """The learner's whole network (actor, critic, log std) from its checkpoint."""
    import torch

    with zipfile.ZipFile(out / "checkpoint" / "ppo.zip") as saved:
        return torch.load(io.BytesIO(saved.read("policy.pth")), weights_only=True)


@pytest.mark.slow
def test_train_rl_on_ray_learns_the_weights_of_one_process(tmp_path):
    pytest.importorskip("ray")
    import ray

    train_cli(tmp_path / "local")
    train_cli(tmp_path / "ray", "--executor", "ray")
    assert not ray.is_initialized()
    local, on_ray = (np.load(tmp_path / name / "policy.npz") for name in ("local", "ray"))
    assert sorted(on_ray.files) == sorted(local.files)
    for name in local.files:
        np.testing.assert_array_equal(on_ray[name], local[name], err_msg=name)
    theirs, ours = network(tmp_path / "local"), network(tmp_path / "ray")
    assert sorted(ours) == sorted(theirs)
    assert all(bool((ours[key] == theirs[key]).all()) for key in theirs)
    curves = [json.loads((tmp_path / name / "curve.json").read_text()) for name in ("local", "ray")]
    for curve in curves:
        for point in curve:
            point.pop("steps_per_second")
    assert curves[0] == curves[1] and curves[0]
    evaluations = [json.loads((tmp_path / name / "eval.json").read_text())
                   for name in ("local", "ray")]  # fmt: skip
    for evaluation in evaluations:
        evaluation.pop("wall_seconds")
        for run in evaluation["runs"]:
            run.pop("wall_seconds")
    assert evaluations[0] == evaluations[1]


def test_a_ray_address_without_ray_is_refused(tmp_path, capsys):
    code = main(["train", "rl", "--family", "reach", "--out", str(tmp_path / "m"),
                 "--ray-address", "127.0.0.1:6379"])
    assert code == 2
    assert "--ray-address goes with --executor ray" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_ray_is_imported_only_for_the_ray_executor():
    code = ("import sys; import lang2policy.commands.train_rl, lang2policy.rl.train, "
            "lang2policy.rl.ray_vec_env; assert 'ray' not in sys.modules, 'ray imported'")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
