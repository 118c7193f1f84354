"""The planner node over real rclpy (DDS on loopback, a private context and domain): an
instruction published on /lang2policy/instruction is planned (replayed LLM answers), run in the
sandbox on the simulated arm, and reported on /lang2policy/status."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from support.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.ros

FIXTURE = Path(__file__).parents[1] / "fixtures" / "llm" / "cap_session.jsonl"
RECEIVED_SPECS: list[dict] = []  # what the planner node published on /lang2policy/reward_spec
OBJECTS = "red block,blue block,blue bowl,green bowl"  # the scene the fixture was recorded on
DOMAIN_ID = 1 + (os.getpid() + 103) % 200


@pytest.fixture(scope="module")
def planner_node_graph():
    from lang2policy.graph.topics import INSTRUCTION, REWARD_SPEC, STATUS
    from lang2policy.ros.planner_node import PlannerNode

    INSTRUCTION_TOPIC, SPEC_TOPIC, STATUS_TOPIC = INSTRUCTION.name, REWARD_SPEC.name, STATUS.name

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context)
        overrides = [
            Parameter("llm", value=f"replay:{FIXTURE}"),
            Parameter("grounding", value="off"),  # the prompts the fixture was recorded with
            Parameter("objects", value=OBJECTS),
            Parameter("seed", value=1),
            Parameter("execute", value="local"),  # ros/test_graph.py covers the graph's arm
        ]
        planner = PlannerNode(context=context, parameter_overrides=overrides)
        probe = rclpy.create_node("planner_probe", context=context)
        statuses: list[dict] = []
        probe.create_subscription(
            String, STATUS_TOPIC, lambda m: statuses.append(json.loads(m.data)), 10
        )
        controller = probe.create_publisher(String, STATUS_TOPIC, 10)

        def controller_answers(message: String) -> None:
            """The controller node's stand-in: each spec accepted, then its success."""
            spec = json.loads(message.data)
            RECEIVED_SPECS.append(spec)
            for state in ("accepted", "success") if spec else ():
                line = {"node": "controller", "state": state, "instruction": "", "detail": ""}
                line["task"] = spec["task"]
                controller.publish(String(data=json.dumps(line)))

        probe.create_subscription(String, SPEC_TOPIC, controller_answers, 10)
        publisher = probe.create_publisher(String, INSTRUCTION_TOPIC, 10)
        executor = MultiThreadedExecutor(num_threads=3, context=context)
        executor.add_node(planner)
        executor.add_node(probe)
        stop = threading.Event()
        spinner = threading.Thread(
            target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(stop.is_set, True)],
            daemon=True,
        )
        spinner.start()
        wait_for(lambda: planner.count_subscribers(STATUS_TOPIC) >= 1, 10, "the probe")
        wait_for(lambda: publisher.get_subscription_count() >= 1, 10, "the planner")

        def send(text: str) -> None:
            message = String()
            message.data = text
            publisher.publish(message)

        try:
            yield planner, send, statuses
        finally:
            stop.set()
            spinner.join(timeout=5)
            planner.wait_idle(timeout=30)
            executor.shutdown()
            planner.destroy_node()
            probe.destroy_node()
            rclpy.shutdown(context=context)


def final_status(statuses: list[dict], instruction: str, timeout: float = 120) -> dict:
    return wait_for(
        lambda: next(
            (
                s
                for s in statuses
                if s["instruction"] == instruction and s["state"] in ("done", "failed")
            ),
            None,
        ),
        timeout,
        f"the outcome of '{instruction}'",
    )


def test_instruction_is_planned_run_and_reported(planner_node_graph):
    planner, send, statuses = planner_node_graph
    instruction = "put the red block in the blue bowl"
    send(instruction)
    done = final_status(statuses, instruction)
    assert done["state"] == "done", done
    assert "red block in blue bowl" in done["detail"]["relations"]
    assert "put_first_on_second" in done["detail"]["code"]
    states = [s["state"] for s in statuses if s["instruction"] == instruction]
    assert states[0] == "received" and "running" in states
    assert planner.conductor.code.session.world.is_in("red block", "blue bowl")
    assert all(s["node"] == "planner" for s in statuses)  # every line names its node


def test_the_planner_says_ready_once_its_llm_is_warm(planner_node_graph):
    """Issue 16: the fixed prompt parts are processed at start-up and the node then says
    ``ready`` (a replay file has nothing to warm, and says so)."""
    planner, _send, statuses = planner_node_graph
    said_ready = lambda: next((s for s in statuses if s["state"] == "ready"), None)  # noqa: E731
    ready = wait_for(said_ready, 30, "ready")
    assert ready["node"] == "planner" and "not warmed" in ready["detail"]["llm"], ready
    assert planner.warmth is not None and planner.warmth.prompts == 0


def test_bad_instructions_are_rejected_and_busy_is_reported(planner_node_graph):
    _planner, send, statuses = planner_node_graph
    send("   ")
    rejected = wait_for(
        lambda: next((s for s in statuses if s["state"] == "rejected"), None), 10, "rejected"
    )
    assert "empty" in rejected["detail"]
    follow_up = "now put it back"
    send(follow_up)
    send("put the blue block in the green bowl")  # arrives while the follow-up runs
    busy = wait_for(lambda: next((s for s in statuses if s["state"] == "busy"), None), 20, "busy")
    assert busy["instruction"] == "put the blue block in the green bowl"
    assert final_status(statuses, follow_up)["state"] == "done"


def test_a_blind_perception_makes_the_planner_refuse_new_plans(planner_node_graph):
    """A camera that stopped: perception says ``blind`` with since when, and the planner
    rejects new instructions with that reason (nothing runs) until it says ``seeing``."""
    from lang2policy.graph.topics import STATUS

    planner, send, statuses = planner_node_graph
    node = rclpy.create_node("blind_camera_probe", context=planner.context)
    perception = node.create_publisher(String, STATUS.name, 10)
    wait_for(lambda: perception.get_subscription_count() >= 1, 10, "the planner's status reader")

    def say(state: str, detail: str) -> None:
        line = {"node": "perception", "state": state, "instruction": "", "detail": detail}
        perception.publish(String(data=json.dumps(line)))

    try:
        say("blind", "no image from camera 'top' since 10:41:07 (3.2 s)")
        wait_for(lambda: planner.blind, 10, "the planner to hear that perception is blind")
        send("put the blue block in the green bowl")
        rejected = wait_for(
            lambda: next((s for s in statuses if s["state"] == "rejected"
                          and "blind" in str(s["detail"])), None), 10, "the refusal",
        )  # fmt: skip
        assert "no image from camera 'top' since 10:41:07" in rejected["detail"]
        assert rejected["instruction"] == "put the blue block in the green bowl"
        assert not any(
            s["state"] in ("received", "running") and s["instruction"] == rejected["instruction"]
            for s in statuses
        )  # nothing ran
        say("seeing", "camera 'top' images again")
        wait_for(lambda: not planner.blind, 10, "the planner to hear that perception sees")
    finally:
        node.destroy_node()


class FakeRewardPlanner:
    """Stands in for the LLM reward planner: records what it was asked, returns fixed specs."""

    def __init__(self, objects: list[str]) -> None:
        self.objects = objects
        self.calls: list[tuple[str, object]] = []

    def plan(self, instruction, current=None, *, positions=None, headings=None):
        from lang2policy.l2r.planner import RewardPlan
        from lang2policy.rewards.spec import validate_spec

        self.calls.append((instruction, current))
        height = 0.1 if current is None else current.term("object_height").params["height"] + 0.05
        spec = validate_spec(
            {
                "task": instruction,
                "terms": [
                    {"term": "object_height", "params": {"object": "red block", "height": height}}
                ],
            },
            self.objects,
        ).spec
        return RewardPlan(spec, current is None, (), "description", "set_height(...)")


def test_reward_instructions_are_routed_to_a_spec_and_corrections_edit_it(planner_node_graph):
    planner, send, statuses = planner_node_graph
    fake = FakeRewardPlanner(planner.conductor.code.object_names())
    planner.conductor.reward.planner_for = lambda objects: fake  # no LLM: routing and topics
    RECEIVED_SPECS.clear()
    send("lift the red block 10 cm")
    done = final_status(statuses, "lift the red block 10 cm", timeout=20)
    assert done["state"] == "done" and done["detail"]["route"] == "reward", done
    received = next(s for s in statuses if s["instruction"] == "lift the red block 10 cm")
    assert received["state"] == "received" and received["detail"] == {"route": "reward"}
    first = wait_for(lambda: RECEIVED_SPECS[:1], 10, "the published spec")[0]
    assert first == done["detail"]["spec"] and first["terms"][0]["params"]["height"] == 0.1
    send("higher")
    assert final_status(statuses, "higher", timeout=20)["detail"]["new_task"] is False
    second = wait_for(lambda: RECEIVED_SPECS[1:2], 10, "the edited spec")[0]
    assert second["terms"][0]["params"]["height"] == pytest.approx(0.15)
    assert fake.calls[0][1] is None and fake.calls[1][1].task == "lift the red block 10 cm"
    assert planner.conductor.reward.running.task == "higher"


def test_object_headings_for_the_reward_planner_come_from_marker_quaternions():
    import math

    from lang2policy.ros.planner_node import _yaw_degrees

    assert _yaw_degrees((math.cos(0.5), 0.0, 0.0, math.sin(0.5))) == pytest.approx(57.29578)
    assert _yaw_degrees((1.0, 0.0, 0.0, 0.0)) == 0.0
