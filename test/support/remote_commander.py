"""A commander on another host, for the two-host test: streams shoulder_pan from where it is
by ``--by`` rad (toward 0 rad: away from a joint limit) in 0.1 s chunks on ``joint_command``
(as the MPC controller does), then prints one JSON line: how many joint states it saw,
shoulder_pan before and after, and the safety node's last state. Run it as
``python -m support.remote_commander`` with the ROS environment of its host (domain,
discovery range, static peers)."""

from __future__ import annotations

import argparse
import json
import threading
import time

import rclpy
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

POINTS, DT, SPEED = 5, 0.02, 0.5  # chunk points, their spacing (s), shoulder_pan rad/s


class Commander:
    def __init__(self, node) -> None:
        self.lock = threading.Lock()
        self.state: dict[str, float] = {}
        self.count = 0
        self.safety: dict = {}
        node.create_subscription(JointState, "joint_states", self._on_state, 50)
        node.create_subscription(String, "lang2policy/safety", self._on_safety, 10)
        self.publisher = node.create_publisher(JointTrajectory, "lang2policy/joint_command", 10)

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            self.state = dict(zip(msg.name, msg.position, strict=True))
            self.count += 1

    def _on_safety(self, msg: String) -> None:
        with self.lock:
            self.safety = json.loads(msg.data)

    def chunk(self, held: dict[str, float], pan: float) -> JointTrajectory:
        msg = JointTrajectory(joint_names=list(held))
        for k in range(1, POINTS + 1):
            values = [pan if name == "shoulder_pan" else held[name] for name in held]
            point = JointTrajectoryPoint(positions=[float(v) for v in values])
            point.time_from_start = Duration(nanosec=round(k * DT * 1e9))
            msg.points.append(point)
        return msg

    def drive(self, by: float, seconds: float) -> None:
        """Stream ``by`` rad from the state seen now, for ``seconds`` of wall time."""
        with self.lock:
            held = dict(self.state)
        start, began = held["shoulder_pan"], time.monotonic()
        target = start - by if start > 0 else start + by
        step = SPEED if target >= start else -SPEED
        while time.monotonic() - began < seconds:
            pan = start + step * (time.monotonic() - began + 0.1)
            pan = min(pan, target) if step > 0 else max(pan, target)
            self.publisher.publish(self.chunk(held, pan))
            time.sleep(DT)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--by", type=float, default=0.6)
    parser.add_argument("--wait", type=float, default=30.0, help="s to wait for the arm")
    parser.add_argument("--drive", type=float, default=4.0, help="s to stream the motion")
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("remote_commander")
    commander = Commander(node)
    running = threading.Event()
    running.set()

    def spin() -> None:
        while running.is_set():
            rclpy.spin_once(node, timeout_sec=0.1)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline and commander.safety.get("state") != "ok":
        time.sleep(0.1)
    report = {"safety": commander.safety.get("state")}
    if report["safety"] == "ok" and commander.state:
        report["pan_before"] = commander.state["shoulder_pan"]
        commander.drive(args.by, args.drive)
        time.sleep(1.0)
        report["pan_after"] = commander.state["shoulder_pan"]
    report["seen_states"] = commander.count  # all the while, the drive included
    print(json.dumps(report), flush=True)
    running.clear()
    spinner.join()
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
