"""Training a goal-conditioned RL policy: the return improves, runs resume, the CLI ships a model.

The improvement test is the issue's CI check: a tiny PPO run of a few thousand steps on the
reach family must raise the mean episode return (the curve's first rollouts against its last).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lang2policy.cli import main
from lang2policy.rl.policy_file import PolicyFileError, load_policy
from lang2policy.rl.train import TrainConfig, train

os.environ.setdefault("MUJOCO_GL", "egl")

TINY = {"envs": 4, "n_steps": 256, "batch_size": 256, "epochs": 10, "seed": 0}


def test_a_few_thousand_steps_improve_the_return(tmp_path):
    summary = train(TrainConfig("reach", steps=24_576, **TINY), tmp_path, progress=False)
    curve = json.loads((tmp_path / "curve.json").read_text())
    first = np.mean([p["return"] for p in curve[:3]])
    last = np.mean([p["return"] for p in curve[-3:]])
    assert summary["timesteps"] >= 24_576
    assert last > first + 3.0, f"return did not improve: {first:.1f} -> {last:.1f}"
    policy = load_policy(tmp_path)
    assert policy.family == "reach" and policy.action_size == 5
    assert (tmp_path / "learning_curve.png").stat().st_size > 1000


def test_resume_continues_the_run(tmp_path):
    train(TrainConfig("reach", steps=2048, **TINY), tmp_path, progress=False)
    summary = train(TrainConfig("reach", steps=4096, **TINY), tmp_path, resume=True,
                    progress=False)
    assert summary["resumed_from"] == 2048 and summary["timesteps"] == 4096
    curve = json.loads((tmp_path / "curve.json").read_text())
    assert [p["steps"] for p in curve] == sorted(p["steps"] for p in curve)
    assert curve[-1]["steps"] == 4096


def test_the_exported_policy_acts_like_the_learner(tmp_path):
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from lang2policy.rl.train import make_vec_env

    config = TrainConfig("reach", steps=1024, **TINY)
    train(config, tmp_path, progress=False)
    env = VecNormalize.load(str(tmp_path / "checkpoint" / "vecnormalize.pkl"),
                            make_vec_env(config))
    env.training = False
    model = PPO.load(str(tmp_path / "checkpoint" / "ppo.zip"), device="cpu")
    normalised = env.reset()  # VecNormalize hands out normalised observations
    expected, _ = model.predict(normalised, deterministic=True)
    policy = load_policy(tmp_path)
    for row, want in zip(env.get_original_obs(), expected, strict=True):
        np.testing.assert_allclose(policy.act(row), np.clip(want, -1, 1), atol=1e-4)


def test_cli_trains_evaluates_and_writes_the_model_card(tmp_path, capsys):
    out = tmp_path / "rl-reach"
    code = main(["train", "rl", "--family", "reach", "--out", str(out), "--steps", "1024",
                 "--envs", "2", "--eval-episodes", "2", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "held-out goals: " in printed and "/2 succeeded" in printed
    card = (out / "README.md").read_text()
    assert f"lang2policy train rl --family reach --out {out} --steps 1024" in card
    assert "| 2 |" in card
    assert json.loads((out / "eval.json").read_text())["episodes"] == 2
    assert (out / "eval.mp4").stat().st_size > 1000


def test_cli_refuses_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "rl", "--family", "juggle", "--out", str(tmp_path)])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "rl", "--family", "reach", "--out", str(tmp_path), "--steps", "0"])
    assert main(["train", "rl", "--family", "reach", "--out", str(tmp_path / "none"),
                 "--resume", "--no-progress"]) == 2
    assert "nothing to resume" in capsys.readouterr().err


def test_a_broken_policy_file_is_refused(tmp_path):
    (tmp_path / "policy.json").write_text("{not json")
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(tmp_path)


def test_an_empty_weights_file_is_refused(tmp_path):
    (tmp_path / "policy.json").write_text('{"format": "lang2policy-rl-mlp/1"}')
    (tmp_path / "policy.npz").write_bytes(b"")
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(tmp_path)
