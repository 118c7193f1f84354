"""The full graph on the SO-101 serial driver, against the emulated arm: pick and place.

``lang2policy sim --robot so101-hw --emulate --port <pty link>`` is started as a user would
(every node its own process): the emulator node serves the STS3215 protocol on a pty with the
MuJoCo SO-101 and the table behind it, the driver node talks to it over the byte protocol, and
perception, safety, controller and planner run unchanged. This test only speaks ROS: it sends
the instruction and judges the outcome from the emulator's ground truth (``/sim/objects``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from support.launcher import Run
from support.ros import ros_env, spinning
from support.waiting import wait_for

rclpy = pytest.importorskip("rclpy")

from std_msgs.msg import String  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = pytest.mark.ros

# The planner's LLM exchange for this scene, recorded from the local model (gemma-3-270m); to
# record it again: L2P_RECORD_LLM=1 pytest test/ros/test_so101_graph.py
FIXTURE = Path(__file__).parents[1] / "fixtures" / "llm" / "so101_graph.jsonl"
LLM_MODE = "record" if os.environ.get("L2P_RECORD_LLM") == "1" else "replay"
OBJECTS = "red block,blue block,blue bowl,green bowl"
DOMAIN_ID = 1 + (os.getpid() + 171) % 200
INSTRUCTION = "put the red block in the blue bowl"


def so101_graph(tmp_path: Path) -> Run:
    """``lang2policy sim --robot so101-hw --emulate``, its port link in ``tmp_path``."""
    return Run(
        *("--robot", "so101-hw", "--emulate", "--port", str(tmp_path / "so101")),
        *("--seed", "1", "--objects", OBJECTS, "--headless"),
        *("--llm", f"{LLM_MODE}:{FIXTURE}", "--route", "code", "--grounding", "off"),
        domain_id=DOMAIN_ID,
        extra_env={"HOME": str(tmp_path)},  # no corrections memory from a user
    )


def test_pick_and_place_on_the_so101_driver_against_the_emulated_arm(tmp_path, monkeypatch):
    for key, value in ros_env(DOMAIN_ID).items():
        monkeypatch.setenv(key, value)
    graph = so101_graph(tmp_path)
    port = tmp_path / "so101"
    context = rclpy.Context()
    rclpy.init(context=context)
    statuses: list[dict] = []
    objects: dict = {}
    try:
        node = rclpy.create_node("so101_graph_probe", context=context)
        node.create_subscription(
            String, topics.STATUS.name, lambda m: statuses.append(json.loads(m.data)), 50
        )
        truth = lambda m: objects.update(convert.objects_from_markers(m))  # noqa: E731
        node.create_subscription(MarkerArray, topics.SIM_OBJECTS.name, truth, 10)
        instruction = node.create_publisher(String, topics.INSTRUCTION.name, 10)
        with spinning(context, [node]):
            wait_for(lambda: objects or not graph.alive(), 90, "the emulated table's objects")
            assert graph.alive(), graph.output
            graph.wait_for_text("servos [1, 2, 3, 4, 5, 6] answer, torque on", 60)
            assert port.is_symlink()  # the driver talks to the emulator through the pty
            wait_for(instruction.get_subscription_count, 60, "the planner's subscription")
            instruction.publish(String(data=INSTRUCTION))

            def outcome():
                assert graph.alive(), graph.output[-3000:]
                return next(
                    (s for s in statuses if s.get("state") in ("done", "failed", "rejected")),
                    None,
                )

            done = wait_for(outcome, 240, "the outcome of the instruction")
            red, bowl = objects["red block"].position, objects["blue bowl"].position
            where = {n: np.round(o.position, 3).tolist() for n, o in objects.items()}
        assert done["state"] == "done", (done, graph.output[-3000:])
        assert "red block in blue bowl" in done["detail"]["relations"], (done, where)
        assert np.hypot(red[0] - bowl[0], red[1] - bowl[1]) < 0.03, where  # emulator truth
        assert red[2] < 0.06, where  # let go: in the bowl, not held above it
    finally:
        rclpy.try_shutdown(context=context)  # spinning() shut it down unless setup failed
        code = graph.stop(timeout=40)
    assert code == 0, graph.output[-3000:]
    assert "torque off" in graph.output.lower() or "so101" in graph.output
    assert not port.exists()  # the emulator removed its port link
