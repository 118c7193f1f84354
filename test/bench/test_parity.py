"""``lang2policy bench parity`` end to end: the sim node vs the SO-101 driver + emulator.

Starts the real node processes (each back-end in its own ROS domain, localhost discovery), runs
the scripted trajectory at 0.75 of its normal duration and checks the parity report.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("rclpy")

from lang2policy.bench import parity_processes
from lang2policy.bench.parity_analysis import CONTRACT
from lang2policy.cli import main

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 57) % 200  # the sim run; the hw run takes the next one


def test_parity_of_the_sim_node_and_the_driver_on_the_emulator(capsys):
    status = main(
        ["bench", "parity", "--json", "--duration-scale", "0.75", "--domain", str(DOMAIN_ID)]
    )
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert status == 0, (report["reasons"], captured.err[-3000:])
    assert report["verdict"] == "PASS"

    topics = {row["topic"]: row for row in report["topics"]}
    for topic, (kind, _role) in CONTRACT.items():
        row = topics[topic]
        assert row["ok"] and row["classification"] == "contract", row
        assert row["sim"] == row["hw"] and row["sim"].startswith(kind), row
    assert topics["/clock"]["classification"].startswith("sim-only by design")
    assert report["joint_names"]["identical"]
    assert report["joint_names"]["hw"][-1] == "gripper" and len(report["joint_names"]["hw"]) == 6

    rates = report["rates"]
    assert rates["sim"]["joint_states_stamps"]["rate_hz"] == pytest.approx(50.0, rel=0.05)
    assert rates["hw"]["joint_states_received"]["rate_hz"] == pytest.approx(30.0, rel=0.2)

    tracking = report["tracking"]
    assert tracking["window_s"] > 3.0
    for name, figures in tracking["joints"].items():
        bound = report["bounds"]["gripper_opening" if name == "gripper" else "arm_rad"]
        assert figures["max_diff"] < bound, (name, figures)
        assert figures["hw_final_err"] < 0.02 and figures["sim_final_err"] < 0.02, (name, figures)
    assert "sim: sending the scripted trajectory" in captured.err


def test_a_back_end_that_fails_to_start_is_a_setup_error(capsys, monkeypatch):
    failing = [sys.executable, "-c", "print('no arm here'); raise SystemExit(3)"]
    monkeypatch.setattr(
        parity_processes, "backend_commands", lambda *args: [("broken_node", failing)]
    )
    status = main(["bench", "parity", "--domain", str(DOMAIN_ID), "--startup-timeout", "30"])
    err = capsys.readouterr().err
    assert status == 2
    assert "broken_node exited with status 3" in err
    assert "no arm here" in err
