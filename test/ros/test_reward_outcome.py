"""The reward route's outcome through the graph: a reward plan is ``done`` only once the
controller node's success condition held, and ``failed`` with the controller's reason and the
terms' values when it cannot succeed; each planner event is on the status topic once.

The sim, safety and controller nodes run as processes, as deployed; the planner node runs here
(the conductor behind it is real) with the reward LLM replaced by a fixed spec per instruction
(``FixedSpecs``: the LLM is the one boundary faked). The specs move the tool to a point: one the
arm reaches, one far out of its reach.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from support.ros import call_trigger  # noqa: E402
from support.ros_graph import node_process, sim_process, stop_process  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.ros.entry import make_executor  # noqa: E402

FIXTURE = Path(__file__).parents[1] / "fixtures" / "llm" / "cap_session.jsonl"
DOMAIN_ID = 1 + (os.getpid() + 59) % 200  # an offset no other module uses
REACH = "move the tool to the point"
FAR = "move the tool far out"
SPECS = {
    REACH: ((0.20, -0.10, 0.08), 40.0),  # the controller node's own test reaches it
    FAR: ((0.60, 0.0, 0.45), 3.0),  # about 0.6 m from the base: out of the SO-101's reach
}
GOAL = 0.015  # m


class FixedSpecs:
    """The reward LLM's stand-in: a tool_to_point spec with a success condition."""

    def __init__(self, objects) -> None:
        self.objects = list(objects)

    def plan(self, instruction, current=None, *, positions=None, headings=None):
        from lang2policy.l2r.planner import RewardPlan
        from lang2policy.rewards.spec import validate_spec

        point, duration = SPECS[instruction]
        spec = {
            "task": instruction,
            "duration": duration,
            "terms": [{"term": "tool_to_point", "params": {"point": list(point)}}],
            "success": {"all": [{"term": "tool_to_point", "below": GOAL}], "hold": 0.3},
        }
        spec = validate_spec(spec, self.objects).spec
        return RewardPlan(spec, True, (), "move the tool", "tool_to_point(...)")


class StatusProbe:
    """Every line on the status topic, in order."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("reward_outcome_probe", context=context)
        self.lock = threading.Lock()
        self.lines: list[dict] = []
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 100)
        self.safety: list[dict] = []
        self.node.create_subscription(String, topics.SAFETY.name, self._on_safety, 100)
        self.instruction = self.node.create_publisher(String, topics.INSTRUCTION.name, 10)
        self.reset = self.node.create_client(Trigger, topics.RESET.name)

    def reset_sim(self) -> None:
        """The sim node's reset: the arm back at home, whatever the last test left."""
        answer = call_trigger(self.reset, "the sim node's reset")
        assert answer.success, answer.message
        time.sleep(1.0)  # the safety node and the controller see the arm at home

    def _on_safety(self, msg: String) -> None:
        with self.lock:
            self.safety.append(json.loads(msg.data))

    def safety_said(self, since: int = 0) -> list[tuple]:
        """The safety node's distinct (state, reason, last violation) lines since ``since``."""
        with self.lock:
            said = [(s["state"], s.get("reason"), s["detail"].get("last_violation"))
                    for s in self.safety[since:]]  # fmt: skip
        return list(dict.fromkeys(said))

    def _on_status(self, msg: String) -> None:
        with self.lock:
            self.lines.append(json.loads(msg.data))

    def index(self, predicate, since: int = 0) -> int | None:
        with self.lock:
            return next((i for i, s in enumerate(self.lines) if i >= since and predicate(s)), None)

    def send(self, text: str) -> int:
        wait_for(self.instruction.get_subscription_count, 10, "the planner's subscription")
        with self.lock:
            since = len(self.lines)
        self.instruction.publish(String(data=text))
        return since

    def final(self, text: str, since: int, timeout: float) -> int:
        def found():
            return self.index(
                lambda s: (
                    s.get("node") == topics.PLANNER_NODE
                    and s.get("instruction") == text
                    and s.get("state") in topics.FINAL_PLANNER_STATES
                ),
                since,
            )

        return wait_for(found, timeout, f"the outcome of {text!r}")


@pytest.fixture(scope="module")
def reward_graph():
    from lang2policy.ros.planner_node import PlannerNode

    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN_ID), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        sim = sim_process(env, ["-p", "objects_topic:=/lang2policy/objects"])
        safety = node_process(env, "safety_node", ["-p", "state_timeout:=2.0"])
        controller = node_process(env, "controller_node", [])
        context = rclpy.Context()
        rclpy.init(context=context)
        overrides = [
            Parameter("llm", value=f"replay:{FIXTURE}"),
            Parameter("route", value="reward"),
            Parameter("execute", value="graph"),
        ]
        planner = PlannerNode(context=context, parameter_overrides=overrides)
        planner.conductor.reward.make_planner = FixedSpecs
        probe = StatusProbe(context)
        executor = make_executor(context)
        executor.add_node(planner)
        executor.add_node(probe.node)
        done = threading.Event()
        spinner = threading.Thread(
            target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(done.is_set, True)],
            daemon=True,
        )
        spinner.start()
        try:
            wait_for(lambda: planner.conductor.positions, 60, "the sim's objects")
            wait_for(
                lambda: probe.index(lambda s: s.get("node") == topics.CONTROLLER_NODE) is not None,
                60,
                "the controller node's status",
            )
            yield planner, probe
        finally:
            done.set()
            spinner.join(timeout=10)
            executor.shutdown()
            planner.destroy_node()
            probe.node.destroy_node()
            rclpy.shutdown(context=context)
            for process in (controller, safety, sim):
                stop_process(process)


def controller_end(probe: StatusProbe, text: str, since: int) -> int | None:
    return probe.index(
        lambda s: (
            s.get("node") == topics.CONTROLLER_NODE
            and s.get("task") == text
            and s.get("state") in ("success", "failed", "timeout")
        ),
        since,
    )


def planner_lines(probe: StatusProbe, text: str, since: int) -> list[tuple[str, str]]:
    with probe.lock:
        return [
            (s["state"], json.dumps(s.get("detail"), sort_keys=True))
            for s in probe.lines[since:]
            if s.get("node") == topics.PLANNER_NODE and s.get("instruction") == text
        ]


def test_an_unreachable_target_fails_with_the_controllers_reason_and_the_terms(reward_graph):
    _planner, probe = reward_graph
    since = probe.send(FAR)
    end = probe.final(FAR, since, 60)
    final = probe.lines[end]
    assert final["state"] == "failed", final
    ended = controller_end(probe, FAR, since)
    assert ended is not None and ended < end, "the plan ends after the controller's verdict"
    assert probe.lines[ended]["state"] == "timeout"
    detail = final["detail"]
    assert (detail["outcome"], detail["verdict"]) == ("timeout", "goal_not_reached")
    assert detail["measures"]["tool_to_point"] > GOAL
    assert detail["message"].startswith("controller: timeout")
    assert "3 s passed" in detail["message"] and "tool_to_point" in detail["message"]
    lines = planner_lines(probe, FAR, since)
    assert len(lines) == len(set(lines)), lines  # each event once
    assert [state for state, _ in lines] == [
        "received", "planning", "planning", "plan", "running", "failed"
    ]  # fmt: skip


def test_a_reachable_target_is_done_only_after_the_success_condition_held(reward_graph):
    _planner, probe = reward_graph
    # From home: the plan's outcome, whatever the test before left (the next test starts
    # where an unreachable target left the arm).
    probe.reset_sim()
    safety_since = len(probe.safety)
    since = probe.send(REACH)
    end = probe.final(REACH, since, 90)
    final = probe.lines[end]
    said = "\n".join(map(str, probe.safety_said(safety_since)))
    assert final["state"] == "done", f"{final['detail']['message']}; the safety node said:\n{said}"
    ended = controller_end(probe, REACH, since)
    assert ended is not None and ended < end, "done only after the controller's success"
    assert probe.lines[ended]["state"] == "success"
    detail = final["detail"]
    assert detail["verdict"] == "goal_reached" and detail["outcome"] == "success"
    assert detail["controller"]["reason"] == "success conditions held"
    assert detail["measures"]["tool_to_point"] <= GOAL + 0.01
    lines = planner_lines(probe, REACH, since)
    assert len(lines) == len(set(lines)), lines
    time.sleep(0.5)
    assert planner_lines(probe, REACH, since)[-1][0] == "done"  # nothing after the end


def test_a_reachable_target_after_an_unreachable_one_is_done_from_where_that_left_the_arm(
    reward_graph,
):
    """The unreachable target leaves the arm stretched toward the box's face. The MPC did not
    know the box: from there its plans bulged a few millimetres past the face, the safety node
    cut every command at its first sample and the MPC proposed the same again until the plan
    timed out (1 run in 8). It now plans inside the box (``mpc.workspace``)."""
    _planner, probe = reward_graph
    probe.reset_sim()
    probe.final(FAR, probe.send(FAR), 60)
    safety_since = len(probe.safety)
    since = probe.send(REACH)
    final = probe.lines[probe.final(REACH, since, 90)]
    said = "\n".join(map(str, probe.safety_said(safety_since)))
    assert final["state"] == "done", f"{final['detail']['message']}; the safety node said:\n{said}"
    assert final["detail"]["measures"]["tool_to_point"] <= GOAL + 0.01
