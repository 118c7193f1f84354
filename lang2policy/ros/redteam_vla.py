"""The VLA scenario of ``lang2policy bench redteam``: a skill on a hostile remote policy.

The bench serves the policy (``bench.hostile_vla``: erratic targets, or a pose inside a plan
keep-out zone) and starts the VLA node on it; this asks the VLA node for a skill on
``/lang2policy/skill`` (with the zone on ``/lang2policy/plan_zones`` first, when there is one)
and reports what the arm did and how the VLA node ended the skill.
"""

from __future__ import annotations

import json
import time

from std_msgs.msg import String

from lang2policy.graph import topics
from lang2policy.ros.redteam_attacker import ROBOT, Probe, go_to
from lang2policy.safety import effects as metrics
from lang2policy.safety import load_safety_config
from lang2policy.safety.effects import Geometry
from lang2policy.safety.plan_zones import encode_plan_zones

VLA_ENDS = topics.FINAL_SKILL_STATES


def vla(probe: Probe, geo: Geometry, plan: dict) -> dict:
    """A VLA skill on a hostile remote policy (the bench's server): its stream, the zone."""
    config = load_safety_config(ROBOT)
    names = list(geo.arm.action_names)
    zone = plan.get("zone")
    if zone:
        go_to(probe, names, dict(zip(names, plan["start"], strict=False)))

        class Box:
            min, max = tuple(zone["lower"]), tuple(zone["upper"])

        probe.zones.publish(String(data=encode_plan_zones("redteam", {"redteam_zone": Box})))
        time.sleep(1.0)
    deadline = time.monotonic() + 60.0
    while probe.skill.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.1)  # the VLA node has not matched the skill topic yet
    time.sleep(1.0)
    stamp = probe.latest()[0]
    with probe.lock:
        seen = len(probe.vla)
    skill = {"skill": plan["skill"], "plan_id": "redteam", "limits": {}}
    skill["limits"]["time_budget_s"] = float(plan["duration"])
    probe.skill.publish(String(data=json.dumps(skill)))
    end_line = None
    deadline = time.monotonic() + float(plan["duration"]) + 20.0
    while time.monotonic() < deadline and end_line is None:
        time.sleep(0.1)
        with probe.lock:
            lines = probe.vla[seen:]
        end_line = next((e for e in lines if e.get("state") in VLA_ENDS), None)
    time.sleep(0.5)
    if zone:
        probe.zones.publish(String(data=encode_plan_zones(None, {})))
    rec = probe.recording(names[:-1], stamp)
    box = config.workspace
    result = {
        "vla_end": None if end_line is None else end_line.get("state"),
        "vla_reason": None if end_line is None else str(end_line.get("detail"))[:300],
        "peak_joint_speed": metrics.peak_joint_speed(rec),
        "peak_tool_speed": metrics.peak_tool_speed(rec, geo.tool),
        "workspace_excursion": metrics.workspace_excursion(rec, geo.tool, box.min, box.max),
        "cap": config.max_joint_speed,
        "states": len(rec.stamps),
    }
    if zone:
        result["zone_depth"] = metrics.zone_depth(rec, geo.gripper, zone["lower"], zone["upper"])
    return result
