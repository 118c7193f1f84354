"""A LeRobot policy server drives the simulated arm through our VLA node and the safety node
(issue 35): real sim, safety and VLA nodes (``backend:=lerobot://...``), each in its own
process, and the gRPC stand-in for LeRobot's server (``lerobot_server_double.py``; the live
run against LeRobot's own server is ``vla/test_lerobot_live.py``). Judged by the arm: it moves to
the pose the server's chunks lead to, and after a hostile answer it holds where it is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from support.lerobot_server_double import DoubleProcess  # noqa: E402
from support.vla_ros import skill_started, vla_graph  # noqa: E402
from support.waiting import wait_for  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]

DOMAIN_ID = 1 + (os.getpid() + 157) % 200
CHECKPOINT = Path(__file__).parents[1] / "fixtures" / "lerobot_async" / "act_checkpoint"
SKILL = "put the red block in the blue bowl"
OFFSET = np.array([0.25, 0.15, -0.15, -0.2, 0.3, 0.0])  # rad, from where the arm starts


def test_a_lerobot_server_moves_the_arm_and_a_hostile_answer_holds_it(tmp_path):
    server = DoubleProcess(tmp_path, "empty")
    arguments = ["-p", f"backend:=lerobot://127.0.0.1:{server.port}",
                 "-p", f"lerobot_checkpoint:={CHECKPOINT}", "-p", "max_seconds:=40.0"]  # fmt: skip
    try:
        with pytest.MonkeyPatch.context() as mp, vla_graph(mp, DOMAIN_ID, arguments) as graph:
            _, _, probe = graph
            start = probe.latest_position()
            target = start + OFFSET
            server.mode(f"follow {json.dumps(target.tolist())}")
            running = wait_for(lambda: skill_started(probe, SKILL), 30.0, "the skill to start")
            assert running["backend"] == f"lerobot://127.0.0.1:{server.port}"
            wait_for(
                lambda: _error(probe, target) < 0.2 * np.abs(OFFSET).max(),
                40.0,
                "the arm to reach the server's pose",
                detail=lambda: f"{probe.latest_position() - target} off; {probe.last()}",
            )
            print(f"\nthe arm is within {_error(probe, target):.3f} rad of the server's pose")
            setup = server.requests("SendPolicyInstructions")[0]
            assert set(setup["lerobot_features"]) == {
                "observation.state", "observation.images.front", "observation.images.wrist"
            }

            since, _ = probe.mark()
            server.mode(f"file {CHECKPOINT.parent / 'hostile_os_system.pkl'}")
            _, failed = probe.status("failed", since, timeout=20.0)
            assert "policy backend error" in failed["detail"] and "LeRobot wire" in failed["detail"]
            drift = probe.drift_after_hold()
            print(f"after the hostile answer the arm drifted {drift:.4f} rad in 1 s")
            assert drift < 0.005
    finally:
        server.stop()


def _error(probe, target: np.ndarray) -> float:
    return float(np.abs(probe.latest_position()[:5] - target[:5]).max())
