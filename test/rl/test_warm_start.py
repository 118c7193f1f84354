"""RL fine-tuning of a shipped policy (``train rl --init``): PPO starts from the policy's own
weights and normaliser, so its first actions are the policy's; bad starts are refused."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lang2policy.cli import main
from lang2policy.errors import Lang2PolicyError
from lang2policy.paths import share_dir
from lang2policy.rl.policy_file import load_policy
from lang2policy.rl.train import TrainConfig, make_vec_env

os.environ.setdefault("MUJOCO_GL", "egl")

LIFT = share_dir() / "models" / "rl-lift-distilled-so101"


@pytest.fixture(scope="module")
def lift_policy():
    if not (LIFT / "policy.json").is_file():
        pytest.skip(f"no shipped policy at {LIFT} (lang2policy train distill --family lift)")
    return load_policy(LIFT)


def test_ppo_started_from_a_policy_acts_as_it_does(tmp_path, lift_policy):
    from stable_baselines3.common.vec_env import VecNormalize

    from lang2policy.rl.train import export, make_learner
    from lang2policy.rl.warm_start import FINE_TUNE_LOG_STD

    width = lift_policy.weights[0].shape[0]
    config = TrainConfig("lift", envs=2, hidden=width, init=str(LIFT))
    model, env = make_learner(config, tmp_path, resume=False)
    assert isinstance(env, VecNormalize)
    normalised = env.reset()
    env.training = False
    expected, _ = model.predict(normalised, deterministic=True)
    for row, want in zip(env.get_original_obs(), expected, strict=True):
        np.testing.assert_allclose(lift_policy.act(row), np.clip(want, -1, 1), atol=1e-5)
    assert float(model.policy.log_std.detach().mean()) == pytest.approx(FINE_TUNE_LOG_STD)
    exported = export(model, env, config)  # before any update: the same policy back
    for mine, theirs in zip(exported.weights, lift_policy.weights, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-6)


def test_a_short_fine_tune_writes_a_card_that_names_its_start(tmp_path, lift_policy, capsys):
    out = tmp_path / "rl-lift-finetuned"
    code = main(["train", "rl", "--family", "lift", "--init", str(LIFT), "--out", str(out),
                 "--steps", "1024", "--envs", "2", "--eval-episodes", "2", "--no-video",
                 "--no-progress", "--learning-rate", "1e-4"])
    assert code == 0, capsys.readouterr().err
    card = (out / "README.md").read_text()
    assert card.startswith("# Fine-tuned RL policy: lift")
    assert f"fine-tuning of `{LIFT}`" in card and "learning rate 0.0001" in card
    assert f"--init {LIFT} --learning-rate 0.0001" in card
    start = json.loads((LIFT / "eval.json").read_text())
    assert f"| {start['episodes']} (the start, `{LIFT}`) | {start['successes']}/" in card
    tuned = load_policy(out)
    assert tuned.weights[0].shape == lift_policy.weights[0].shape  # --hidden from the start
    summary = json.loads((out / "policy.json").read_text())["summary"]
    assert summary["config"]["init"] == str(LIFT) and summary["timesteps"] >= 1024


def test_a_start_of_another_family_or_shape_is_refused(tmp_path, lift_policy, capsys):
    from lang2policy.rl.warm_start import initial_policy

    with pytest.raises(Lang2PolicyError, match="a lift policy for the so101; this run trains"):
        initial_policy(LIFT, "place", "so101", lift_policy.weights[0].shape[0])
    with pytest.raises(Lang2PolicyError, match="give --hidden to match"):
        initial_policy(LIFT, "lift", "so101", 7)
    assert main(["train", "rl", "--family", "place", "--init", str(LIFT),
                 "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    assert "this run trains place" in capsys.readouterr().err
    assert main(["train", "rl", "--family", "lift", "--init", str(LIFT), "--resume",
                 "--out", str(tmp_path / "y"), "--no-progress"]) == 2
    assert "give one" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "rl", "--family", "lift", "--out", str(tmp_path),
              "--learning-rate", "-1"])
    assert "must be a finite number above 0" in capsys.readouterr().err


def test_the_vec_env_of_a_family_with_tool_actions_fits_the_start(lift_policy):
    venv = make_vec_env(TrainConfig("lift", envs=1))
    assert venv.observation_space.shape == (lift_policy.observation_size,)
    assert venv.action_space.shape == (lift_policy.action_size,)
