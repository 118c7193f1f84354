"""A VLA skill whose command the safety node cut at a keep-out zone ends ``stopped: keep-out``.

The safety node's status lines (``/lang2policy/safety``) count its cuts since it started
(``detail.cuts``) and say the last violation. The lines here are built as the safety node
builds them (a ``StatusEvent`` of node ``safety``, sent as JSON and decoded as the VLA node
decodes it). First ``KeepOutWatch`` alone, then the real VLA node in rclpy (the policy backend
faked: the skill never needs to act) hearing them on the topic while a skill runs.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from lang2policy.graph.topics import SAFETY_NODE, StatusEvent
from lang2policy.vla.skill.keep_out_watch import KeepOutWatch, keep_out_cuts
from lang2policy.wire_json import decode_status

VIOLATION = (
    "keep-out: the tool point would enter keep-out zone 'person_side' (min [-1.000, 0.100, "
    "-0.100], max [1.500, 1.500, 1.500]) at [0.220, 0.104, 0.080]; the command was cut there"
)
WORKSPACE = "workspace: the tool point would leave the workspace box at [0.600, 0.0, 0.1]"


def safety_text(keep_out: int | None, workspace: int = 0, violation: str = "") -> str:
    """A safety status line as the safety node publishes it (``cuts`` None: an older node)."""
    detail = {"passed": 10, "clipped": 1, "rejected": 0, "blocked": 0,
              "last_violation": violation, "robot": "so101"}  # fmt: skip
    if keep_out is not None:
        detail["cuts"] = {"keep_out": keep_out, "workspace": workspace}
    extra = {"reason": "", "robot_time": 12.5}
    return json.dumps(StatusEvent(SAFETY_NODE, "ok", "", detail, extra).to_dict())


def line(*args, **kwargs) -> dict:
    return decode_status(safety_text(*args, **kwargs))


def test_a_keep_out_cut_during_the_skill_ends_it_with_the_safety_nodes_words():
    watch = KeepOutWatch()
    assert watch.heard(line(2, violation=VIOLATION)) == ""  # before the skill: not its cuts
    watch.arm()
    assert watch.heard(line(2, violation=VIOLATION)) == ""  # the same count: nothing new
    assert watch.heard(line(2, workspace=4, violation=WORKSPACE)) == ""  # not a zone
    assert watch.heard(line(None, violation=VIOLATION)) == ""  # an older safety node
    assert watch.heard(line(3, violation=VIOLATION)) == VIOLATION  # starts "keep-out: ..."
    assert watch.heard(line(3, violation=VIOLATION)) == ""  # said once
    later = watch.heard(line(5, workspace=5, violation=WORKSPACE))
    assert later.startswith("keep-out: the safety node cut 2 commands at a keep-out zone")
    assert WORKSPACE in later
    watch.disarm()
    assert watch.heard(line(9, violation=VIOLATION)) == ""  # no skill runs


def test_counts_are_read_gracefully():
    assert keep_out_cuts(line(None)) is None
    assert keep_out_cuts(line(7)) == 7
    assert keep_out_cuts({"state": "ok", "detail": "text"}) is None
    for bad in (True, -1, 1.5, "3", None):
        assert keep_out_cuts({"detail": {"cuts": {"keep_out": bad}}}) is None
    watch = KeepOutWatch()
    watch.arm()  # no count heard yet: the first one is the skill's baseline
    assert watch.heard(line(4)) == ""
    assert watch.heard(line(0)) == ""  # the safety node restarted: counts from 0 again
    assert watch.heard(line(1, violation=VIOLATION)) == VIOLATION


# ------------------------------------------------------------------ the VLA node on the graph
DOMAIN_ID = 1 + (os.getpid() + 179) % 200


@pytest.fixture()
def vla_graph():
    """The VLA node (fake policy backend) and a probe node in one private rclpy context."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter
    from std_msgs.msg import String
    from support.ros import ros_env, spinning
    from support.vla_node import FakeBackend
    from trajectory_msgs.msg import JointTrajectory
    from visualization_msgs.msg import MarkerArray

    from lang2policy.graph import topics
    from lang2policy.ros.vla_node import VLANode
    from lang2policy.vla.skill.actor import EnsembledActor

    class FakeBackendVLANode(VLANode):
        def _actor(self) -> EnsembledActor:
            return EnsembledActor(FakeBackend())

    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env(DOMAIN_ID).items():
            mp.setenv(key, value)
        context = rclpy.Context()
        rclpy.init(context=context)
        node = FakeBackendVLANode(
            context=context,
            parameter_overrides=[Parameter("startup_grace", value=30.0)],  # waits: no holding
        )
        probe = rclpy.create_node("keep_out_probe", context=context)
        seen = {"status": [], "commands": []}
        lock = threading.Lock()

        def record(kind, value):
            with lock:
                seen[kind].append(value)

        probe.create_subscription(
            String, topics.STATUS.name, lambda m: record("status", json.loads(m.data)), 50
        )
        probe.create_subscription(
            JointTrajectory, topics.JOINT_COMMAND.name, lambda m: record("commands", m), 50
        )
        publishers = {
            t.name: probe.create_publisher(String, t.name, 10)
            for t in (topics.SKILL, topics.SAFETY)
        }
        objects = probe.create_publisher(MarkerArray, topics.OBJECTS.name, 10)

        def publish(topic: str, text: str) -> None:
            publishers[topic].publish(String(data=text))

        with spinning(context, [node, probe]):
            yield node, probe, publish, objects, seen, lock


@pytest.mark.ros
def test_the_vla_node_stops_a_skill_cut_at_a_keep_out_zone_and_holds(vla_graph):
    from support.waiting import wait_for

    from lang2policy.graph import topics
    from lang2policy.ros import convert

    node, probe, publish, objects, seen, lock = vla_graph
    for topic in (topics.SKILL.name, topics.SAFETY.name, topics.OBJECTS.name):
        wait_for(lambda t=topic: probe.count_subscribers(t) > 0, 10, f"the node on {topic}")
    scene = [convert.ObjectPose("red block", (0.22, 0.07, 0.0125), kind="block"),
             convert.ObjectPose("blue bowl", (0.25, -0.08, 0.0), kind="bowl")]  # fmt: skip
    objects.publish(convert.object_markers(scene, 0.0))
    wait_for(lambda: node._objects is not None, 10, "the objects")
    publish(topics.SAFETY.name, safety_text(4, violation=VIOLATION))  # cuts of earlier motions
    wait_for(lambda: node.keep_out.latest == 4, 10, "the safety node's count")

    def vla_states() -> list[str]:
        with lock:
            return [s["state"] for s in seen["status"] if s.get("node") == "vla"]

    publish(topics.SKILL.name, json.dumps({"skill": "lift the red block", "plan_id": "plan-7"}))
    wait_for(lambda: "running" in vla_states(), 10, "the skill to run")
    publish(topics.SAFETY.name, safety_text(4, workspace=2, violation=WORKSPACE))
    publish(topics.SAFETY.name, safety_text(None, violation=VIOLATION))
    wait_for(lambda: node.keep_out.latest == 4 and node.safety_state == "ok", 10, "the lines")
    threading.Event().wait(0.3)
    assert node.runner is not None and vla_states()[-1] == "running"  # those end nothing
    with lock:
        commands_before = len(seen["commands"])

    publish(topics.SAFETY.name, safety_text(5, violation=VIOLATION))
    wait_for(lambda: "stopped" in vla_states(), 10, "the skill to stop")
    with lock:
        stopped = next(s for s in seen["status"] if s.get("state") == "stopped")
    assert stopped["detail"]["reason"] == VIOLATION  # "keep-out: ..."
    assert stopped["plan_id"] == "plan-7" and stopped["detail"]["plan_id"] == "plan-7"
    assert stopped["instruction"] == "lift the red block" and "stats" in stopped
    assert node.runner is None
    wait_for(lambda: _holds_since(seen, lock, commands_before), 5, "a hold for the safety node")


def _holds_since(seen: dict, lock: threading.Lock, index: int) -> list:
    with lock:
        return [m for m in seen["commands"][index:] if not m.points]
