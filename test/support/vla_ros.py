"""Shared plumbing of the VLA node's ROS tests: a probe node that sends skills and records the
VLA's statuses, commands and joint states, the nodes as processes, and the sim + safety + VLA
graph they run in (each node in its own process as deployed, on loopback)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from lang2policy.graph import topics
from lang2policy.vla.backends.local import default_model_dir
from support.ros import ros_env, spinning
from support.waiting import wait_for

CAMERA_TOPICS = ("/camera/front/image_raw", "/camera/wrist/image_raw")
# the cameras the shipped checkpoint reads: the node subscribes to these and no others
SHIPPED_CAMERAS = tuple(json.loads((default_model_dir() / "config.json").read_text())["cameras"])
START_TIMEOUT = 90.0  # s: torch and the instruction encoder load on a busy 2-core machine


class Probe:
    """Sends skills, calls stop/resume, records VLA statuses, commands and joint states."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("vla_probe", context=context)
        self.lock = threading.Lock()
        self.statuses: list[tuple[float, dict]] = []  # (wall time, VLA status line)
        self.commands: list[tuple[float, JointTrajectory]] = []  # (wall time, message)
        self.positions: list[np.ndarray] = []
        self.state_names: tuple[str, ...] = ()  # of the joint states
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.node.create_subscription(
            JointTrajectory, topics.JOINT_COMMAND.name, self._on_command, 50
        )
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 50)
        self.skill = self.node.create_publisher(String, topics.SKILL.name, 10)
        self.clients = {
            name: self.node.create_client(Trigger, name)
            for name in (topics.STOP.name, topics.RESUME.name)
        }

    def _on_status(self, msg: String) -> None:
        line = json.loads(msg.data)
        if line.get("node") == topics.VLA_NODE:
            with self.lock:
                self.statuses.append((time.monotonic(), line))

    def _on_command(self, msg: JointTrajectory) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), msg))

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            self.positions.append(np.array(msg.position))
            self.state_names = tuple(msg.name)

    def send_json(self, message: dict) -> int:
        """Publish a JSON skill-topic message; the index of the next status line."""
        return self.send(json.dumps(message))

    def send(self, text: str) -> int:
        """Publish a skill; the index of the next status line."""
        with self.lock:
            since = len(self.statuses)
        self.skill.publish(String(data=text))
        return since

    def status(self, state: str, since: int, timeout: float = 30.0) -> tuple[float, dict]:
        def find():
            with self.lock:
                return next((s for s in self.statuses[since:] if s[1]["state"] == state), None)

        def seen() -> str:
            with self.lock:
                lines = [(s["state"], s.get("detail", "")[:160]) for _, s in self.statuses[since:]]
            return f"the VLA said {lines[-6:]} since"

        return wait_for(find, timeout, f"a VLA status '{state}'", detail=seen)

    def last(self) -> dict:
        with self.lock:
            return self.statuses[-1][1]

    def mark(self) -> tuple[int, int]:
        with self.lock:
            return len(self.statuses), len(self.commands)

    def commands_since(self, index: int) -> list[tuple[float, JointTrajectory]]:
        with self.lock:
            return list(self.commands[index:])

    def call(self, service: str) -> Trigger.Response:
        client = self.clients[service]
        assert client.wait_for_service(timeout_sec=10.0), f"no {service} service"
        future = client.call_async(Trigger.Request())
        wait_for(future.done, 10.0, f"the {service} response")
        return future.result()

    def camera_subscribers(self) -> int:
        return sum(self.node.count_subscribers(topic) for topic in CAMERA_TOPICS)

    def latest_position(self) -> np.ndarray:
        with self.lock:
            return self.positions[-1]

    def drift_after_hold(self) -> float:
        """After a skill failed: wait for the safety node's hold to bring the arm to rest,
        check that no command follows, and return how far the arm drifts in the next second
        (rad, the largest joint)."""
        _, after = self.mark()
        time.sleep(0.5)
        halted = self.latest_position()
        time.sleep(1.0)
        assert self.commands_since(after) == [], "a command after the failure"
        return float(np.abs(self.latest_position() - halted).max())


class NodeProcess:
    """A node in its own process; ``pause``/``resume`` freeze it (a robot gone silent)."""

    def __init__(self, module: str, arguments: list[str]) -> None:
        command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments]
        self.process = subprocess.Popen(
            command, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextlib.contextmanager
def vla_graph(
    monkeypatch, domain: int, vla_arguments: list[str], sim_arguments: list[str] = ()
) -> Iterator[tuple[NodeProcess, NodeProcess, Probe]]:
    """The sim (front and wrist cameras at 128 px, a red block and a blue bowl), safety and
    VLA nodes (the VLA reading the sim's ground-truth objects) and a ``Probe``, on ``domain``;
    yields (sim, vla, probe) once the VLA node listens for skills."""
    for key, value in ros_env(domain).items():
        monkeypatch.setenv(key, value)
    cameras = ["-p", "cameras:=[front, wrist]", "-p", "camera_width:=128"]
    scene = [*cameras, "-p", "camera_height:=128", "-p", "objects:=red block,blue bowl"]
    sim = NodeProcess("sim_node", [*scene, *sim_arguments])
    safety = NodeProcess("safety_node", ["-p", "state_timeout:=2.0"])
    objects = ["-r", f"{topics.OBJECTS.name}:={topics.SIM_OBJECTS.name}"]
    vla = NodeProcess("vla_node", [*vla_arguments, *objects])
    context = rclpy.Context()
    rclpy.init(context=context)
    probe = Probe(context)
    try:
        with spinning(context, (probe.node,)):
            wait_for(lambda: probe.positions, 30.0, "joint states")
            wait_for(
                lambda: probe.node.count_subscribers(topics.SKILL.name) > 0,
                START_TIMEOUT,
                "the VLA node's skill subscription",
            )
            yield sim, vla, probe
    finally:
        for process in (vla, safety, sim):
            process.stop()


def skill_started(probe, skill: str) -> dict | None:
    """The 'running' line of ``skill``, once the VLA node has seen the sim's objects (before,
    it rejects the skill: no objects seen yet)."""
    since = probe.send(skill)
    state, line = wait_for(lambda: skill_answer(probe, since), 10.0, "the VLA's answer")
    return line if state == "running" else time.sleep(0.5)


def skill_answer(probe, since: int) -> tuple[str, dict] | None:
    lines = [line for _, line in probe.statuses[since:]]
    return next(((line["state"], line) for line in lines
                 if line["state"] in ("running", "rejected")), None)  # fmt: skip
