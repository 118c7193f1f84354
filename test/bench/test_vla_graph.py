"""``lang2policy bench vla --graph``: the VLA through the ROS graph beside standalone (issue 18,
acceptance row 3).

The ROS test runs the command as a user would (a process of its own, ``--json``) on one
evaluation episode with the shipped checkpoint: the sim node on that episode's scene, the
safety and VLA nodes as processes, the skill sent by the bench's client, the standalone
runner on the same episode. It checks the report: the rows side by side, a verdict per
episode from the node and from the poses, the scene the sim showed is the standalone one, the
control rate through the graph, policy time and wall time are sensible, the JSON file holds
the report. The shipped policy is weak: success itself is not asked for.

The pure tests feed the figures known poses and times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lang2policy.bench import vla_graph, vla_graph_report
from lang2policy.bench.registry import parser
from lang2policy.errors import ConfigError
from lang2policy.graph.topics import FINAL_SKILL_STATES
from lang2policy.vla.spec.tasks import Task

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 83) % 200


# ---------------------------------------------------------------------- the live graph
@pytest.mark.ros
@pytest.mark.slow
def test_bench_vla_graph_runs_an_episode_through_the_graph_beside_standalone(tmp_path):
    pytest.importorskip("rclpy")
    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN_ID), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.setdefault("MUJOCO_GL", "egl")
    out = tmp_path / "vla_graph.json"
    command = [
        *(sys.executable, "-m", "lang2policy.cli", "bench", "vla", "--graph"),
        *("--families", "lift", "--splits", "seen", "--per-split", "1", "--workers", "1"),
        *("--domain", str(DOMAIN_ID), "--out", str(out), "--json", "--busy-cores", "1"),
        *("--realism", "mild"),  # the sim node and the standalone world under one profile
    ]
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=500, check=False
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert json.loads(out.read_text()) == report
    print("\n" + vla_graph_report.format_text(report))
    assert report["benchmark"] == "vla-graph" and report["errors"] == [], report["errors"]
    assert report["realism"] == "mild" and "realism mild" in vla_graph_report.format_text(report)
    [row] = report["rows"]
    assert (row["family"], row["split"], row["episodes"]) == ("lift", "seen", 1)
    assert {"graph_node", "graph_poses", "standalone", "oracle"} <= set(row)
    assert row["oracle"] == 1  # the scripted oracle lifts the block on this scene
    [episode] = report["episodes"]
    graph, alone = episode["graph"], episode["standalone"]
    assert graph["state"] in FINAL_SKILL_STATES and graph["state"] != "rejected", graph
    assert isinstance(graph["node_success"], bool) and isinstance(graph["pose_success"], bool)
    assert isinstance(alone["success"], bool) and alone["sim_s"] > 0
    if graph["node_success"]:  # the node's check held until it ended: so do the poses
        assert graph["pose_success"], graph
    assert graph["layout_error_mm"] is not None and graph["layout_error_mm"] < 1.0
    # The policy runs and its targets reach the topic; how fast is the report's verdict (its
    # RATE_TARGET_HZ), not this test's: four processes share a loaded 2-core CI machine.
    assert graph["rate_status_hz"] > 2 and graph["rate_commands_hz"] > 2, graph
    assert graph["commands"] >= 2 * graph["wall_s"] * 0.9  # > 2 targets a second reached us
    assert 0 < graph["act_ms_mean"] < 100 and 0 < graph["wall_s"] <= 20 + 10
    assert graph["arm_travel_rad"] > 0.02, graph  # the policy's targets moved the sim's arm
    assert report["latency_one_core"]["p50_ms"] > 0 and report["act_ms_standalone"]["calls"] > 0
    assert report["passed"] == (report["rate_status_hz"]["min"] >= vla_graph_report.RATE_TARGET_HZ)
    busy = report["busy"]  # the same episode again while another process spins on a core
    assert (busy["busy_cores"], busy["episodes"], busy["errors"]) == (1, 1, [])
    assert busy["quiet_success"] == int(bool(graph["pose_success"]))
    assert busy["steps"] > 0 and "kept busy by another process" in vla_graph_report.format_text(
        report
    )
    assert done.returncode == (0 if report["passed"] and busy["passed"] else 1)


# ---------------------------------------------------------------------- pure parts
def test_pose_verdict_and_layout_error_from_known_poses():
    from lang2policy.scene.mirror import MirrorWorld

    mirror = MirrorWorld("so101")
    task = Task("lift", "red block")
    rest = [0.2, 0.05, 0.0151, 1.0, 0.0, 0.0, 0.0]
    lifted = [0.2, 0.05, 0.0151 + 0.06, 1.0, 0.0, 0.0, 0.0]
    start = {"red block": rest, "blue bowl": [0.25, -0.1, 0.0001, 1.0, 0.0, 0.0, 0.0]}
    up = {**start, "red block": lifted}
    done, detail = vla_graph_report.pose_verdict(task, start, up, mirror)
    assert done and "6.0 cm above" in detail
    done, _ = vla_graph_report.pose_verdict(task, start, start, mirror)
    assert not done
    done, detail = vla_graph_report.pose_verdict(task, start, {"blue bowl": start["blue bowl"]},
                                                 mirror)  # fmt: skip
    assert not done and "not seen" in detail
    scene = vla_graph.EpisodeScene(1, ("red block", "blue bowl"), {}, {
        "red block": [0.2, 0.05, 0.0151], "blue bowl": [0.25, -0.1 + 0.002, 0.0001]})  # fmt: skip
    assert vla_graph_report.layout_error_mm(scene, start) == pytest.approx(2.0, abs=1e-6)
    assert vla_graph_report.layout_error_mm(scene, {"red block": rest}) is None


def test_rates_from_receive_times():
    times = [*np.arange(0, 5.0, 0.1), 5.3]  # 10 Hz, then one late message
    rate, p99 = vla_graph_report._rate(times)
    assert rate == pytest.approx(50 / 5.3, abs=0.01) and p99 > 100
    assert vla_graph_report._rate([1.0]) == (0.0, None)


def test_rows_count_each_verdict_per_family_and_split():
    def episode(split, node, poses, alone, oracle):
        return {"family": "lift", "split": split,
                "graph": {"node_success": node, "pose_success": poses},
                "standalone": {"success": alone, "oracle": oracle}}  # fmt: skip

    rows = vla_graph_report.rows([
        episode("seen", True, True, False, True), episode("seen", False, None, True, True),
        episode("unseen phrasing", False, False, False, False),
    ])  # fmt: skip
    assert rows == [
        {"family": "lift", "split": "seen", "episodes": 2, "graph_node": 1, "graph_poses": 1,
         "standalone": 1, "oracle": 2},
        {"family": "lift", "split": "unseen phrasing", "episodes": 1, "graph_node": 0,
         "graph_poses": 0, "standalone": 0, "oracle": 0},
    ]  # fmt: skip


def test_arguments_default_and_refusals():
    args = parser("vla").parse_args(["--graph"])
    assert args.per_split is None and args.splits is None
    standalone = parser("vla").parse_args(["--splits", "seen", "--model", "no/such/model"])
    with pytest.raises(ConfigError, match="--splits needs --graph"):
        vla_graph.run_args(standalone)
    assert standalone.per_split == vla_graph.STANDALONE_PER_SPLIT
    graph = parser("vla").parse_args(["--graph", "--model", "no/such/model"])
    with pytest.raises(ConfigError, match="no VLA model directory"):
        vla_graph.run_args(graph)
    assert graph.per_split == vla_graph.GRAPH_PER_SPLIT == 1
    with pytest.raises(ConfigError, match="--per-split must be at least 1"):
        vla_graph.run_args(parser("vla").parse_args(["--graph", "--per-split", "0"]))
    with pytest.raises(SystemExit):
        parser("vla").parse_args(["--graph", "--splits", "seen,unseen colours"])
    with pytest.raises(ConfigError, match="--busy-cores must be from 0"):
        vla_graph.run_args(parser("vla").parse_args(["--graph", "--busy-cores", "99"]))
    with pytest.raises(ConfigError, match="one realism level at a time"):
        vla_graph.run_args(parser("vla").parse_args(["--graph", "--realism", "off,mild"]))
    with pytest.raises(ConfigError, match="realism"):
        vla_graph.run_args(parser("vla").parse_args(["--graph", "--realism", "sunny"]))


def test_each_episodes_sim_node_runs_under_the_benchs_realism_level():
    scene = vla_graph.EpisodeScene(7, ("red block",), {}, {"red block": [0.2, 0.0, 0.01]})
    base = vla_graph.node_specs(REPO / "models" / "vla-so101-tiny")["sim_node"]
    mild = vla_graph.sim_spec(base, scene, "mild").overrides
    assert (mild["realism"], mild["seed"], mild["objects"]) == ("mild", 7, "red block")
    assert vla_graph.sim_spec(base, scene).overrides["realism"] == "off"


def test_busy_cores_are_other_processes_spinning_until_the_block_ends():
    from lang2policy.bench.busy_cores import busy_cores

    with busy_cores(1) as [spinner]:
        deadline = time.monotonic() + 10.0
        while _cpu_seconds(spinner.pid) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert spinner.poll() is None and _cpu_seconds(spinner.pid) >= 0.5  # it burns CPU
    assert spinner.poll() is not None  # stopped on leaving
    with pytest.raises(ConfigError, match="whole number from 0 to 64"), busy_cores(-1):
        pass


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
