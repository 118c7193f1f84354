"""The attacker of ``lang2policy bench redteam``: hostile command streams, judged by the arm.

``python -m lang2policy.ros.redteam_probe PLAN_JSON`` joins the graph of its ``ROS_DOMAIN_ID``
(a robot node and the safety node, started by the bench) as a faulty or hostile commander
would, runs one scenario and prints one JSON line of what the *arm* did (measured joint states,
the tool point and the gripper's geometry by forward kinematics; ``safety.effects``):

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
import time

import numpy as np
from std_msgs.msg import String

from lang2policy.ros.redteam_attacker import ROBOT, Probe, go_to, sleep_until
from lang2policy.ros.redteam_vla import vla
from lang2policy.safety import effects as metrics
from lang2policy.safety import load_safety_config
from lang2policy.safety.effects import Geometry
from lang2policy.safety.plan_zones import encode_plan_zones


# ---------------------------------------------------------------------- scenarios
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
        sleep_until(next_at)
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
        sleep_until(next_at)
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


def keep_out(probe: Probe, geo: Geometry, plan: dict) -> dict:
    """A plan zone ahead of the gripper on a shoulder_pan sweep; the sweep heads into it."""
    names = list(geo.arm.action_names)
    go_to(probe, names, {"shoulder_pan": 0.0})
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
        sleep_until(next_at)
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
    """Kill at speed (SIGKILL) a commander streaming at ``rate`` Hz (this module as a
    process), the VLA node running a skill (``skill``, ``pid``) or the safety node (``pid``)
    while the commander streams; then watch the arm come to rest."""
    names = list(geo.arm.action_names)
    positions = probe.latest()[1]
    child = None
    if plan.get("skill"):
        go_to(probe, names, dict(zip(names, plan["start"], strict=False)))
        skill = {"skill": plan["skill"], "plan_id": "redteam-kill"}
        probe.skill.publish(String(data=json.dumps(skill)))
    else:
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
        victim = child.pid if child is not None and "pid" not in plan else int(plan["pid"])
        if plan.get("victim") == "safety":
            victim = int(plan["pid"])
        t_kill = probe.latest()[0]
        speed = abs(probe.latest()[2]["shoulder_pan"])
        os.kill(victim, signal.SIGKILL)
        time.sleep(2.0)
    finally:
        if child is not None:
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
        sleep_until(next_at)


SCENARIOS = {
    "vla": vla,
    "reverse": reverse,
    "cap_stream": cap_stream,
    "keep_out": keep_out,
    "kill": kill,
}


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
