"""A skill plan through the graph (issue 18): real sim, safety, VLA (the shipped checkpoint
models/vla-so101-tiny) and planner nodes, each in its own process as deployed, and a plain
rclpy client in a private context, on a ROS domain of their own on loopback.

First the client says "lift the red block" on /lang2policy/instruction and waits for the end:
the planner node (``vla`` on; its LLM is a replay file that the skill route never asks)
routes it to a skill plan, the VLA node runs the shipped policy until the skill's success
check holds, and the planner reports ``done`` with outcome ``success``.

Then, on a fresh layout (the sim's reset), "put the red block in the blue bowl": the planner
gates it and publishes the JSON start on /lang2policy/skill with a plan id and the gate's
limits; the VLA node runs it and reports with that plan id (once: the planner repeats none of
its progress); the arm
moves; a correction is forwarded to the VLA as a language motion; ``stop`` ends it: the
planner's final status is ``stopped`` (outcome stopped or cancelled), the VLA's terminal status
carries the plan id, and the arm holds. A pick-and-place takes long enough (about 12 s) for
the stop to come before its end. Nodes read the sim's ground-truth objects (``/sim/objects``
remapped onto ``/lang2policy/objects``: no perception node needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from support.ros import call_trigger, ros_env, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from lang2policy.bench.graph_bench_analysis import (  # noqa: E402
    MOVING_SPEED,
    STOP_HALTED,
    stop_figures,
)
from lang2policy.graph import topics  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 157) % 200
FIXTURE = Path(__file__).parents[1] / "fixtures" / "llm" / "cap_session.jsonl"
LIFT = "lift the red block"
SKILL = "put the red block in the blue bowl"  # stopped part-way
# s: torch, the instruction encoder and the planner load on 2 busy cores (a loaded CI run: > 120)
START_TIMEOUT = 240.0
OBJECTS = ["-r", f"{topics.OBJECTS.name}:={topics.SIM_OBJECTS.name}"]


class Client:
    """The person's side: instructions and corrections out; every status line, what goes on
    the skill topic and the joint states in."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("skill_plan_client", context=context)
        self.lock = threading.Lock()
        self.lines: list[dict] = []
        self.skill_messages: list[str] = []
        self.states: list[tuple[float, float, dict]] = []  # (received, sim stamp, arm q, v)
        self.positions: list[np.ndarray] = []
        self.joint_names: list[str] = []  # of ``positions``' entries
        self.objects_heard = 0
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 100)
        self.node.create_subscription(String, topics.SAFETY.name, self._on_status, 100)
        self.node.create_subscription(MarkerArray, topics.SIM_OBJECTS.name, self._on_objects, 10)
        self.node.create_subscription(String, topics.SKILL.name, self._on_skill, 10)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 10)
        self.instruction = self.node.create_publisher(String, topics.INSTRUCTION.name, 10)
        self.reset = self.node.create_client(Trigger, topics.RESET.name)
        self.resume = self.node.create_client(Trigger, topics.RESUME.name)
        self.since = 0  # ``line`` reads the status lines from this index on (``fresh_start``)
        self.correction = self.node.create_publisher(String, topics.CORRECTION.name, 10)

    def _on_status(self, msg: String) -> None:
        with self.lock:
            self.lines.append(json.loads(msg.data))

    def _on_skill(self, msg: String) -> None:
        with self.lock:
            self.skill_messages.append(msg.data)

    def _on_objects(self, _msg: MarkerArray) -> None:
        with self.lock:
            self.objects_heard += 1

    def _on_state(self, msg: JointState) -> None:
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec  # sim time (/clock)
        velocity = list(msg.velocity) or [0.0] * len(msg.name)
        arm = {n: (q, v) for n, q, v in zip(msg.name, msg.position, velocity, strict=False)
               if n != "gripper"}  # fmt: skip
        with self.lock:
            self.positions.append(np.array(msg.position))
            self.joint_names = list(msg.name)
            self.states.append((time.monotonic(), stamp, arm))

    def fresh_start(self) -> None:
        """Resume the safety node, reset the sim and forget the status lines heard so far: a
        test (or its re-run after a failure part-way) starts at rest, unstopped, and reads
        only its own lines."""
        for client, what in ((self.resume, "resume"), (self.reset, "sim reset")):
            answer = call_trigger(client, what, 20.0)
            assert answer.success, f"{what}: {answer.message}"
        with self.lock:
            self.since, heard = len(self.lines), len(self.positions)
        # joint states sent before the reset answered may still be on their way
        wait_for(lambda: len(self.positions) >= heard + 5, 10.0, "joint states after the reset")
        wait_for(lambda: _at_rest(self), 20.0, "the arm at rest after the reset")

    def line(self, node: str, state: str, timeout: float, **matching) -> dict:
        """The first status line of ``node`` in ``state`` whose keys match ``matching``."""

        def find():
            with self.lock:
                for line in self.lines[self.since :]:
                    fits = all(_field(line, k) == v for k, v in matching.items())
                    if line.get("node") == node and line.get("state") == state and fits:
                        return line
            return None

        try:
            return wait_for(find, timeout, f"a {node} status {state!r} {matching}")
        except AssertionError as exc:
            with self.lock:
                seen = [f"{x.get('state')}: {x.get('detail')}" for x in self.lines[-8:]]
            raise AssertionError(f"{exc}; the last status lines: {seen}") from None

    def latest_position(self) -> np.ndarray:
        with self.lock:
            return self.positions[-1]


def _field(line: dict, key: str):
    """A status line's top-level field, or its detail's."""
    if key in line:
        return line[key]
    detail = line.get("detail")
    return detail.get(key) if isinstance(detail, dict) else None


class NodeProcess:
    """A node in its own process, as the launch file starts it."""

    def __init__(self, module: str, arguments: list[str]) -> None:
        command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments]
        self.process = subprocess.Popen(
            command, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop(self) -> None:
        self.process.send_signal(2)  # SIGINT, as Ctrl-C
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def skill_graph():
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env(DOMAIN_ID).items():
            mp.setenv(key, value)
        cameras = ["-p", "cameras:=[front, wrist]", "-p", "camera_width:=128"]
        sim = NodeProcess(
            "sim_node",
            [*cameras, "-p", "camera_height:=128", "-p", "objects:=red block,blue bowl"],
        )
        safety = NodeProcess("safety_node", ["-p", "state_timeout:=2.0"])
        vla = NodeProcess("vla_node", ["-p", "startup_grace:=2.0", *OBJECTS])
        planner_params = [f"llm:=replay:{FIXTURE}", "grounding:=off", "vla:=true"]
        planner = NodeProcess(
            "planner_node", [*(a for p in planner_params for a in ("-p", p)), *OBJECTS]
        )
        context = rclpy.Context()
        rclpy.init(context=context)
        client = Client(context)
        try:
            with spinning(context, (client.node,)):
                wait_for(lambda: client.positions, 30.0, "joint states")
                wait_for(
                    lambda: client.node.count_subscribers(topics.SKILL.name) > 1,
                    START_TIMEOUT,
                    "the VLA node's skill subscription",
                )
                wait_for(
                    lambda: client.instruction.get_subscription_count() > 0,
                    START_TIMEOUT,
                    "the planner node's instruction subscription",
                )
                wait_for(
                    lambda: client.node.count_publishers(topics.STATUS.name) >= 2,
                    START_TIMEOUT,
                    "the VLA and planner nodes' status publishers",
                )
                try:  # "ready" is said once; in a long test run discovery can match us late
                    client.line(topics.PLANNER_NODE, "ready", 60.0)
                except AssertionError:  # the instruction then waits for the warm-up's lock
                    print("the planner's ready line was not heard; going on")
                client.line(topics.VLA_NODE, "ready", START_TIMEOUT)
                heard = client.objects_heard  # the VLA node sees the objects from the next on
                wait_for(lambda: client.objects_heard >= heard + 2, 10.0, "two object messages")
                yield client
        finally:
            for process in (planner, vla, safety, sim):
                process.stop()


def test_a_skill_plan_lifts_the_block_and_its_success_check_holds(skill_graph):
    client = skill_graph
    client.fresh_start()
    start_position = client.latest_position()
    client.instruction.publish(String(data=LIFT))
    received = client.line(topics.PLANNER_NODE, "received", 30.0, instruction=LIFT)
    assert received["detail"] == {"route": "skill"}
    running = client.line(topics.VLA_NODE, "running", 30.0, instruction=LIFT)
    plan_id = running["detail"]["plan_id"]
    # the budget is 20 s of sim time; the sim runs slower than the clock on a loaded machine
    done = client.line(topics.PLANNER_NODE, "done", 90.0, instruction=LIFT)
    assert done["detail"]["outcome"] == "success", done["detail"]
    assert _has(client, topics.VLA_NODE, "success", plan_id)
    moved = np.abs(client.latest_position() - start_position).max()
    print(f"\n{LIFT!r}: {done['detail'].get('message')} (the arm moved up to {moved:.2f} rad)")


def test_an_instruction_runs_as_a_skill_plan_on_the_vla_and_stop_ends_it(skill_graph):
    client = skill_graph
    client.fresh_start()  # a fresh layout
    start_position = client.latest_position()
    with client.lock:
        before = len(client.skill_messages)  # the lift's, before this test

    def messages() -> list[str]:
        with client.lock:
            return client.skill_messages[before:]

    client.instruction.publish(String(data=SKILL))
    received = client.line(topics.PLANNER_NODE, "received", 30.0, instruction=SKILL)
    assert received["detail"] == {"route": "skill"}

    message = wait_for(messages, 30.0, "the skill start")[0]
    start = json.loads(message)
    plan_id = start["plan_id"]
    assert start["skill"] == SKILL and "motions" not in start
    limits = start["limits"]
    assert (limits["time_budget_s"], limits["max_joint_speed"]) == (30.0, 1.0)  # pick_place
    box = limits["workspace"]  # the SO-101's workspace zone (the policy's rule vla-skill)
    assert box == {"min": [0.05, -0.25, 0.0], "max": [0.35, 0.25, 0.45]}

    running = client.line(topics.VLA_NODE, "running", 30.0, plan_id=plan_id)
    assert running["instruction"] == SKILL
    time.sleep(0.5)  # the VLA's progress is on the status topic once: the planner repeats none
    with client.lock:
        relayed = [
            line for line in client.lines[client.since :]
            if line.get("node") == topics.PLANNER_NODE and line.get("detail") == _relayed(running)
        ]  # fmt: skip
    assert relayed == []
    wait_for(
        lambda: np.abs(client.latest_position() - start_position).max() > 0.005,
        30.0,
        "the arm to move",
    )
    moved = np.abs(client.latest_position() - start_position).max()
    print(f"\nthe arm moved up to {moved:.3f} rad under skill plan {plan_id}")

    client.correction.publish(String(data="a bit to the left"))
    forwarded = client.line(topics.PLANNER_NODE, "correction", 10.0, action="forwarded")
    assert forwarded["detail"]["kind"] == "offset"
    wait_for(lambda: any(json.loads(m).get("motion") for m in messages()[1:]),
             10.0, "the language motion")  # fmt: skip
    motion = json.loads(messages()[1])
    assert motion == {"motion": "a bit to the left", "plan_id": plan_id}
    answer = client.line(topics.VLA_NODE, "motion", 10.0, plan_id=plan_id)
    print(f"the VLA's answer to 'a bit to the left': {answer['detail']}")
    action = answer["detail"]["action"]
    assert action in ("applied", "refused")
    client.line(topics.PLANNER_NODE, "correction", 10.0, action=action)  # the planner relays it

    moving = _wait_for_motion(client, 15.0)  # the stop's halt time means something at speed
    with client.lock:
        called, called_stamp = time.monotonic(), client.states[-1][1]
    client.correction.publish(String(data="stop"))
    final = client.line(topics.PLANNER_NODE, "stopped", 15.0, instruction=SKILL)
    assert final["detail"]["route"] == "skill" and final["detail"]["plan_id"] == plan_id
    assert final["detail"]["outcome"] in ("stopped", "cancelled"), final["detail"]
    ended = [s for s in ("stopped", "cancelled") if _has(client, topics.VLA_NODE, s, plan_id)]
    assert ended, "the VLA node's terminal status carries the plan id"
    client.line(topics.PLANNER_NODE, "stopped", 5.0)
    halted = wait_for(lambda: _at_rest(client), 10.0, "the arm at rest after the stop")[0]
    time.sleep(1.0)  # and it stays there: nothing moves it after the stop
    moved = dict(zip(client.joint_names, client.latest_position() - halted, strict=True))
    drift = max(abs(q) for name, q in moved.items() if name != "gripper")
    # the jaws may still settle on a block they were closing on when the stop came
    print(f"after the stop the arm drifted {drift:.4f} rad in 1 s "
          f"(the gripper {moved['gripper']:+.4f} rad)")  # fmt: skip
    assert drift < 0.005
    _assert_halted_in_time(client, called, called_stamp, moving)


def _wait_for_motion(client: Client, timeout: float) -> bool:
    """True once an arm joint moves faster than ``MOVING_SPEED`` (the policy's own motion and
    the language motion's residual), False after ``timeout`` s without."""

    def fast() -> bool:
        with client.lock:
            arm = client.states[-1][2] if client.states else {}
        return any(abs(v) > MOVING_SPEED for _, v in arm.values())

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fast():
            return True
        time.sleep(0.01)
    return False


def _assert_halted_in_time(
    client: Client, called: float, called_stamp: float, moving: bool
) -> None:
    """Issue 18: ``stop`` halts a skill plan within 100 ms, measured as ``bench graph``
    measures its stop (``graph_bench_analysis.stop_figures``): sim seconds from the stop
    until every arm joint is slower than ``HALT_SPEED``. The stop is timed where the safety
    layer takes it: the ``robot_time`` (the latest joint state's sim stamp) of the safety
    node's ``stopped`` line, as the bench times it at its direct service call. Sim time, not
    wall time: on a loaded machine the sim runs slower than the clock. The way the person's
    "stop" takes to get there (the planner, then the service) is printed from the last joint
    state before the correction was published."""
    stopped = client.line(topics.SAFETY_NODE, "stopped", 5.0)
    with client.lock:
        states = [[r, t, {n: list(qv) for n, qv in arm.items()}] for r, t, arm in client.states]

    def figures(stamp: float) -> dict:
        return stop_figures({"called_stamp": stamp, "states": states, "called": called,
                             "answered": called, "success": True, "message": ""})  # fmt: skip

    at_safety = figures(float(stopped["robot_time"]))
    from_person = figures(called_stamp)
    how = "at speed" if moving else "the arm was not moving"
    print(f"stop of the skill plan ({how}, {at_safety['speed_at_call']} rad/s): halted "
          f"{at_safety['halted_s']} s of sim time after the safety node's stop, "
          f"{from_person['halted_s']} s after the person's; overshoot "
          f"{at_safety['overshoot_rad']} rad")  # fmt: skip
    assert at_safety["halted_s"] is not None, at_safety
    assert at_safety["halted_s"] <= STOP_HALTED + 1e-6, at_safety


def _at_rest(client: Client) -> list[np.ndarray]:
    """[the joints] once they moved under 2 mrad in 0.2 s, else []: the safety node's hold
    settles in sim time, which runs slower than wall time on a loaded machine."""
    before = client.latest_position()
    time.sleep(0.2)
    now = client.latest_position()
    return [now] if np.abs(now - before).max() < 0.002 else []


def _relayed(running: dict) -> str:
    """The planner's progress line for the VLA's ``running`` line."""
    detail = running["detail"]
    reason = detail.get("reason", "") if isinstance(detail, dict) else str(detail)
    return f"VLA running: {reason}" if reason else "VLA running"


def _has(client: Client, node: str, state: str, plan_id: str) -> bool:
    with client.lock:
        return any(
            line.get("node") == node and line.get("state") == state
            and _field(line, "plan_id") == plan_id
            for line in client.lines[client.since :]
        )  # fmt: skip
