"""The shipped grasping policies in a real ROS 2 graph (rclpy, DDS on loopback, a private domain),
every node in its own process as deployed: the sim node, and the controller node with
``backend: rl`` (the shipped policies, the MPC elsewhere). A probe here publishes reward plans as
the planner node does and reads the controller's status and the sim's object poses:

* a place plan ("put the cyan block in the green bowl") runs the distilled place policy and
  leaves the block in the bowl;
* a lift plan runs the distilled lift policy; "higher", routed by the correction router as the
  conductor routes it (rules, no LLM), edits the running spec and the block goes 2 cm higher.

The controller runs in its own process here: in-process beside the probe's executor the
test's interpreter held the GIL at 100 % and the controller saw stale joint states.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402
from waiting import wait_for  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.paths import share_dir  # noqa: E402
from lang2policy.planning.correcting import CorrectionRouter  # noqa: E402
from lang2policy.rewards.spec import RewardSpec, validate_spec  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 97) % 200
OBJECTS = ("green bowl", "cyan block", "blue block", "yellow block", "orange block")  # seed 0
POLICIES = [share_dir() / "models" / f"rl-{name}-distilled-so101" for name in ("lift", "place")]


def node(module: str, arguments: list[str], env: dict) -> subprocess.Popen:
    command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(2)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


class Probe:
    """Publishes reward specs; keeps the controller's statuses and the objects' positions."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("rl_grasp_probe", context=context)
        self.lock = threading.Lock()
        self.statuses: list[dict] = []
        self.poses: dict[str, np.ndarray] = {}
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.node.create_subscription(MarkerArray, topics.OBJECTS.name, self._on_objects, 10)
        self.spec_pub = self.node.create_publisher(String, topics.REWARD_SPEC.name, 10)

    def _on_status(self, msg: String) -> None:
        status = json.loads(msg.data)
        if status.get("node") == "controller":
            with self.lock:
                self.statuses.append(status)

    def _on_objects(self, msg: MarkerArray) -> None:
        poses = convert.objects_from_markers(msg)
        with self.lock:
            self.poses = {name: np.asarray(o.position, float) for name, o in poses.items()}

    def position(self, name: str) -> np.ndarray:
        with self.lock:
            return self.poses[name].copy()

    def publish(self, payload: str) -> None:
        wait_for(self.spec_pub.get_subscription_count, 30, "the controller's spec subscription")
        self.spec_pub.publish(String(data=payload))

    def status(self, predicate, timeout: float, what: str) -> dict:
        """The first status from now on that satisfies ``predicate``."""
        with self.lock:
            start = len(self.statuses)

        def find():
            with self.lock:
                return next((s for s in self.statuses[start:] if predicate(s)), None)

        return wait_for(find, timeout, what, poll=0.05)


def grasp_spec(task: str, block: str, goal: dict, hold: float, duration: float) -> RewardSpec:
    """A lift or place plan as the Language-to-Rewards planner writes one."""
    below = 0.025 if goal["term"] == "object_on" else 0.02
    return validate_spec({
        "task": task, "duration": duration,
        "terms": [{"term": "reach", "weight": 1.0, "params": {"object": block}},
                  {"term": "grasp", "weight": 0.3, "params": {"object": block, "radius": 0.01}},
                  {"term": "grasp_align", "weight": 0.1, "params": {"object": block}},
                  {"term": "tool_pointing_down", "weight": 0.05}, goal],
        "success": {"all": [{"term": goal["id"], "below": below}], "hold": hold},
    }, OBJECTS).spec


@pytest.fixture(scope="module")
def graph():
    missing = [str(p) for p in POLICIES if not (p / "policy.json").is_file()]
    if missing:
        pytest.skip(f"no shipped policy at {missing} (lang2policy train distill)")
    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN_ID), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    processes = [
        node("sim_node", ["-p", "camera_rate:=0", "-p", "seed:=0",
                          "-p", "objects_topic:=/lang2policy/objects",
                          "-r", "/arm_controller/joint_trajectory:=/lang2policy/joint_command"],
             env),
        node("controller_node", ["-p", "backend:=rl",
                                 "-p", f"rl_policies:={','.join(str(p) for p in POLICIES)}",
                                 "-p", "threads:=1"], env),
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe.node)
        done = threading.Event()
        spinner = threading.Thread(
            target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(done.is_set, True)],
            daemon=True)
        spinner.start()
        try:
            wait_for(lambda: set(OBJECTS) <= set(probe.poses), 60, "the sim's objects")
            probe.status(lambda s: s.get("stats", {}).get("objects"), 60, "objects known")
            yield probe
        finally:
            done.set()
            spinner.join(timeout=10)
            executor.shutdown()
            probe.node.destroy_node()
            rclpy.shutdown(context=context)
            for process in processes:
                stop(process)


def run_until_end(probe: Probe, spec: RewardSpec, backend: str, timeout: float) -> dict:
    """Publish ``spec``; check the controller runs it on ``backend``; its final status."""
    probe.publish(spec.to_json())
    running = probe.status(lambda s: s["state"] == "running" and s["stats"]["iterations"],
                           30, "a running status after a planning pass")
    assert running["stats"]["backend"] == backend, json.dumps(running)
    return probe.status(lambda s: s["state"] in ("success", "failed", "timeout"), timeout,
                        "the end of the task")


def test_a_place_plan_puts_the_block_in_the_bowl_with_the_distilled_policy(graph):
    probe = graph
    block, bowl = "cyan block", "green bowl"
    on = {"id": "on", "term": "object_on", "weight": 3.0,
          "params": {"object": block, "target": bowl, "offset": 0.02}}
    done = run_until_end(probe, grasp_spec(f"put the {block} in the {bowl}", block, on, 0.5, 20),
                         "rl:place", 40)
    assert done["state"] == "success", json.dumps(done)
    off = probe.position(block)[:2] - probe.position(bowl)[:2]
    print(f"place: success; the {block} rests {1000 * np.linalg.norm(off):.0f} mm from the "
          f"{bowl}'s centre")
    assert np.linalg.norm(off) < 0.03


def test_a_lift_plan_lifts_the_block_and_higher_raises_it(graph):
    probe = graph
    block = "yellow block"
    rest = probe.position(block)[2]
    lift = {"id": "lift", "term": "object_height", "weight": 3.0,
            "params": {"object": block, "height": 0.06}}
    spec = grasp_spec(f"lift the {block} 6 cm", block, lift, hold=30.0, duration=60)
    probe.publish(spec.to_json())  # a long hold keeps the task running for the edit
    running = probe.status(lambda s: s["state"] == "running" and s["stats"]["iterations"],
                           30, "a running status after a planning pass")
    assert running["stats"]["backend"] == "rl:lift", json.dumps(running)
    wait_for(lambda: probe.position(block)[2] - rest > 0.05, 30, "the block 6 cm up")
    routed = CorrectionRouter(None).route("higher", list(OBJECTS), instruction="lift",
                                          spec=spec)
    assert routed.action == "edit_spec", routed.as_dict()
    edited = next(t for t in routed.spec.terms if t.term == "object_height")
    assert edited.params["height"] == pytest.approx(0.08)
    probe.publish(routed.spec.to_json())
    wait_for(lambda: probe.position(block)[2] - rest > 0.072, 20, "the block 8 cm up")
    lifted = probe.position(block)[2] - rest
    print(f"lift: the {block} 6 cm up, then {100 * lifted:.1f} cm up after 'higher'")
    assert abs(lifted - 0.08) < 0.02
    probe.publish("null")  # cancel: the arm holds
    probe.status(lambda s: s["state"] == "cancelled", 10, "cancelled")
