"""A pick-and-place through the graph that knows the table only through its camera, judged by
the simulator's truth.

``lang2policy sim --perception camera --realism mild`` as a user starts it (the planner replays
the local model's recorded answer). At the end of ``put_first_on_second`` the gripper hovers
over the bowl and hides the block it just placed there from the top camera: perception drops
the block, and the goal was judged on the missing block (a true success reported as failed,
then a repair that crashed on an unknown object). The planner now raises the arm out of the
view (the robot description's ``look`` pose) and waits for perception to see the objects again
before it judges; the claim must equal the simulator's truth.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from launcher_support import Run  # noqa: E402
from ros_support import ros_env, spinning  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402
from waiting import wait_for  # noqa: E402

from lang2policy.graph import topics  # noqa: E402

pytestmark = pytest.mark.ros

FIXTURE = Path(__file__).parent / "fixtures" / "llm" / "camera_pickplace.jsonl"
SEED = 3  # the scene the fixture was recorded on: blue, gray, green, red blocks; a red bowl
INSTRUCTION = "put the blue block in the red bowl"
BOWL_RADIUS = 0.042  # m (config/robots/so101.yaml)
DOMAIN_ID = 1 + (os.getpid() + 191) % 200


class Probe:
    """Publishes instructions; records the planner's statuses and perception's and the
    simulator's object sets."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("camera_graph_probe", context=context)
        self.lock = threading.Lock()
        self.statuses: list[dict] = []
        self.truth: dict[str, np.ndarray] = {}
        self.seen: dict[str, np.ndarray] = {}
        self.instruction = self.node.create_publisher(String, topics.INSTRUCTION.name, 10)
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 100)
        self.node.create_subscription(MarkerArray, "/sim/objects", self._on_truth, 5)
        self.node.create_subscription(MarkerArray, topics.OBJECTS.name, self._on_seen, 5)

    def _on_status(self, msg: String) -> None:
        with self.lock:
            self.statuses.append(json.loads(msg.data))

    def _on_truth(self, msg: MarkerArray) -> None:
        with self.lock:
            self.truth = _positions(msg)

    def _on_seen(self, msg: MarkerArray) -> None:
        with self.lock:
            self.seen = _positions(msg)

    def planner_ready(self) -> bool:
        with self.lock:
            return any(s.get("state") == "ready" for s in self.statuses)

    def outcome(self) -> dict | None:
        with self.lock:
            for status in self.statuses:
                if status.get("instruction") == INSTRUCTION and status.get("state") in (
                    "done",
                    "failed",
                    "rejected",
                    "stopped",
                ):
                    return status
        return None

    def lines(self) -> list[str]:
        with self.lock:
            return [str(s.get("detail")) for s in self.statuses]


def _positions(msg: MarkerArray) -> dict[str, np.ndarray]:
    return {
        m.text: np.array([m.pose.position.x, m.pose.position.y, m.pose.position.z])
        for m in msg.markers
        if m.text
    }


@pytest.fixture
def graph(tmp_path):
    run = Run(
        *("--headless", "--perception", "camera", "--realism", "mild", "--seed", str(SEED)),
        *("--llm", f"replay:{FIXTURE}", "--route", "code"),
        domain_id=DOMAIN_ID,
        extra_env={"HOME": str(tmp_path)},  # no corrections memory from a user
    )
    try:
        with pytest.MonkeyPatch.context() as mp:
            for key, value in ros_env(DOMAIN_ID).items():
                mp.setenv(key, value)
            context = rclpy.Context()
            rclpy.init(context=context)
            probe = Probe(context)
            with spinning(context, [probe.node], threads=2):
                yield probe, run
    finally:
        run.stop()


def test_a_block_placed_in_a_bowl_under_the_gripper_is_judged_from_the_camera_truthfully(graph):
    probe, run = graph
    wait_for(probe.planner_ready, 240, "the planner's ready line", detail=lambda: run.output)
    wait_for(lambda: "blue block" in probe.seen, 60, "perception to see the blue block")
    probe.instruction.publish(String(data=INSTRUCTION))
    outcome = wait_for(probe.outcome, 300, f"the outcome of {INSTRUCTION!r}", detail=probe.lines)
    with probe.lock:
        truth, seen = dict(probe.truth), dict(probe.seen)
    inside = np.linalg.norm(truth["blue block"][:2] - truth["red bowl"][:2]) < BOWL_RADIUS
    assert inside, f"the simulator: blue block at {truth['blue block']}, bowl {truth['red bowl']}"
    detail = outcome["detail"]
    assert outcome["state"] == "done", outcome
    assert detail["verdict"] == "goal_reached" and detail["attempts"] == 1, detail
    assert any("out of the camera's view" in line for line in probe.lines()), probe.lines()
    # what the planner judged on: the camera's estimate of the block, where it truly is
    assert np.linalg.norm(seen["blue block"] - truth["blue block"]) < 0.02, (seen, truth)
