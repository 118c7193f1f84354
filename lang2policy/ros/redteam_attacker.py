"""The attacker's ROS side for ``lang2policy bench redteam``: one node that records the arm's
joint states, the safety node's and the VLA node's status lines, and sends commands, skills and
plan keep-out zones (``lang2policy.ros.redteam_probe`` runs the scenarios with it)."""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from lang2policy.graph import topics
from lang2policy.ros import convert
from lang2policy.ros.qos import LATCHED
from lang2policy.safety import effects as metrics

ROBOT = "so101"


def say(text: str) -> None:
    print(f"[redteam] {text}", file=sys.stderr, flush=True)


class Probe:
    """Records joint states and safety statuses; publishes commands and plan zones."""

    def __init__(self) -> None:
        rclpy.init()
        self.node = rclpy.create_node("redteam_probe")
        self.lock = threading.Lock()
        self.states: list[tuple[float, dict, dict]] = []  # (stamp, positions, velocities)
        self.statuses: list[dict] = []
        self.vla: list[dict] = []  # the VLA node's status lines
        self.command = self.node.create_publisher(JointTrajectory, topics.JOINT_COMMAND.name, 10)
        self.zones = self.node.create_publisher(String, topics.PLAN_ZONES.name, LATCHED)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 50)
        self.node.create_subscription(String, topics.SAFETY.name, self._on_safety, 10)
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.skill = self.node.create_publisher(String, topics.SKILL.name, 10)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._spinner = threading.Thread(target=self._spin, daemon=True)
        self._spinner.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def _on_state(self, msg: JointState) -> None:
        stamp = convert.to_seconds(msg.header.stamp)
        positions = dict(zip(msg.name, msg.position, strict=False))
        velocities = dict(zip(msg.name, msg.velocity, strict=False))
        with self.lock:
            self.states.append((stamp, positions, velocities))

    def _on_safety(self, msg: String) -> None:
        with self.lock:
            self.statuses.append(json.loads(msg.data))

    def _on_status(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("node") == "vla":
            with self.lock:
                self.vla.append(event)

    def latest(self) -> tuple[float, dict, dict]:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            with self.lock:
                if self.states:
                    return self.states[-1]
            time.sleep(0.05)
        raise SystemExit("no joint states within 60 s")

    def wait_safety_ready(self, timeout: float = 60.0) -> None:
        """Until the safety node passes commands: ``ok``, or held after a commander went
        silent (the next command that passes clears that); not stopped, not without states."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                last = self.statuses[-1] if self.statuses else None
            if last and (
                last["state"] == "ok"
                or (last["state"] == "holding" and "commander silent" in last["reason"])
            ):
                return
            time.sleep(0.05)
        raise SystemExit(f"the safety node is not passing commands after 60 s: {last}")

    def recording(self, names, since: float) -> metrics.Recording:
        with self.lock:
            rows = [s for s in self.states if s[0] >= since]
        return metrics.Recording(
            np.array([s[0] for s in rows]),
            np.array([[s[1][n] for n in names] for s in rows]).reshape(-1, len(names)),
            np.array([[s[2].get(n, 0.0) for n in names] for s in rows]).reshape(-1, len(names)),
        )

    def send(self, names, target, period: float) -> None:
        self.command.publish(convert.trajectory(names, [(period, list(target))]))

    def close(self) -> None:
        """Stop spinning (and wait for it) before tearing down: destroying the node under a
        spinning executor aborted the process ("terminate called without an active
        exception")."""
        self._stop.set()
        self._spinner.join(timeout=5.0)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown()


def sleep_until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


def go_to(probe: Probe, names: list[str], pose: dict[str, float]) -> None:
    """Bring the joints named in ``pose`` there at 0.8 rad/s (10 Hz commands), then settle."""
    target = np.array([probe.latest()[1][n] for n in names])
    goal = np.array([pose.get(n, target[i]) for i, n in enumerate(names)])
    next_at = time.monotonic()
    while np.abs(goal - target).max() > 1e-9:
        target += np.clip(goal - target, -0.08, 0.08)
        probe.send(names, target, 0.1)
        next_at += 0.1
        sleep_until(next_at)
    time.sleep(1.0)
