"""``lang2policy bench graph``: the live graph measured end to end (issue 16, item 6).

The ROS test runs the command as a user would (``lang2policy bench graph ... --json``, a process
of its own): the whole headless graph as processes, the pick-and-place sent on the instruction
topic by the bench's client, the planner replaying the LLM answer recorded on this graph and
scene (``so101_graph.jsonl``: seed 1, these objects, route code, grounding off; the full graph's
perception node lists the objects sorted, which is the prompt recorded there), then the stop and
a short idle CPU window. It checks the report's structure and what it measured: the block is in
the bowl by the simulator's ground truth, the start-up time and first-motion latency are
numbers, the stop was measured. Timings are printed, not asserted (a benchmark reports them).

The analysis tests feed the pure figures known joint states and object poses.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lang2policy.bench import graph_bench
from lang2policy.bench.graph_bench_analysis import (
    claims_row,
    resource_rows,
    stop_figures,
    succeeded,
    task_figures,
)
from lang2policy.scene.robot_description import load_robot_description

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "test" / "fixtures" / "llm" / "so101_graph.jsonl"
DOMAIN_ID = 1 + (os.getpid() + 57) % 200
SIZES = load_robot_description("so101").objects


# ---------------------------------------------------------------------- the live graph
@pytest.mark.ros
@pytest.mark.slow
def test_bench_graph_runs_the_pick_and_place_through_the_graph_and_measures_it(tmp_path):
    pytest.importorskip("rclpy")
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=str(DOMAIN_ID),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        HOME=str(tmp_path),  # no corrections memory from a user
    )
    env.setdefault("MUJOCO_GL", "egl")
    command = [
        *(sys.executable, "-m", "lang2policy.cli", "bench", "graph"),
        *("--llm", f"replay:{FIXTURE}", "--routes", "code", "--per-route", "1"),
        *("--grounding", "off", "--seed", "1", "--no-cameras"),
        *("--skip-controller", "--idle-seconds", "2", "--domain", str(DOMAIN_ID), "--json"),
    ]
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: a target missed, not a crash
    report = json.loads(done.stdout)
    print(graph_bench.format_text(report))  # shown with -s
    assert "planner ready" in done.stderr and "sent 'put the red block" in done.stderr
    assert report["error"] is None, report["error"]

    [task] = report["tasks"]
    assert task["route"] == "code" and task["instruction"] == "put the red block in the blue bowl"
    assert task["outcome"] == "done", task
    assert task["success"], task["success_detail"]  # judged from /sim/objects
    states = [state for state, _ in task["statuses"]]
    assert states[0] == "received" and "plan" in states and states[-1] == "done", states
    for key in ("first_motion_s", "planning_s", "motion_s", "wall_s", "wall_ratio"):
        assert isinstance(task[key], float) and task[key] > 0, (key, task)
    assert task["planning_s"] < task["first_motion_s"] < task["wall_s"]

    assert isinstance(report["startup_s"], float) and report["startup_s"] > 0
    first = report["first_motion"]
    assert first["n"] == 1 and first["missing"] == 0
    assert first["p50_s"] == first["p90_s"] == first["first_after_startup_s"]

    stop = report["stop"]
    assert stop["success"] and stop["speed_at_call"] > 0.3, stop  # stopped while moving
    assert isinstance(stop["halted_s"], float) and isinstance(stop["overshoot_rad"], float)

    idle = report["idle_cpu"]
    assert {"planner_node", "sim_node", "controller_node"} <= set(idle["nodes"]), idle
    assert "skipped" in report["controller_rate"]["unavailable"]
    names = [row["name"] for row in report["rows"]]
    assert names[:3] == [
        "graph start-up (launch -> ready)",
        "graph restart (LLM prefixes kept on disk)",  # the idle graph's start-up
        "instruction -> first motion p50 / p90",
    ]
    assert {"stop: halted", "stop: overshoot", "idle CPU, all nodes"} <= set(names)


# ---------------------------------------------------------------------- the figures
def joint_states(pans: list[float], speeds: list[float], start: float = 10.0) -> list:
    """``[received, stamp, {joint: [q, v]}]`` every 20 ms: shoulder_pan as given, the elbow
    still."""
    return [
        [0.0, start + 0.02 * k, {"shoulder_pan": [q, v], "elbow_flex": [0.5, 0.0]}]
        for k, (q, v) in enumerate(zip(pans, speeds, strict=True))
    ]


def test_stop_figures_measure_the_halt_and_the_overshoot_past_the_rest_position():
    # moving at +0.5 rad/s at the call (stamp 10.02), brakes, runs 0.01 rad past where it comes
    # to rest (1.00), comes back and stays
    pans = [0.98, 0.99, 1.003, 1.01, 1.003] + [1.0] * 20
    speeds = [0.5, 0.5, 0.3, 0.04, -0.2] + [0.0] * 20
    figures = stop_figures(
        {
            "called_stamp": 10.02,
            "called": 1.0,
            "answered": 1.03,
            "success": True,
            "message": "stopped",
            "states": joint_states(pans, speeds),
        }
    )
    assert figures["overshoot_rad"] == pytest.approx(0.01)
    assert figures["halted_s"] == pytest.approx(0.04)  # the first state slower than 0.05 rad/s
    assert figures["settled_s"] == pytest.approx(0.06)  # then within 0.005 rad of the rest
    assert figures["service_ms"] == pytest.approx(30.0)
    rows = resource_rows(
        {"idle_cpu": {"unavailable": "skipped"}, "controller_rate": {}, "stop": figures}
    )
    verdicts = {row["name"]: row["passed"] for row in rows}
    assert verdicts["stop: halted"] is True and verdicts["stop: overshoot"] is False


def test_success_is_judged_from_the_simulators_object_poses():
    bowl = [0.2, 0.1, 0.0]
    before = {"red block": [0.1, -0.1, 0.0125], "blue bowl": bowl}
    inside = {"red block": [0.205, 0.1, 0.02], "blue bowl": bowl}
    beside = {"red block": [0.26, 0.1, 0.0125], "blue bowl": bowl}
    check = {"kind": "in", "object": "red block", "bowl": "blue bowl"}
    assert succeeded(check, before, inside, {}, SIZES)[0]
    assert not succeeded(check, before, beside, {}, SIZES)[0]
    lift = {"kind": "lift", "object": "red block", "height": 0.10}
    assert succeeded(lift, before, before, {"red block": 0.11}, SIZES)[0]
    assert not succeeded(lift, before, before, {"red block": 0.03}, SIZES)[0]


def test_a_compound_instructions_checks_all_hold_and_an_offset_is_judged_from_where_it_was():
    bowl = [0.2, 0.1, 0.0]
    blocks = {"red block": [0.1, -0.1, 0.0125], "blue block": [0.2, -0.1, 0.0125]}
    before = {**blocks, "blue bowl": bowl}
    shifted = {**before, "red block": [0.205, 0.1, 0.02], "blue block": [0.2, -0.045, 0.0125]}
    offset = {"kind": "offset", "object": "blue block", "by": [0.0, 0.05]}
    both = {"kind": "all", "checks": [
        {"kind": "in", "object": "red block", "bowl": "blue bowl"}, offset]}  # fmt: skip
    ok, why = succeeded(both, before, shifted, {}, SIZES)
    assert ok and "blue block: moved (+0.0, +5.5) cm" in why
    wrong_way = {**shifted, "blue block": [0.2, -0.15, 0.0125]}
    assert not succeeded(offset, before, wrong_way, {}, SIZES)[0]
    assert not succeeded(both, before, wrong_way, {}, SIZES)[0]
    on_the_bowl = {**shifted, "blue block": [0.2, -0.05, 0.05]}  # the right xy, stacked up
    assert not succeeded(offset, before, on_the_bowl, {}, SIZES)[0]
    unmoved_red = {**shifted, "red block": before["red block"]}
    assert not succeeded(both, before, unmoved_red, {}, SIZES)[0]


def test_task_figures_split_wall_time_into_planning_and_motion():
    task = {
        "text": "put the red block in the blue bowl",
        "route": "code",
        "check": {"kind": "in", "object": "red block", "bowl": "blue bowl"},
        "sent": 100.0,
        "ended": 126.0,
        "outcome": "done",
        "outcome_detail": "",
        "statuses": [[100.1, "received"], [102.0, "plan"], [126.0, "done"]],
        "first_motion": [103.0, 50.0],
        "moving": [50.0, 70.0],
        "objects_before": {"red block": [0.1, -0.1, 0.0125], "blue bowl": [0.2, 0.1, 0.0]},
        "objects_after": {"red block": [0.2, 0.1, 0.02], "blue bowl": [0.2, 0.1, 0.0]},
        "objects_top": {},
    }
    figures = task_figures(task, SIZES)
    assert figures["planning_s"] == 2.0 and figures["motion_s"] == 20.0
    assert figures["first_motion_s"] == 3.0 and figures["wall_s"] == 26.0
    assert figures["wall_ratio"] == pytest.approx(26.0 / 22.0, abs=1e-3)
    assert figures["success"] and figures["statuses"][1] == ["plan", 2.0]
    assert figures["claim_matches_sim"]
    missed = task_figures({**task, "objects_after": task["objects_before"]}, SIZES)
    assert not missed["claim_matches_sim"]  # "done", but the block is not in the bowl
    row = claims_row([figures, missed])
    assert row["passed"] is False and "mismatched" in row["value"]
    honest = task_figures(
        {**task, "outcome": "failed", "objects_after": task["objects_before"]}, SIZES
    )
    assert claims_row([figures, honest])["passed"] is True


def test_instructions_cover_each_route_asked():
    sent = graph_bench.instructions(("code", "reward"), 1)
    assert [(i["route"], i["text"]) for i in sent] == [
        ("code", "put the red block in the blue bowl"),
        ("reward", "lift the blue block 10 cm"),
    ]
    args = argparse.Namespace(
        llm="local", seed=1, objects=graph_bench.OBJECTS, routes=("code", "reward"),
        grounding="on", cameras=True,
    )  # fmt: skip
    assert graph_bench.graph_options(args)["route"] == "auto"  # it chooses per instruction


def test_the_timeline_names_the_planner_phases_and_the_first_motion():
    from lang2policy.bench.graph_bench import timeline
    from lang2policy.graph.topics import planner_phase

    checking = {"state": "running", "detail": "checking the program on a simulated copy"}
    assert planner_phase(checking) == "checking the program on a simulated copy"
    running = {"state": "running", "detail": "running the program (2 lines, 0 generated ...)"}
    assert planner_phase(running) == "running the program"
    assert planner_phase({"state": "plan", "detail": {"code": "x"}}) == ""
    task = {
        "statuses": [["received", 0.0], ["running: planning", 0.01], ["plan", 3.5]],
        "first_motion_s": 4.4,
    }
    assert timeline(task) == "received 0.0, running: planning 0.0, plan 3.5, FIRST MOTION 4.4"
