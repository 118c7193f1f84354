"""Pick-and-places through the graph that knows the table only through its camera, judged by
the simulator's truth.

``lang2policy sim --perception camera --realism mild`` as a user starts it (the planner replays
the local model's recorded answers), three instructions in a row on the objects it listed. At
the end of ``put_first_on_second`` the gripper hovers
over the bowl and hides the block it just placed there from the top camera: perception drops
the block, and the goal was judged on the missing block (a true success reported as failed,
then a repair that crashed on an unknown object). The planner now raises the arm out of the
view (the robot description's ``look`` pose) and waits for perception to see the objects again
before it judges; each claim must equal the simulator's truth, and the object set perception
reports loses nothing but the block being moved (which leaves the view in the gripper).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from std_msgs.msg import String  # noqa: E402
from support.launcher import Run  # noqa: E402
from support.ros import probe_in_domain  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from lang2policy.graph import topics  # noqa: E402

pytestmark = pytest.mark.ros

FIXTURE = Path(__file__).parents[1] / "fixtures" / "llm" / "camera_pickplace.jsonl"
SEED = 3
OBJECTS = "red block,blue block,red bowl,blue bowl,green bowl"  # the fixture's scene
# (instruction, block, bowl): no block lands on another (a covered block is truly unseen)
MOVES = (
    ("put the red block in the green bowl", "red block", "green bowl"),
    ("put the blue block in the red bowl", "blue block", "red bowl"),
    ("put the red block in the blue bowl", "red block", "blue bowl"),
)
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
        self.name_sets: list[frozenset[str]] = []  # every object set perception published
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
            self.name_sets.append(frozenset(self.seen))

    def planner_ready(self) -> bool:
        with self.lock:
            return any(s.get("state") == "ready" for s in self.statuses)

    def outcome(self, instruction: str) -> dict | None:
        with self.lock:
            for status in self.statuses:
                if status.get("instruction") == instruction and status.get("state") in (
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
def camera_graph(tmp_path):
    run = Run(
        *("--headless", "--perception", "camera", "--realism", "mild", "--seed", str(SEED)),
        *("--objects", OBJECTS),
        *("--llm", f"replay:{FIXTURE}", "--route", "code"),
        domain_id=DOMAIN_ID,
        extra_env={"HOME": str(tmp_path)},  # no corrections memory from a user
    )
    try:
        with probe_in_domain(DOMAIN_ID, Probe) as probe:
            yield probe, run
    finally:
        run.stop()


def test_three_pick_and_places_from_the_camera_are_judged_truthfully(camera_graph):
    probe, run = camera_graph
    wait_for(probe.planner_ready, 240, "the planner's ready line", detail=lambda: run.output)
    listed = set(OBJECTS.split(","))
    wait_for(lambda: set(probe.seen) == listed, 60, "perception to list the scene's objects")
    for instruction, block, bowl in MOVES:
        with probe.lock:
            start = len(probe.name_sets)
        probe.instruction.publish(String(data=instruction))
        outcome = wait_for(
            lambda i=instruction: probe.outcome(i), 300, repr(instruction), detail=probe.lines
        )
        with probe.lock:
            truth, seen = dict(probe.truth), dict(probe.seen)
            sets = probe.name_sets[start:]
        inside = np.linalg.norm(truth[block][:2] - truth[bowl][:2]) < BOWL_RADIUS
        said = (outcome["state"], outcome["detail"].get("verdict"), probe.lines()[-8:])
        assert inside, f"the sim: {block} at {truth[block]}, {bowl} at {truth[bowl]}; {said}"
        detail = outcome["detail"]
        assert outcome["state"] == "done" and detail["verdict"] == "goal_reached", outcome
        # what the planner judged on: the camera's estimate of the block, where it truly is
        assert np.linalg.norm(seen[block] - truth[block]) < 0.02, (block, seen, truth)
        # nothing but the moved block left the set, and nothing unlisted joined it
        assert all(listed - {block} <= names <= listed for names in sets), sets
    assert any("out of the camera's view" in line for line in probe.lines()), probe.lines()
