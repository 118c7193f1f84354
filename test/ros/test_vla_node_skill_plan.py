"""Skill plans in the sim graph (issue 18, parts 3 and 4): the VLA node's JSON start message
with limits and a plan id, and language motions during a skill. Real sim, safety and VLA nodes
(the shipped checkpoint), each in its own process, and a probe, on loopback.

Checked from outside the node, on what it publishes: every status line of a plan's run
carries its ``plan_id``; published targets never move a joint faster than the plan's cap; a
plan's workspace box holds the forward-kinematics tool point of every published target; a
motion with no skill running, or that is no motion, is refused; "a bit to the left" during a
skill shifts the commanded targets' tool point by about 2 cm in +y against the policy's own
targets (the node's ``tool_shift_m``; the closed-loop effect on the arm's end position is
measured on a seeded simulated scene in vla/test_language_motion_sim.py).
"""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from support.vla_ros import SHIPPED_CAMERAS, vla_graph  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.ros.vla_node import camera_topic  # noqa: E402
from lang2policy.vla.spec.schema import JOINT_NAMES  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 97) % 200
SKILL = "put the red block in the blue bowl"
SPEED = 0.4  # rad/s: the plan's cap, below the safety node's 1.5


@pytest.fixture(scope="module")
def vla_skill_graph():
    # the plans here end at their time budget: no look before judging (test_node_runner's)
    arguments = ["-p", "startup_grace:=2.0", "-p", "look_to_confirm:=false"]
    with pytest.MonkeyPatch.context() as mp, vla_graph(mp, DOMAIN_ID, arguments) as running:
        yield running


def arm_targets(probe, since: int) -> list[np.ndarray | None]:
    """The arm joints of each command published since ``since``; None for a hold."""
    targets: list[np.ndarray | None] = []
    for _, msg in probe.commands_since(since):
        if not msg.points:
            targets.append(None)
            continue
        assert tuple(msg.joint_names[:5]) == JOINT_NAMES
        targets.append(np.array(msg.points[0].positions[:5]))
    return targets


def start_plan(probe, message: dict) -> dict:
    """Start ``message``'s skill; its ``running`` line. A start before the VLA node has seen
    the sim's objects (published every few seconds while nothing moves) is refused: retried."""
    deadline = time.monotonic() + 30.0
    while True:
        found = answer(probe, probe.send_json(message))
        if found["state"] == "running" or time.monotonic() > deadline:
            assert found["state"] == "running", found
            return found
        assert "no objects seen" in found["detail"]["reason"], found
        time.sleep(1.0)


def answer(probe, since: int) -> dict:
    """The first status line since ``since`` that is not about a motion."""

    def find() -> dict | None:
        return next((line for line in run_lines(probe, since) if line["state"] != "motion"), None)

    return wait_for(find, 30.0, "the answer to a start")


def run_lines(probe, since: int) -> list[dict]:
    with probe.lock:
        return [line for _, line in probe.statuses[since:]]


def test_motions_and_bad_messages_are_answered(vla_skill_graph):
    _, _, probe = vla_skill_graph
    since = probe.send_json({"motion": "a bit to the left", "plan_id": "idle"})
    _, line = probe.status("motion", since)
    assert line["detail"]["action"] == "refused" and line["plan_id"] == "idle"
    assert "no skill is running" in line["detail"]["reason"]
    bad = {"skill": SKILL, "plan_id": "p-bad", "limits": {"max_joint_speed": -1}}
    _, line = probe.status("rejected", probe.send_json(bad))
    assert "limits.max_joint_speed must be a number > 0" in line["detail"]["reason"]
    assert line["plan_id"] == line["detail"]["plan_id"] == "p-bad"
    _, line = probe.status("rejected", probe.send('{"skill": "lift the red block", "x": 1}'))
    assert "unknown keys ['x']" in line["detail"]


def test_a_plan_runs_under_its_limits_and_a_motion_shifts_it_left(vla_skill_graph):
    _, _, probe = vla_skill_graph
    since, commands = probe.mark()
    start = {"skill": SKILL, "plan_id": "plan-a"}
    start["limits"] = {"max_joint_speed": SPEED, "time_budget_s": 8.0}
    running = start_plan(probe, start)
    assert f"joint speed <= {SPEED:g} rad/s" in running["detail"]["reason"]
    wait_for(lambda: len(probe.commands_since(commands)) >= 20, 60.0, "20 joint commands")
    # the shipped network looked once: the node let go of the cameras, and the sim stopped
    # rendering them for it (it renders only while someone listens)
    for camera in SHIPPED_CAMERAS:
        topic = camera_topic(camera)
        wait_for(lambda t=topic: probe.node.count_subscribers(t) == 0, 5.0, f"no reader of {topic}")
    _, applied = probe.status("motion", probe.send_json({"motion": "a bit to the left"}))
    assert applied["detail"]["action"] == "applied"
    assert applied["detail"]["offset"] == [0.0, 0.02, 0.0]
    not_motion = probe.send_json({"motion": "dance a little", "plan_id": "plan-a"})
    _, refused = probe.status("motion", not_motion)
    assert refused["detail"]["action"] == "refused"
    assert "not a motion" in refused["detail"]["reason"]
    _, other = probe.status("motion", probe.send_json({"motion": "lower", "plan_id": "plan-b"}))
    assert "for plan 'plan-b', but plan 'plan-a' is running" in other["detail"]["reason"]
    _, ended = probe.status("timeout", since, timeout=30.0)
    stats = ended["stats"]
    print(f"\nplan-a: {stats}")
    assert stats["budget_s"] == 8.0
    assert stats["motion_offset_m"] == [0.0, 0.02, 0.0]
    assert stats["tool_shift_m"][1] >= 0.01  # commanded vs the policy's own targets

    lines = run_lines(probe, since)[2:]  # after the idle motion's refusal
    lines = [line for line in lines if line["state"] != "motion" or "plan-b" not in str(line)]
    assert lines and all(line.get("plan_id") == "plan-a" for line in lines)
    assert all(line["detail"]["plan_id"] == "plan-a" for line in lines)

    targets = arm_targets(probe, commands)
    steps = [
        np.abs(b - a).max()
        for a, b in itertools.pairwise(targets)
        if a is not None and b is not None
    ]
    print(f"{len(steps)} steps between targets, the largest {max(steps):.4f} rad")
    assert len(steps) > 30 and max(steps) <= SPEED / 10.0 + 1e-4


def test_a_target_leaving_the_plans_workspace_is_not_sent(vla_skill_graph, tool):
    _, _, probe = vla_skill_graph
    with probe.lock:
        names, joints = probe.state_names, probe.positions[-1]
    here = tool.point(np.array([joints[names.index(n)] for n in JOINT_NAMES]))
    box = {"min": (here - 0.02).tolist(), "max": (here + 0.02).tolist()}
    since, commands = probe.mark()
    start = {"skill": SKILL, "plan_id": "plan-box", "limits": {"workspace": box}}
    start_plan(probe, start | {"motions": ["slower", "sing a song"]})  # remembered corrections
    motions = wait_for(
        lambda: (m := [line for line in run_lines(probe, since) if line["state"] == "motion"])
        and len(m) >= 2
        and m,
        10.0,
        "the answers to the start's motions",
    )
    assert [m["detail"]["action"] for m in motions] == ["applied", "refused"]
    assert motions[0]["detail"]["speed_scale"] == 0.5 and motions[0]["plan_id"] == "plan-box"
    wait_for(lambda: len(probe.commands_since(commands)) >= 40, 60.0, "40 joint commands")
    _, cancelled = probe.status("cancelled", probe.send(""))
    assert cancelled["plan_id"] == "plan-box"
    stats = cancelled["stats"]
    print(f"\nplan-box: {stats}")
    assert stats["workspace_limited_steps"] > 0  # the policy did try to leave the box
    assert stats["speed_scale"] == 0.5
    points = np.array([tool.point(q) for q in arm_targets(probe, commands) if q is not None])
    low, high = np.array(box["min"]), np.array(box["max"])
    outside = np.maximum(low - points, 0.0) + np.maximum(points - high, 0.0)
    print(f"{len(points)} targets; tool points x {points[:, 0].min():.3f}..{points[:, 0].max():.3f}"
          f" y {points[:, 1].min():.3f}..{points[:, 1].max():.3f}, most outside "
          f"{outside.max() * 1000:.2f} mm")
    assert outside.max() < 1e-3


def test_the_node_refuses_a_motion_for_a_plan_that_is_not_the_running_skill():
    """A motion that names a plan acts only on that plan: not on a skill started without one
    (plain text on the skill topic), nor when no skill runs; one without a plan id acts on
    whatever runs."""
    from types import SimpleNamespace

    from lang2policy.ros.vla_node import VLANode
    from lang2policy.vla.skill.language_motion import MotionState

    applied, lines = [], []
    runner = SimpleNamespace(
        skill=SimpleNamespace(instruction="lift the red block"),
        motion=lambda text: applied.append(text) or MotionState().outcome(text, True, ""),
    )
    logger = SimpleNamespace(info=lambda *a, **k: None)
    node = SimpleNamespace(
        runner=runner, plan_id="", get_logger=lambda: logger,
        _publish=lambda *a, **k: lines.append((a, k)),
    )  # fmt: skip
    VLANode._on_motion(node, "a bit to the left", "plan-of-the-planner")
    assert applied == [], "a plan's motion moved a skill of no plan"
    assert lines[-1][0][2]["action"] == "refused" and "plan" in lines[-1][0][2]["reason"]
    VLANode._on_motion(node, "a bit to the left", "")
    assert applied == ["a bit to the left"]
    node.plan_id = "plan-of-the-planner"
    VLANode._on_motion(node, "lower", "plan-of-the-planner")
    VLANode._on_motion(node, "higher", "another-plan")
    assert applied == ["a bit to the left", "lower"]
