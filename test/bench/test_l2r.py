"""``lang2policy bench l2r`` and ``bench mpc`` through the real CLI, kept short."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lang2policy.bench import l2r
from lang2policy.bench.l2r_tasks import TASKS
from lang2policy.cli import main
from lang2policy.errors import ConfigError
from lang2policy.rewards.spec import validate_spec
from lang2policy.rl.planner import load_policies, shipped_policies
from lang2policy.scene.world import World


def test_every_task_has_a_valid_reference_spec_and_judge():
    world = World("so101")
    for seed in range(3):
        world.reset(seed)
        for name, make in TASKS.items():
            task = make(world, np.random.default_rng(seed))
            assert task.instruction and name
            spec = validate_spec(task.reference, world.present).spec
            judge = validate_spec(task.judge, world.present, add_defaults=False).spec
            assert spec.conditions and judge.conditions


def test_bench_l2r_reports_per_task_success(capsys):
    assert main(["bench", "l2r", "--tasks", "hover,avoid_region", "--episodes", "1",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["tasks"]) == {"hover", "avoid_region"}
    assert report["tasks"]["hover"]["reference"]["successes"] == 1
    assert report["episodes"][0]["sim_seconds"] > 0


def test_bench_l2r_rejects_unknown_tasks(capsys):
    assert main(["bench", "l2r", "--tasks", "juggle"]) == 2
    assert "valid tasks" in capsys.readouterr().err


def test_bench_l2r_backend_rl_runs_the_shipped_policy_where_a_family_serves(capsys):
    if "reach" not in load_policies(shipped_policies("so101"), "so101"):
        pytest.skip("no shipped reach policy (models/rl-reach-so101)")
    assert main(["bench", "l2r", "--tasks", "hover,avoid_region", "--episodes", "1",
                 "--backend", "rl", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backend"] == "rl"
    hover, avoid = report["tasks"]["hover"]["reference"], report["tasks"]["avoid_region"]
    assert hover["backends"] == ["rl:reach"] and hover["successes"] == 1, report
    assert avoid["reference"]["backends"] == ["mpc"]  # no family serves a keep-out box
    episode = next(e for e in report["episodes"] if e["task"] == "hover")
    assert episode["backend"] == "rl:reach" and episode["sim_seconds"] > 0


def test_bench_l2r_backend_rl_lifts_places_and_moves_slowly_with_the_shipped_policies(capsys):
    """The learned policies drive the benchmark's own specs in its multi-object scenes (not
    the families' training scenes): the lift and place policies grasp any block by colour."""
    shipped = load_policies(shipped_policies("so101"), "so101")
    wanted = {"lift": "lift", "move_slowly": "move_slowly", "place_on": "place"}
    tasks = [task for task, fam in wanted.items() if fam in shipped]
    if not tasks:
        pytest.skip("no shipped lift, move_slowly or place policy")
    assert main(["bench", "l2r", "--tasks", ",".join(tasks), "--episodes", "2",
                 "--backend", "rl", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for task in tasks:
        reference = report["tasks"][task]["reference"]
        assert reference["backends"] == [f"rl:{wanted[task]}"], report
        assert reference["successes"] == 2, report


def test_bench_l2r_refuses_an_unknown_backend(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "l2r", "--tasks", "hover", "--backend", "bogus"])
    assert exc.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"'bogus' is not one of \['mpc', 'rl'\]"):
        l2r.run(tasks=["hover"], episodes=1, backend="bogus", progress=False)


@pytest.mark.slow
def test_bench_mpc_compares_with_the_python_loop(capsys):
    assert main(["bench", "mpc", "--seconds", "0.3", "--samples", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    backends = {(r["backend"], r["threads"]) for r in report["throughput"]}
    assert backends == {("python", 1), ("rollout", 1), ("rollout", 2)}
    assert all(r["steps_per_s"] > 0 for r in report["throughput"])
    assert {r["sampler"] for r in report["planning"]} == {"sampling", "cem"}
    assert all(r["iterations_per_s"] > 0 for r in report["planning"])


@pytest.mark.slow
def test_bench_l2r_makes_the_same_report_in_process_on_the_pool_and_on_ray(capsys):
    """Episodes are seeded per index: the report of 4 episodes is the same run here, on 2
    local worker processes and on a real local Ray cluster of 2 workers (timings aside)."""
    pytest.importorskip("ray")

    def untimed(report: dict) -> dict:
        episodes = [{k: v for k, v in e.items() if k != "plan_ms"} for e in report["episodes"]]
        return {**{k: v for k, v in report.items() if k != "wall_seconds"}, "episodes": episodes}

    command = ["bench", "l2r", "--tasks", "hover,avoid_region", "--episodes", "2",
               "--samples", "32", "--json", "--workers", "2"]  # fmt: skip
    here = l2r.run(tasks=["hover", "avoid_region"], episodes=2, samples=32, progress=False)
    reports = {}
    for executor in ("local", "ray"):
        assert main([*command, "--executor", executor]) == 0
        reports[executor] = json.loads(capsys.readouterr().out)
    assert len(here["episodes"]) == 4
    assert untimed(reports["local"]) == untimed(here)
    assert untimed(reports["ray"]) == untimed(here)
    assert l2r.format_text(reports["ray"]).splitlines()[:-1] == (
        l2r.format_text(here).splitlines()[:-1]
    )  # the table, all but its wall-time line
