"""``lang2policy bench rl``: RL, MPC and distilled policies on the same seeded goals, training
time, inference speed. The policies are small random MLPs saved here (no shipped model needed);
the MPC is small (16 samples) so a run takes seconds. The episodes give the same report in
this process, in a local pool and on a local Ray cluster of 2 workers."""

from __future__ import annotations

import argparse
import copy
import itertools
import math

import numpy as np
import pytest

from lang2policy.bench import rl
from lang2policy.bench.registry import BENCHES
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.parallel.executor import Executor
from lang2policy.rl.controllers import PolicyController, run_episode
from lang2policy.rl.env import CONTROL_PERIOD, RewardEnv
from lang2policy.rl.families import FAMILIES
from lang2policy.rl.observation import observation_size
from lang2policy.rl.policy_file import MLPPolicy

SMALL_MPC = MPCConfig(samples=16)
TRAINING = {"train_seconds": 12.5, "timesteps": 2048, "steps_per_second": 164}


def random_policy(family: str, seed: int = 0) -> MLPPolicy:
    rng = np.random.default_rng(seed)
    size = observation_size(5, FAMILIES[family].goal_size)
    sizes = [size, 16, 16, 5]
    weights = [rng.normal(0.0, 0.3, (b, a)) for a, b in itertools.pairwise(sizes)]
    return MLPPolicy(family, "so101", weights, [np.zeros(s) for s in sizes[1:]], np.zeros(size),
                     np.ones(size), FAMILIES["reach"].action_scale, CONTROL_PERIOD, dict(TRAINING))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    random_policy("reach").save(rl.policy_dir(root, "reach", "so101"))
    return root


@pytest.fixture(scope="module")
def report(models):
    return rl.run(None, episodes=2, models=models, config=SMALL_MPC, progress=False)


def test_every_backend_runs_the_same_seeded_goals(report):
    assert list(report["families"]) == ["reach"]  # found from the models directory
    backends = report["families"]["reach"]["backends"]
    assert set(backends) == set(rl.BACKENDS)
    runs = {name: backends[name]["runs"] for name in ("rl", "mpc")}
    assert [r["seed"] for r in runs["rl"]] == [rl.EVAL_SEED, rl.EVAL_SEED + 1]
    assert [r["seed"] for r in runs["mpc"]] == [r["seed"] for r in runs["rl"]]
    assert [r["goal"] for r in runs["mpc"]] == [r["goal"] for r in runs["rl"]]
    assert runs["rl"][0]["goal"] != runs["rl"][1]["goal"]
    assert all(len(r["goal"]) == 3 for r in runs["rl"])


def test_figures_are_finite_and_in_range(report):
    for name in ("rl", "mpc"):
        figures = report["families"]["reach"]["backends"][name]
        assert figures["episodes"] == 2 and 0 <= figures["successes"] <= 2
        assert figures["success_rate"] == figures["successes"] / 2
        for key in ("smoothness", "control_cost", "wall_seconds"):
            assert math.isfinite(figures[key]) and figures[key] >= 0, (name, key)
        assert figures["wall_seconds"] > 0
        for run in figures["runs"]:
            assert run["status"] in ("success", "failed", "timeout")
            assert 0 < run["seconds"] <= FAMILIES["reach"].episode_seconds + 1e-9
    # the MPC drives the env: it reaches, moves and its targets stay near the measured joints
    mpc = report["families"]["reach"]["backends"]["mpc"]
    assert mpc["successes"] >= 1 and 0 < mpc["seconds_to_success"] < 8
    assert mpc["smoothness"] > 0 and mpc["control_cost"] > 0


def test_a_missing_distilled_policy_is_na_and_training_time_is_read(report):
    family = report["families"]["reach"]
    assert family["backends"]["distilled"] is None
    assert family["training"]["distilled"] is None
    assert family["training"]["rl"]["train_seconds"] == 12.5
    assert family["training"]["rl"]["timesteps"] == 2048
    text = rl.format_text(report)
    assert "distilled  n/a" in text and "12 s for 2,048 steps" in text


def test_inference_is_timed_beside_an_mpc_iteration(report):
    speed = report["families"]["reach"]["inference"]
    assert speed["calls"] >= 2000 and speed["mpc_iterations"] >= 20
    assert speed["actions_per_s"] > 0 and speed["mpc_iteration_ms"] > 0
    assert speed["actions_per_mpc_iteration"] == pytest.approx(
        speed["mpc_iteration_ms"] * 1e-3 * speed["actions_per_s"], rel=0.05)
    assert speed["ok"] == (speed["actions_per_s"] >= rl.INFERENCE_BAR)
    assert report["inference_ok"] == speed["ok"]
    assert "actions/s on one thread" in rl.format_text(report)


def test_the_rl_backend_is_the_policy_as_the_env_steps_it():
    """The runner's episode is the one ``RewardEnv.step`` gives the policy's actions, and its
    control cost is the squared offset of the targets from the joints over the action scale."""
    policy = random_policy("reach", seed=1)
    env = RewardEnv(FAMILIES["reach"])
    ours = run_episode(env, PolicyController(policy), rl.EVAL_SEED + 3)
    obs, _ = env.reset(seed=rl.EVAL_SEED + 3)
    steps, offsets, done = 0, [], False
    while not done:
        measured = env.pm.data.qpos[env.arm.qpos_adr].copy()
        obs, _, terminated, truncated, info = env.step(policy.act(obs))
        offsets.append((env.pm.data.ctrl[env.arm.actuator_ids] - measured) / 0.15)
        steps, done = steps + 1, terminated or truncated
    assert ours.seconds == pytest.approx(steps * CONTROL_PERIOD)
    assert ours.status == info["status"]
    assert ours.control_cost == pytest.approx(np.mean(np.square(offsets)), abs=1e-4)


def test_a_family_with_only_a_distilled_policy_is_benched(tmp_path):
    root = tmp_path / "models"
    random_policy("reach", seed=2).save(rl.policy_dir(root, "reach", "so101", distilled=True))
    assert rl.shipped_families(root, "so101") == ["reach"]
    config = MPCConfig(samples=4, horizon=0.2, proposals=False)
    report = rl.run(None, episodes=1, models=root, config=config, progress=False)
    family = report["families"]["reach"]
    assert family["backends"]["rl"] is None and family["backends"]["distilled"]["episodes"] == 1
    assert family["inference"]["actions_per_s"] > 0
    assert "rl         n/a" in rl.format_text(report)


def test_a_distilled_policy_is_run_and_not_taken_for_a_family(models, tmp_path):
    root = tmp_path / "models"
    random_policy("reach").save(rl.policy_dir(root, "reach", "so101"))
    random_policy("reach", seed=2).save(rl.policy_dir(root, "reach", "so101", distilled=True))
    assert rl.shipped_families(root, "so101") == ["reach"]
    config = MPCConfig(samples=4, horizon=0.2, proposals=False)
    report = rl.run(["reach"], episodes=1, models=root, config=config, progress=False)
    distilled = report["families"]["reach"]["backends"]["distilled"]
    assert distilled["episodes"] == 1 and distilled["runs"][0]["seed"] == rl.EVAL_SEED
    assert report["families"]["reach"]["training"]["distilled"]["timesteps"] == 2048


def test_bad_input_is_a_clear_error(models, tmp_path):
    with pytest.raises(Lang2PolicyError, match=r"unknown task family 'fly'.*reach"):
        rl.run(["fly"], episodes=1, models=models, progress=False)
    with pytest.raises(Lang2PolicyError, match="episodes must be at least 1"):
        rl.run(["reach"], episodes=0, models=models, progress=False)
    with pytest.raises(Lang2PolicyError, match="'move_slowly' has no policy at"):
        rl.run(["move_slowly"], episodes=1, models=models, progress=False)
    with pytest.raises(Lang2PolicyError, match="no RL policy for the so101"):
        rl.run(None, episodes=1, models=tmp_path, progress=False)


def test_the_command_is_registered():
    bench = BENCHES["rl"]
    parser = argparse.ArgumentParser()
    bench.configure(parser)
    args = parser.parse_args(["--families", "reach, move_slowly", "--episodes", "3", "--json"])
    assert args.families == ["reach", "move_slowly"] and args.episodes == 3 and args.json
    defaults = parser.parse_args([])
    assert (defaults.samples, defaults.horizon, defaults.families) == (64, 0.5, None)
    assert bench.exit_code({"inference_ok": False}) == 1
    assert bench.exit_code({"inference_ok": True}) == 0


def without_times(report: dict) -> dict:
    """The report less what a clock measured (wall times, inference speed)."""
    report = copy.deepcopy(report)
    for family in report["families"].values():
        family.pop("inference")
        for figures in filter(None, family["backends"].values()):
            figures.pop("wall_seconds")
            for run in figures["runs"]:
                run.pop("wall_seconds")
    report.pop("inference_ok")
    return report


def test_the_local_pool_gives_the_report_of_one_process(models, report):
    pooled = rl.run(None, episodes=2, models=models, config=SMALL_MPC, progress=False,
                    executor=Executor("local", 2))
    assert without_times(pooled) == without_times(report)


@pytest.mark.slow
def test_ray_workers_give_the_report_of_one_process(models, report):
    """Two Ray workers (a local cluster started and stopped for the run) interleave the
    backends' episodes and still give the in-process report, timings aside."""
    pytest.importorskip("ray")
    on_ray = rl.run(None, episodes=2, models=models, config=SMALL_MPC, progress=False,
                    executor=Executor("ray", 2))
    assert without_times(on_ray) == without_times(report)
    assert on_ray["families"]["reach"]["backends"]["mpc"]["runs"][1]["seed"] == rl.EVAL_SEED + 1


def test_the_executor_flags_choose_where_the_episodes_run(monkeypatch):
    parser = argparse.ArgumentParser()
    BENCHES["rl"].configure(parser)
    chosen = []
    monkeypatch.setattr(rl, "run", lambda *a, executor, **k: chosen.append(executor))
    for words in ([], ["--workers", "2"], ["--executor", "ray"],
                  ["--executor", "ray", "--workers", "1", "--ray-address", "127.0.0.1:6379"]):
        rl.run_args(parser.parse_args([*words, "--json"]))
    assert chosen == [Executor("local", 0), Executor("local", 2), Executor("ray", 2),
                      Executor("ray", 1, "127.0.0.1:6379")]
    with pytest.raises(SystemExit):
        parser.parse_args(["--executor", "dask"])
