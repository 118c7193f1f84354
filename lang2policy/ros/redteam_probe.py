"""The attacker of ``lang2policy bench redteam``: hostile command streams, judged by the arm.

``python -m lang2policy.ros.redteam_probe PLAN_JSON`` joins the graph of its ``ROS_DOMAIN_ID``
(a robot node and the safety node, started by the bench) as a faulty or hostile commander
would, runs one scenario and prints one JSON line of what the *arm* did (measured joint states,
the tool point and the gripper's geometry by forward kinematics; ``bench.redteam_metrics``):

* ``reverse`` -- one-point commands at ``rate`` Hz, each within the speed cap, reversing at
  random on every joint (a VLA fed erratic targets by a remote policy sends exactly this);
* ``cap_stream`` -- shoulder_pan back and forth at the cap for ``duration`` s, 50 Hz: how far
  the arm trails the stream (s);
* ``keep_out`` -- a plan keep-out zone on ``/lang2policy/plan_zones``, then a stream that
  heads the gripper into it: how deep the gripper's geometry got in, the safety node's cuts;
* ``kill`` -- a commander process streaming at ``rate`` Hz toward a far target, killed
  (SIGKILL) at speed, or the safety node (``pid``) killed instead: when the arm was still and
  how far it moved after.
With ``role: commander`` it is that commander process itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from lang2policy.bench import redteam_metrics as metrics
from lang2policy.control.gripper_hull import GripperHull
from lang2policy.control.kinematics import Kinematics
from lang2policy.graph import topics
from lang2policy.ros import convert
from lang2policy.ros.qos import LATCHED
from lang2policy.safety import load_safety_config, tool_point_function
from lang2policy.safety.plan_zones import encode_plan_zones
from lang2policy.scene.arm import arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.robot_description import load_robot_description

ROBOT = "so101"


def say(text: str) -> None:
    print(f"[redteam] {text}", file=sys.stderr, flush=True)


class Geometry:
    """Forward kinematics of the SO-101 in the world frame: the tool point, the gripper."""

    def __init__(self) -> None:
        description = load_robot_description(ROBOT)
        model = compile_scene(build_scene(description, []))
        self.arm = arm_layout(model, description)
        self.tool = tool_point_function(Kinematics(model, description, self.arm))
        self.hull = GripperHull(Kinematics(model, description, self.arm))
        self.corners = self.hull.corners((0.0, 1.0))

    def gripper(self, q: np.ndarray) -> np.ndarray:
        return np.vstack([self.hull.at(q, self.corners), self.tool(q)[None, :]])


class Probe:
    """Records joint states and safety statuses; publishes commands and plan zones."""

    def __init__(self) -> None:
        rclpy.init()
        self.node = rclpy.create_node("redteam_probe")
        self.lock = threading.Lock()
        self.states: list[tuple[float, dict, dict]] = []  # (stamp, positions, velocities)
        self.statuses: list[dict] = []
        self.command = self.node.create_publisher(JointTrajectory, topics.JOINT_COMMAND.name, 10)
        self.zones = self.node.create_publisher(String, topics.PLAN_ZONES.name, LATCHED)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 50)
        self.node.create_subscription(String, topics.SAFETY.name, self._on_safety, 10)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def _on_state(self, msg: JointState) -> None:
        stamp = convert.to_seconds(msg.header.stamp)
        positions = dict(zip(msg.name, msg.position, strict=False))
        velocities = dict(zip(msg.name, msg.velocity, strict=False))
        with self.lock:
            self.states.append((stamp, positions, velocities))

    def _on_safety(self, msg: String) -> None:
        with self.lock:
            self.statuses.append(json.loads(msg.data))

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
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown()


# ---------------------------------------------------------------------- scenarios
def _sleep_until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


def reverse(probe: Probe, geo: Geometry, plan: dict) -> dict:
    """Random reversals within the cap on every arm joint, tool kept above the table."""
    config = load_safety_config(ROBOT)
    names = list(geo.arm.action_names)
    arm_names = names[:-1]
    stamp, positions, _ = probe.latest()
    target = np.array([positions[n] for n in names])
    rate, cap = float(plan["rate"]), config.max_joint_speed
    rng = np.random.default_rng(int(plan.get("seed", 0)))
    lower, upper = geo.arm.lower + 0.1, geo.arm.upper - 0.1
    next_at = time.monotonic()
    end = next_at + float(plan["duration"])
    while time.monotonic() < end:
        for _ in range(50):
            step = target.copy()
            step[:-1] += rng.choice([-1.0, 1.0], size=len(arm_names)) * cap / rate
            step[:-1] = np.clip(step[:-1], lower, upper)
            if geo.tool(step[:-1])[2] > 0.08:
                target = step
                break
        probe.send(names, target, 1.0 / rate)
        next_at += 1.0 / rate
        _sleep_until(next_at)
    time.sleep(0.5)
    rec = probe.recording(arm_names, stamp + 0.5)
    box = config.workspace
    return {
        "peak_joint_speed": metrics.peak_joint_speed(rec),
        "peak_tool_speed": metrics.peak_tool_speed(rec, geo.tool),
        "workspace_excursion": metrics.workspace_excursion(rec, geo.tool, box.min, box.max),
        "cap": cap,
        "states": len(rec.stamps),
    }


def cap_stream(probe: Probe, geo: Geometry, plan: dict) -> dict:
    """shoulder_pan back and forth at the cap (one-point commands at 50 Hz): the arm's lag."""
    config = load_safety_config(ROBOT)
    names = list(geo.arm.action_names)
    stamp, positions, _ = probe.latest()
    base = np.array([positions[n] for n in names])
    period, cap, swing = 0.02, config.max_joint_speed, float(plan.get("swing", 0.6))
    times, sent = [], []
    pan, direction = base[0], 1.0
    next_at = time.monotonic()
    end = next_at + float(plan["duration"])
    while time.monotonic() < end:
        pan += direction * cap * period
        if abs(pan - base[0]) >= swing:
            direction = -direction
        target = base.copy()
        target[0] = pan
        probe.send(names, target, period)
        times.append(probe.latest()[0] + period)  # when the stream asks to be there
        sent.append(pan)
        next_at += period
        _sleep_until(next_at)
    time.sleep(0.5)
    rec = probe.recording(names[:-1], stamp)
    lags = []
    times_a, sent_a = np.array(times), np.array(sent)
    window = 5.0  # s per lag estimate, so a lag that grew during the run shows
    start = times_a[0]
    while start + window <= times_a[-1] + 1e-9:
        keep = (times_a >= start) & (times_a < start + window)
        lags.append(metrics.lag(times_a[keep], sent_a[keep], rec, 0))
        start += window
    return {
        "lag_first": lags[0] if lags else None,
        "lag_max": max(lags) if lags else None,
        "lags": lags,
        "duration": float(plan["duration"]),
        "peak_joint_speed": metrics.peak_joint_speed(rec),
    }


def _go_to_pan(probe: Probe, names: list[str], pan: float) -> None:
    """Bring shoulder_pan to ``pan`` at 0.8 rad/s (10 Hz commands), then let it settle."""
    target = np.array([probe.latest()[1][n] for n in names])
    next_at = time.monotonic()
    while abs(target[0] - pan) > 1e-9:
        target[0] += float(np.clip(pan - target[0], -0.08, 0.08))
        probe.send(names, target, 0.1)
        next_at += 0.1
        _sleep_until(next_at)
    time.sleep(1.0)


def keep_out(probe: Probe, geo: Geometry, plan: dict) -> dict:
    """A plan zone ahead of the gripper on a shoulder_pan sweep; the sweep heads into it."""
    names = list(geo.arm.action_names)
    _go_to_pan(probe, names, 0.0)
    stamp, positions, _ = probe.latest()
    base = np.array([positions[n] for n in names])
    ahead = base[:-1].copy()
    ahead[0] += float(plan.get("pan", 0.6))
    centre = geo.tool(ahead)
    half = 0.03
    zone = {"lower": (centre - half).tolist(), "upper": (centre + half).tolist()}

    class Box:
        min, max = tuple(zone["lower"]), tuple(zone["upper"])

    probe.zones.publish(String(data=encode_plan_zones("redteam", {"redteam_zone": Box})))
    time.sleep(1.0)
    with probe.lock:
        before = probe.statuses[-1]["detail"].get("cuts", {}).get("keep_out", 0)
    period = 0.1
    target = base.copy()
    end = time.monotonic() + float(plan.get("duration", 4.0))
    next_at = time.monotonic()
    while time.monotonic() < end:  # a VLA-like 10 Hz stream sweeping through the zone
        target[0] = min(target[0] + 0.1, base[0] + 1.2)
        probe.send(names, target, period)
        next_at += period
        _sleep_until(next_at)
    time.sleep(0.5)
    rec = probe.recording(names[:-1], stamp)
    with probe.lock:
        after = probe.statuses[-1]["detail"].get("cuts", {}).get("keep_out", 0)
        violation = probe.statuses[-1]["detail"].get("last_violation")
    probe.zones.publish(String(data=encode_plan_zones(None, {})))
    time.sleep(0.3)
    return {
        "zone_depth": metrics.zone_depth(rec, geo.gripper, zone["lower"], zone["upper"]),
        "keep_out_cuts": after - before,
        "last_violation": violation,
        "pan_reached": float(rec.positions[-1, 0] - base[0]) if len(rec.stamps) else None,
        "zone": zone,
    }


def kill(probe: Probe, geo: Geometry, plan: dict) -> dict:
    """A commander streaming at ``rate`` Hz killed at speed (or the safety node, ``pid``)."""
    names = list(geo.arm.action_names)
    positions = probe.latest()[1]
    command = {
        "role": "commander",
        "rate": plan["rate"],
        "names": names,
        "base": [positions[n] for n in names],
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "lang2policy.ros.redteam_probe", json.dumps(command)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            if abs(probe.latest()[2].get("shoulder_pan", 0.0)) > 1.0:
                break
            time.sleep(0.005)
        else:
            raise SystemExit("the commander never moved the arm at speed")
        victim = int(plan["pid"]) if plan.get("victim") == "safety" else child.pid
        t_kill = probe.latest()[0]
        speed = abs(probe.latest()[2]["shoulder_pan"])
        os.kill(victim, signal.SIGKILL)
        time.sleep(2.0)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)
    rec = probe.recording(names[:-1], t_kill)
    report = metrics.stop_after(rec, t_kill, float(plan.get("bound", 0.3)))
    return {
        "victim": plan.get("victim", "commander"),
        "speed_at_kill": speed,
        "still_after": report.still_after,
        "moved_after_bound": report.moved_after_bound,
        "moved_after_kill": report.moved_after_kill,
    }


def commander(probe: Probe, plan: dict) -> None:
    """Stream shoulder_pan toward +-1.4 rad at the cap, one point per period, until killed."""
    names = list(plan["names"])
    target = np.array(plan["base"], float)
    rate = float(plan["rate"])
    goal = -1.4 if target[0] > 0.0 else 1.4  # the far side: room to reach full speed
    step = np.sign(goal - target[0]) * 1.5 / rate
    next_at = time.monotonic()
    while True:
        target[0] = float(np.clip(target[0] + step, -1.4, 1.4))
        probe.send(names, target, 1.0 / rate)
        next_at += 1.0 / rate
        _sleep_until(next_at)


SCENARIOS = {"reverse": reverse, "cap_stream": cap_stream, "keep_out": keep_out, "kill": kill}


def main(argv: list[str] | None = None) -> int:
    plan = json.loads((argv or sys.argv[1:])[0])
    probe = Probe()
    try:
        if plan.get("role") == "commander":
            commander(probe, plan)
            return 0
        geo = Geometry()
        probe.latest()
        probe.wait_safety_ready()
        result = SCENARIOS[plan["scenario"]](probe, geo, plan)
        print(json.dumps({"scenario": plan["scenario"], **result}), flush=True)
        return 0
    finally:
        probe.close()


if __name__ == "__main__":
    raise SystemExit(main())
