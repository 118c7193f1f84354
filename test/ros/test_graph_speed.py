"""A pick-and-place through the graph never drives the arm faster than the safety node allows.

Issue 13, finding 6: with no correction at all, "put the red block in the blue bowl" through the
graph peaked at shoulder_pan 1.63 rad/s (the safety node's limit is 1.5) and 0.45 m/s at the
tool, against 0.25 m/s for the same program outside the graph. The sim node, the safety node
and the planner run as processes of their own, as deployed (the planner replays the recorded
LLM answers); the probe records every joint state (sim time stamps, positions and the
simulation's joint velocities) and computes the tool centre point by forward kinematics of the
scene model, independently of the nodes.

Tolerance: the safety node bounds the speed of the *target* it sends; the arm follows it with
position servos, which overshoot a change of commanded speed (the planner's paths have corners:
a joint may start, stop or reverse at 0.8 of the limit from one 20 ms step to the next). How much
is measured on the same program outside the graph (``SimSession``: no ROS, the primitives drive
the simulated arm directly, lock-step): each joint may reach the larger of the limit and that
peak, plus 0.05 rad/s for positions sampled every 20 ms. The tool stays under 0.3 m/s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import mujoco
import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from support.ros import probe_in_domain, ros_env  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from lang2policy.control.trajectory import min_jerk_scale  # noqa: E402
from lang2policy.graph import topics  # noqa: E402
from lang2policy.ros import convert  # noqa: E402
from lang2policy.safety import load_safety_config  # noqa: E402
from lang2policy.scene.world import World  # noqa: E402
from lang2policy.session.sim import SimSession  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "test" / "fixtures" / "llm" / "cap_session.jsonl"
OBJECTS = "red block,blue block,blue bowl,green bowl"  # the scene the fixture was recorded on
SEED = 1
INSTRUCTION = "put the red block in the blue bowl"
ARM = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
DOMAIN_ID = 1 + (os.getpid() + 171) % 200
PERIOD = 0.02  # s of sim time between joint states (the sim node's control rate)
SAMPLING = 0.05  # rad/s: speeds from positions 20 ms apart
TOOL_SPEED = 0.3  # m/s
BURST = 8  # 20 ms steps a late commander sends at once
# Steps of the previous burst still to run when the next is sent: a burst is sent late enough
# to wait behind the running steps (the point of the test) but early enough that the arm does
# not run out of steps while the message travels on a loaded machine. A commander that runs dry
# pauses the arm and restarts it with a step in speed, which the servo overshoots by 25-35 %:
# a different mechanism (a stalled commander), not the bunching this test is about. 4 steps
# (80 ms) of slack: 2 were not enough in one CI run (1.68 rad/s); beyond the sim node's queue
# of 10 the oldest waiting step is skipped and its time given to the next, so pace is kept.
LEAD = 4
DISTANCE, PACE = 0.6, 1.2  # rad, rad/s peak (the planner's moves: 0.8 of the limit)
# The servos' overshoot of a step in commanded speed, measured here: the pick-and-place's
# shoulder_pan starts at 1.1 rad/s from rest (a corner of its path) and peaks at 1.36 (+24 %).
STEP_OVERSHOOT = 1.25


def node(module: str, *params: str) -> subprocess.Popen:
    env = dict(os.environ, **ros_env(DOMAIN_ID))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    args = [a for p in params for a in ("-p", p)]
    command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *args]
    return subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def stop(process: subprocess.Popen) -> None:
    process.send_signal(2)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


class Probe:
    """Every joint state (stamp, arm positions, arm velocities) and the planner's statuses."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("speed_probe", context=context)
        self.lock = threading.Lock()
        self.states: list[tuple[float, list[float], list[float]]] = []
        self.statuses: list[dict] = []
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 1000)
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.safety: list[dict] = []  # the safety node's lines, for failure messages
        self.node.create_subscription(String, topics.SAFETY.name, self._on_safety, 50)
        self.instruction = self.node.create_publisher(String, topics.INSTRUCTION.name, 10)
        self.command = self.node.create_publisher(JointTrajectory, topics.JOINT_COMMAND.name, 10)
        self.latest: dict[str, float] = {}

    def _on_state(self, msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        row = (
            convert.to_seconds(msg.header.stamp),
            [msg.position[index[n]] for n in ARM],
            [msg.velocity[index[n]] for n in ARM],
        )
        with self.lock:
            self.states.append(row)
            self.latest = dict(zip(msg.name, msg.position, strict=True))

    def stamp(self) -> float:
        with self.lock:
            return self.states[-1][0]

    def track(self, since: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(stamps, arm positions, arm velocities) of the joint states from ``since`` on, in
        stamp order, each once."""
        with self.lock:
            rows = sorted({r[0]: r for r in self.states if r[0] >= since}.values())
        return tuple(np.array(c) for c in zip(*rows, strict=True))

    def at_rest(self, seconds: float = 0.3) -> bool:
        """Every arm joint slower than 0.02 rad/s over the last ``seconds`` of sim time."""
        with self.lock:
            recent = [v for t, _, v in self.states if t >= self.states[-1][0] - seconds]
        return bool(recent) and float(np.abs(recent).max()) < 0.02

    def _on_safety(self, msg: String) -> None:
        with self.lock:
            self.safety.append(json.loads(msg.data))

    def safety_said(self, since: int) -> list[tuple]:
        """The safety node's distinct (state, reason, last violation) since line ``since``."""
        with self.lock:
            said = [(s["state"], s.get("reason"), s["detail"].get("last_violation"))
                    for s in self.safety[since:]]  # fmt: skip
        return list(dict.fromkeys(said))

    def _on_status(self, msg: String) -> None:
        with self.lock:
            self.statuses.append(json.loads(msg.data))

    def outcome(self) -> dict | None:
        with self.lock:
            return next(
                (
                    s
                    for s in self.statuses
                    if s.get("instruction") == INSTRUCTION
                    and s.get("state") in ("done", "failed", "rejected")
                ),
                None,
            )


def tool_points(world: World, joints: np.ndarray) -> np.ndarray:
    """Tool centre points (site + rotation @ grasp offset) of arm joint rows, from the scene."""
    site, offset = world.arm.ee_site_id, np.array(world.description.grasp.center_offset)
    points = []
    for q in joints:
        world.data.qpos[world.arm.qpos_adr] = q
        mujoco.mj_kinematics(world.model, world.data)
        points.append(
            world.data.site_xpos[site] + world.data.site_xmat[site].reshape(3, 3) @ offset
        )
    return np.array(points)


def peaks(stamps: np.ndarray, positions: np.ndarray, velocities: np.ndarray) -> np.ndarray:
    """Per joint, the largest speed between consecutive samples one period apart and the
    largest joint velocity the simulation reported."""
    dt = np.diff(stamps)
    step = np.abs(np.diff(positions, axis=0))[np.abs(dt - PERIOD) < 1e-3] / PERIOD
    return np.maximum(step.max(axis=0), np.abs(velocities).max(axis=0))


def outside_the_graph() -> np.ndarray:
    """Per-joint speed peaks of the same program on ``SimSession`` (no ROS), every 20 ms."""
    session = SimSession("so101")
    session.reset(SEED, OBJECTS.split(","))
    rows = []

    def record() -> None:
        world = session.world
        rows.append((world.time, world.arm_qpos(), world.arm_qvel()))

    session.robot.observers.append(record)
    session.primitives.put_first_on_second("red block", "blue bowl")
    assert session.world.is_in("red block", "blue bowl")
    stamps, positions, velocities = (np.array(c) for c in zip(*rows, strict=True))
    return peaks(stamps, positions, velocities)


@pytest.fixture(scope="module")
def speed_graph():
    """The sim node, the safety node and the planner as processes; the probe spinning."""
    sim = node(
        "sim_node",
        "camera_rate:=0",
        f"seed:={SEED}",
        f"objects:={OBJECTS}",
        "objects_topic:=/lang2policy/objects",
    )
    safety = node("safety_node", "use_sim_time:=true", "state_timeout:=2.0")
    planner = node(
        "planner_node",
        "use_sim_time:=true",
        f"llm:=replay:{FIXTURE}",
        "grounding:=off",
        "route:=code",
        "execute:=graph",
        "memory:=''",
    )
    try:
        with probe_in_domain(DOMAIN_ID, Probe) as probe:
            wait_for(lambda: probe.states, 60, "the sim node's joint states")
            yield probe
    finally:
        for process in (planner, safety, sim):
            stop(process)


@pytest.fixture(scope="module")
def graph_run(speed_graph):
    """The pick-and-place through the graph: (outcome, stamps, positions, velocities)."""
    probe = speed_graph
    wait_for(probe.instruction.get_subscription_count, 60, "the planner")
    probe.instruction.publish(String(data=INSTRUCTION))
    outcome = wait_for(probe.outcome, 240, f"the outcome of {INSTRUCTION!r}")
    stamps, positions, velocities = probe.track(since=0.0)
    return outcome, stamps, positions, velocities


def test_the_arm_in_the_graph_stays_within_the_safety_nodes_joint_speed(graph_run):
    outcome, stamps, positions, velocities = graph_run
    assert outcome["state"] == "done", outcome
    assert "red block in blue bowl" in outcome["detail"]["relations"], outcome
    ticks = round((stamps[-1] - stamps[0]) / PERIOD) + 1
    assert len(stamps) > 0.95 * ticks, f"the probe missed joint states: {len(stamps)} of {ticks}"
    limit = load_safety_config("so101").max_joint_speed
    bound = np.maximum(limit, outside_the_graph()) + SAMPLING
    peak = peaks(stamps, positions, velocities)
    report = {
        n: (round(float(p), 3), round(float(b), 3))
        for n, p, b in zip(ARM, peak, bound, strict=True)
    }
    print(f"joint: (peak, allowed) rad/s {report}")  # shown with -s
    assert (peak <= bound).all(), f"joint: (peak, allowed) rad/s {report}"
    assert peak[0] <= limit + SAMPLING, report  # shoulder_pan: 1.63 rad/s in the finding


def test_the_tool_in_the_graph_stays_under_0_3_m_per_s(graph_run):
    _outcome, stamps, positions, _velocities = graph_run
    points = tool_points(World("so101"), positions)
    dt = np.diff(stamps)
    speed = np.linalg.norm(np.diff(points, axis=0), axis=1)[np.abs(dt - PERIOD) < 1e-3] / PERIOD
    print(f"peak tool speed {speed.max():.3f} m/s")  # shown with -s
    assert speed.max() <= TOOL_SPEED, f"peak tool speed {speed.max():.3f} m/s"  # 0.45 found


def stalled(velocities: np.ndarray) -> bool:
    """Whether the move paused on the way: shoulder_pan's speed fell below a quarter of PACE
    between the first and the last moment it was above half of it (a minimum-jerk move's speed
    rises once and falls once). A commander that ran dry stops the arm and restarts it with a
    step in speed; so does bunching (the stop-and-go of the finding)."""
    speed = np.abs(velocities[:, 0])
    fast = np.flatnonzero(speed > 0.5 * PACE)
    return fast.size > 0 and bool((speed[fast[0] : fast[-1] + 1] < 0.25 * PACE).any())


def stream(probe: Probe, burst: int, direction: float) -> tuple[float, bool]:
    """Stream a smooth shoulder_pan move (minimum jerk, DISTANCE rad, peak PACE rad/s, like the
    planner's moves) as 20 ms steps, ``burst`` at a time every ``burst`` x 20 ms of sim time,
    each burst LEAD steps before the previous one has run out; returns the arm's peak
    shoulder_pan speed once it got there, and whether the move paused on the way."""
    wait_for(probe.command.get_subscription_count, 60, "the safety node")
    # from rest: a start read while the test before still moved the arm put the goal off
    wait_for(probe.at_rest, 30, "the arm at rest")
    with probe.lock:
        names, start = list(probe.latest), dict(probe.latest)
    duration = 1.875 * DISTANCE / PACE
    offsets = [
        direction * DISTANCE * min_jerk_scale(np.array(min(1.0, k * PERIOD / duration)))
        for k in range(1, round(duration / PERIOD) + 1)
    ]
    begin, said = probe.stamp(), len(probe.safety)
    for first in range(0, len(offsets), burst):
        due = begin + PERIOD * max(0, first - LEAD)
        wait_for(lambda d=due: probe.stamp() >= d, 20, "sim time")
        for offset in offsets[first : first + burst]:
            target = {**start, "shoulder_pan": start["shoulder_pan"] + float(offset)}
            probe.command.publish(convert.trajectory(names, [(PERIOD, [target[n] for n in names])]))
    end = probe.stamp()
    wait_for(lambda: probe.stamp() >= end + 1.0, 30, "a second of sim time")
    wait_for(probe.at_rest, 30, "the arm at rest after the move")
    stamps, positions, velocities = probe.track(since=begin)
    goal = start["shoulder_pan"] + direction * DISTANCE
    lines = probe.safety_said(said)
    if any(state == "holding" and "commander silent" in str(why) for state, why, _ in lines):
        # this process fell behind by more than command_timeout: the watchdog held the arm
        # short of the goal (the stream's later steps then start far from the held target);
        # a paused move, as ``stalled`` sees one, not judged
        return float(peaks(stamps, positions, velocities)[0]), True
    got_there = positions[-1, 0] == pytest.approx(goal, abs=0.02)
    assert got_there, f"at {positions[-1, 0]:.3f}, not {goal:.3f}: {lines}"
    return float(peaks(stamps, positions, velocities)[0]), stalled(velocities)


ATTEMPTS = 5  # moves, back and forth, until one ran without a pause (3 all paused, heavy load)


# The commander is this test's process: on a loaded 2-core CI machine it fell behind by less
# than ``stalled`` can see (1.93 rad/s in one run, no pause below a quarter of PACE).
@pytest.mark.flaky(reruns=2)
def test_a_late_commander_sending_bursts_does_not_drive_the_arm_faster_than_the_limit(speed_graph):
    """The mechanism of the finding, on purpose: a commander that falls behind and catches up,
    as the planner does on a loaded machine, sends its 20 ms steps eight at a time. Each step is
    legal; eight arrive together. On main they went through (each within the lead allowance of
    the measured position), the sim node ran the last from where the first began (up to 9.6
    rad/s asked), its own rate limit held the target to 1.5 rad/s in stop-and-go bursts and the
    servo overshot that: 1.6-1.9 rad/s measured. Now the steps run one after the other at the
    commander's pace (1.2 rad/s; 1.23 measured; the servo's overshoot of a change of commanded
    speed is allowed, STEP_OVERSHOOT), within the limit.

    A move that paused on the way (``stalled``) is a different mechanism: this test process
    fell more than LEAD steps behind on a loaded machine, the arm ran dry and restarted with a
    step in speed (one fresh-clone CI run: 1.75 rad/s). Such a move is not judged; the arm moves
    back and the test tries again; when every move paused, the test is skipped as inconclusive
    (a loaded machine, or bunching that makes every move stop and go: run it alone to tell)."""
    for attempt in range(ATTEMPTS):
        peak, paused = stream(speed_graph, BURST, +1.0 if attempt % 2 == 0 else -1.0)
        print(f"shoulder_pan peak in bursts {peak:.3f} rad/s, paused: {paused}")  # shown with -s
        if not paused:
            break
    if paused:
        # This process, the commander, fell behind on every move: in two fresh-clone CI runs
        # late in the full suite (never alone, not helped by pausing garbage collection), each
        # move ran dry or was held by the watchdog. Nothing was judged; say so, do not pass.
        pytest.skip(f"inconclusive: every one of {ATTEMPTS} moves paused on the way, the test "
                    f"process fell behind its own stream (last peak {peak:.3f} rad/s)")
    assert peak <= PACE * STEP_OVERSHOOT, peak
    assert peak <= load_safety_config("so101").max_joint_speed + SAMPLING, peak
