"""Nodes of the graph as processes (one process per node, as deployed) and a probe of the
controller node's topics, shared by the graph tests (controller, RL backend, RL grasp, reward
outcome). Needs rclpy: import it after ``pytest.importorskip("rclpy")``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading

import mujoco
import numpy as np
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.graph import topics
from lang2policy.ros import convert
from lang2policy.scene.world import World
from support.waiting import wait_for

OBJECTS = "red block,blue block,blue bowl,green bowl"  # the scene the fixture was recorded on


def sim_process(env: dict, extra: list[str]) -> subprocess.Popen:
    """The sim node as deployed: its own process (physics must not share a GIL with us)."""
    command = [
        sys.executable,
        "-m",
        "lang2policy.ros.sim_node",
        "--ros-args",
        "-p",
        "camera_rate:=0",
        "-p",
        "seed:=1",
        "-p",
        f"objects:={OBJECTS}",
        *extra,
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def node_process(env: dict, module: str, arguments: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_process(process: subprocess.Popen) -> None:
    process.send_signal(2)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


class ToolFK:
    """Tool centre from measured joint positions (the reward terms' 'tool' point)."""

    def __init__(self) -> None:
        self.world = World("so101")
        self.offset = np.array(self.world.description.grasp.center_offset)

    def __call__(self, joints: dict[str, float]) -> np.ndarray:
        w = self.world
        w.data.qpos[w.arm.qpos_adr] = [joints[n] for n in w.arm.joint_names]
        mujoco.mj_kinematics(w.model, w.data)
        site = w.arm.ee_site_id
        return w.data.site_xpos[site] + w.data.site_xmat[site].reshape(3, 3) @ self.offset


class Probe:
    """Publishes specs; records statuses, joint states, objects and commands."""

    def __init__(self, context) -> None:

        self.node = rclpy.create_node("controller_probe", context=context)
        self.lock = threading.Lock()
        self.statuses: list[dict] = []
        self.joints: dict[str, float] = {}
        self.objects: list[str] = []
        self.commands = 0
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_joints, 10)
        self.node.create_subscription(MarkerArray, topics.OBJECTS.name, self._on_objects, 10)
        self.node.create_subscription(
            JointTrajectory, topics.JOINT_COMMAND.name, self._on_command, 10
        )
        self.spec_pub = self.node.create_publisher(String, topics.REWARD_SPEC.name, 10)

    def _on_status(self, msg: String) -> None:
        with self.lock:
            self.statuses.append(json.loads(msg.data))

    def _on_joints(self, msg: JointState) -> None:
        with self.lock:
            self.joints = dict(zip(msg.name, msg.position, strict=True))

    def _on_objects(self, msg: MarkerArray) -> None:
        with self.lock:
            self.objects = list(convert.objects_from_markers(msg))

    def _on_command(self, _msg: JointTrajectory) -> None:
        with self.lock:
            self.commands += 1

    def send(self, payload: object) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        wait_for(self.spec_pub.get_subscription_count, 10, "the controller's spec subscription")
        self.spec_pub.publish(String(data=text))

    def status(self, predicate, timeout: float, what: str) -> dict:
        """The first status (received from now on) that satisfies ``predicate``."""
        with self.lock:
            start = len(self.statuses)

        def find():
            with self.lock:
                return next((s for s in self.statuses[start:] if predicate(s)), None)

        return wait_for(find, timeout, what)


class SimProcess:
    """The sim node in its own process, as deployed (one process per node): in one process
    with the controller, the GIL would be shared by the physics, the executor and the planner
    thread, which is not how the graph runs."""

    def __init__(self, env: dict) -> None:
        from lang2policy.scene.world import World

        self.objects = World("so101").reset(0)  # what the sim node draws for seed 0
        command = [
            sys.executable,
            "-m",
            "lang2policy.ros.sim_node",
            "--ros-args",
            "-p",
            "camera_rate:=0",
            "-p",
            "seed:=0",
            "-p",
            "objects_topic:=/lang2policy/objects",  # ground truth, no perception
            "-r",
            f"{topics.TRAJECTORY.name}:={topics.JOINT_COMMAND.name}",
        ]
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
