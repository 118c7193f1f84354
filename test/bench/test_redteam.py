"""The safety layer attacked through the graph as processes, judged by what the arm did.

``lang2policy bench redteam`` with short runs: the robot node (the sim node, or the real
SO-101 driver on the emulated servo bus) and the safety node as processes in a private ROS
domain; a hostile commander (``lang2policy.ros.redteam_probe``) sends streams that reverse
within the cap, streams at the cap, a sweep into a plan keep-out zone, and is killed (as is the
safety node) at speed; on the sim, the VLA node runs skills on a hostile remote policy
(``bench.hostile_vla``: erratic targets, then a pose inside a plan keep-out zone). Every
verdict comes from measured joint states: joint speeds, the tool point and the gripper's
geometry by forward kinematics (``safety.effects``).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pytest

from lang2policy.bench import redteam
from lang2policy.safety import effects as metrics

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.flaky(reruns=2)]


def run(robot: str) -> dict[str, dict]:
    args = argparse.Namespace(
        robot=robot,
        reverse_seconds=5.0,
        stream_seconds=10.0,
        seed=0,
        domain=60 + os.getpid() % 40 + (0 if robot == "sim" else 40),
        scenarios=",".join(redteam.SCENARIOS),
    )
    report = redteam.run_args(args)
    print(redteam.format_text(report))
    results = {}
    for r in report["results"]:
        key = r["scenario"] + str(r.get("rate", "")) + r.get("victim", "") + r.get("mode", "")
        results[key] = r
    return results


@pytest.mark.parametrize("robot", ["sim", "so101-hw"])
def test_no_upstream_drives_the_arm_past_its_limits(robot):
    results = run(robot)
    cap = results["reverse10"]["cap"]
    for key in ("reverse10", "reverse50"):
        r = results[key]
        assert r["peak_joint_speed"] <= 1.1 * cap, r  # was 2.45-2.77 rad/s unshaped
        assert r["peak_tool_speed"] <= redteam.TOOL_CAP, r
        assert r["workspace_excursion"] <= 0.005, r
    stream = results["cap_stream"]
    assert stream["lag_max"] <= 0.3, stream  # was 0.45 -> 6.4 s with the robot's queue
    kills = ("kill10commander", "kill50commander", "kill50safety")
    kills += ("kill10vlafar",) if robot == "sim" else ()
    for key in kills:
        r = results[key]
        assert r["still_after"] is not None and r["still_after"] <= 0.6, r
        assert r["moved_after_bound"] <= 0.05, r
    if robot == "sim":
        zone = results["keep_out"]
        assert zone["keep_out_cuts"] > 0, zone
        assert zone["zone_depth"] == 0.0, zone
        # The VLA node on a hostile remote policy: erratic targets, then a pose in a plan zone.
        erratic = results["vlaerratic"]
        assert erratic["peak_joint_speed"] <= 1.1 * cap, erratic
        assert erratic["workspace_excursion"] <= 0.005, erratic
        toward = results["vlatoward"]
        assert toward["zone_depth"] == 0.0, toward
        assert toward["vla_end"] == "stopped" and "keep-out" in toward["vla_reason"], toward


def test_the_metrics_measure_what_they_say():
    stamps = np.arange(0.0, 1.0, 0.02)
    positions = np.where(stamps < 0.5, stamps, 0.5)[:, None]
    velocities = np.where(stamps < 0.5, 1.0, 0.0)[:, None]
    rec = metrics.Recording(stamps, positions, velocities)
    report = metrics.stop_after(rec, 0.3, 0.3)
    assert report.still_after == pytest.approx(0.2)
    assert report.moved_after_bound == pytest.approx(0.0)
    assert report.moved_after_kill == pytest.approx(0.2, abs=0.021)
    assert metrics.peak_joint_speed(rec) == 1.0
    commanded_t = np.arange(0.0, 1.0, 0.01)
    delayed = metrics.Recording(
        commanded_t, np.sin(commanded_t * 6 - 0.6)[:, None], np.zeros((len(commanded_t), 1))
    )
    assert metrics.lag(commanded_t, np.sin(commanded_t * 6), delayed, 0) == pytest.approx(0.1)
    box = metrics.inside_box(np.array([[0.5, 0.5, 0.5], [2.0, 0.0, 0.0]]), [0, 0, 0], [1, 1, 1])
    assert box.tolist() == [0.5, 0.0]
