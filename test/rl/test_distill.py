"""Distillation (``rl.experts``, ``rl.dagger``, ``train distill``): the lift expert grasps and
lifts blocks from any start, DAgger labels the states its learner reaches, and the command
writes a policy file the controller loads like a PPO one; bad input is refused with reasons."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lang2policy.cli import main
from lang2policy.errors import Lang2PolicyError
from lang2policy.rl.actions import TOOL_STEP, tool_targets
from lang2policy.rl.dagger import Dataset, DistillConfig, Learner, distill, run_iteration
from lang2policy.rl.env import RewardEnv
from lang2policy.rl.evaluate import EVAL_SEED
from lang2policy.rl.experts import GraspLiftExpert, GraspPlaceExpert, MPCExpert, tool_change
from lang2policy.rl.families import family
from lang2policy.rl.planner import load_policies
from lang2policy.rl.policy_file import load_policy


def test_the_lift_expert_lifts_blocks_to_the_goal_height(lift_env):
    expert, data = GraspLiftExpert(lift_env), Dataset([], [])
    result = run_iteration(lift_env, expert, None, range(EVAL_SEED, EVAL_SEED + 5), data)
    assert result["success"] >= 0.8
    block = lift_env.pm.features_now().objects["red block"]
    lifted = float(block["pos"].reshape(3)[2] - block["rest_z"])
    assert lifted == pytest.approx(float(lift_env.goal[0]), abs=0.02)
    obs, actions = data.arrays()
    assert obs.shape[1] == lift_env.observation_space.shape[0]
    assert actions.shape[1] == 5 and np.abs(actions).max() <= 1.0
    assert (actions[:, 4] < 0).any() and (actions[:, 4] > -1).any()  # closes and opens


def test_dagger_labels_the_learners_own_states_with_the_expert(lift_env):
    """A learner that has seen nothing drives; every state it reaches gets the expert's label
    (the expert's action there, not the learner's)."""
    config = DistillConfig(family="lift", hidden=8)
    learner = Learner(lift_env.observation_space.shape[0], 5, config)
    data = Dataset([], [])
    result = run_iteration(lift_env, GraspLiftExpert(lift_env), learner.policy(config),
                           range(1), data)
    assert result["success"] == 0.0
    obs, labels = data.arrays()
    assert len(obs) == lift_env.max_steps
    first = lift_env.reset(seed=0)[0]
    assert np.allclose(obs[0], first)
    acted = np.array([learner.policy(config).act(o) for o in obs[:20]])
    assert not np.allclose(acted, labels[:20], atol=0.05)


def test_training_fits_the_expert_labels(lift_env):
    data = Dataset([], [])
    run_iteration(lift_env, GraspLiftExpert(lift_env), None, range(2), data)
    config = DistillConfig(family="lift", hidden=32, epochs=1)
    learner = Learner(lift_env.observation_space.shape[0], 5, config)
    rng = np.random.default_rng(0)
    first = learner.fit(data, rng)
    for _ in range(15):
        last = learner.fit(data, rng)
    assert last < 0.7 * first


def test_distill_writes_a_policy_the_controller_loads(tmp_path):
    out = tmp_path / "rl-lift-distilled-so101"
    summary = distill(DistillConfig(family="lift", iterations=2, episodes=2, epochs=2,
                                    hidden=16), out, progress=False)
    assert summary["method"] == "dagger" and summary["timesteps"] > 0
    curve = json.loads((out / "curve.json").read_text())
    assert [p["driver"] for p in curve] == ["expert", "learner"]
    policy = load_policy(out)
    assert policy.family == "lift" and policy.action_size == 5
    assert set(load_policies([out], "so101")) == {"lift"}


def test_bad_distill_input_is_refused(tmp_path, capsys):
    assert main(["train", "distill", "--family", "reach", "--out", str(tmp_path / "x")]) == 2
    assert "no scripted expert" in capsys.readouterr().err  # ... and says: --expert mpc
    with pytest.raises(SystemExit):
        main(["train", "distill", "--family", "lift", "--expert", "oracle",
              "--out", str(tmp_path / "x")])
    assert "invalid choice: 'oracle'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "distill", "--family", "lift", "--out", str(tmp_path / "x"),
              "--episodes", "0"])
    assert "must be at least 1" in capsys.readouterr().err
    with pytest.raises(Lang2PolicyError, match="evaluation goals"):
        distill(DistillConfig(family="lift", seed=500), tmp_path / "y", progress=False)


def test_cli_distils_evaluates_and_writes_the_model_card(tmp_path, capsys):
    out = tmp_path / "rl-lift-distilled"
    code = main(["train", "distill", "--family", "lift", "--out", str(out), "--iterations", "1",
                 "--episodes", "1", "--epochs", "1", "--eval-episodes", "1", "--no-progress"])
    assert code == 0
    assert "/1 succeeded" in capsys.readouterr().out
    card = (out / "README.md").read_text()
    assert f"train distill --family lift --out {out} --expert scripted --iterations 1" in card
    assert "DAgger from the scripted expert `GraspLiftExpert`" in card
    assert "red block" in card and "plus the gripper opening" in card and "Jacobian" in card
    assert card.startswith("# Distilled policy: lift (so101)")
    assert (out / "eval.mp4").stat().st_size > 1000  # the goal drawn above the block


def test_the_place_expert_puts_blocks_in_the_bowl():
    env = RewardEnv(family("place"), seed=0, near_start=0.0)
    data = Dataset([], [])
    result = run_iteration(env, GraspPlaceExpert(env), None, range(EVAL_SEED, EVAL_SEED + 4),
                           data)
    assert result["success"] >= 0.75
    features = env.pm.features_now()
    block, bowl = (features.objects[n]["pos"].reshape(3) for n in ("red block", "blue bowl"))
    assert np.linalg.norm(block[:2] - bowl[:2]) < 0.02  # the last one sits in the bowl
    released = np.array(data.actions)[:, 4]
    assert (released < -0.9).any() and released[-1] > -0.5  # closed to carry, open at the end


def test_the_place_family_serves_the_benchmarks_place_on_specs():
    from lang2policy.bench.l2r_tasks import grasp_terms
    from lang2policy.rewards.spec import validate_spec
    from lang2policy.rl.families import family_of

    spec = {"task": "place on", "duration": 15, "terms": [
        *grasp_terms("green block"),
        {"id": "on", "term": "object_on", "weight": 3.0,
         "params": {"object": "green block", "target": "yellow bowl", "offset": 0.02}}],
        "success": {"all": [{"term": "on", "below": 0.025}], "hold": 0.5}}
    served = family_of(validate_spec(spec, ("green block", "yellow bowl")).spec)
    assert served[0].name == "place" and served[1] == pytest.approx([0.02])
    spec["terms"][-1]["params"]["target"] = "red block"  # on a block: not a bowl, the MPC's
    assert family_of(validate_spec(spec, ("green block", "red block")).spec) is None


def test_episode_objects_start_apart():
    env = RewardEnv(family("place"), seed=0)
    for seed in range(20):
        env.reset(seed=seed)
        features = env.pm.features_now()
        block, bowl = (features.objects[n]["pos"].reshape(3) for n in ("red block", "blue bowl"))
        assert np.linalg.norm(block[:2] - bowl[:2]) >= 0.08


def test_the_mpc_expert_drives_a_reach_and_labels_in_the_familys_actions():
    env = RewardEnv(family("reach"), seed=0)
    data = Dataset([], [])
    result = run_iteration(env, MPCExpert(env), None, range(EVAL_SEED, EVAL_SEED + 1), data)
    assert result["success"] == 1.0
    _, actions = data.arrays()
    assert actions.shape[1] == 5 and np.abs(actions).max() <= 1.0 + 1e-9


def test_a_tool_move_read_back_from_its_targets_is_the_move_asked(lift_env):
    """``tool_change`` (how the MPC's targets become a tool action) inverts the tool mapping
    to first order: the move read back points the way the action asked."""
    lift_env.reset(seed=EVAL_SEED)
    for action in ([0.5, 0.0, 0.0, 0.0], [0.0, -0.5, 0.3, 0.0], [0.0, 0.0, 0.0, 0.5]):
        targets = tool_targets(lift_env.pm, np.array([*action, 0.0]), 0.15)
        move, turn = tool_change(lift_env, targets)
        asked = TOOL_STEP * np.array(action[:3])
        if np.linalg.norm(asked) > 0:
            assert move @ asked / (np.linalg.norm(move) * np.linalg.norm(asked)) > 0.9
        else:
            assert np.linalg.norm(move) < 0.005 and turn == pytest.approx(0.15, rel=0.3)
