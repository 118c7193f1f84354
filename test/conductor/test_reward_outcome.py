"""The outcome contract, without ROS: every route ends ``done`` only when the plan's goal was
verified, else ``failed`` with the reason and the measured shortfall; each event is said once.

The reward route waits for the controller's verdict on its spec: the controller node is the port
faked here (``Controller`` says its status lines to the ``SpecHandOff`` as the planner node
relays them); the conductor, the hand-off, the reward route and the correction router are real.
The skill route's VLA is ``test_skill_route.FakeVLA``.
"""

from __future__ import annotations

import json
import time

from support.conductor import FakeVLA, make, make_skill, sim_code

from lang2policy.conductor.spec_handoff import SpecHandOff
from lang2policy.rewards.spec import validate_spec

LIFT = "lift the red block 10 cm"
FINAL = ("done", "failed")


class GoalPlanner:
    """The reward LLM's stand-in: lifts the red block with a success condition (within 1 cm
    of the height, held 0.5 s), 5 cm higher on each edit."""

    def __init__(self, objects) -> None:
        self.objects = list(objects)

    def plan(self, instruction, current=None, *, positions=None, headings=None):
        from lang2policy.l2r.planner import RewardPlan

        height = 0.1 if current is None else current.term("object_height").params["height"] + 0.05
        spec = {
            "task": instruction,
            "duration": 8.0,
            "terms": [
                {"term": "object_height", "params": {"object": "red block", "height": height}}
            ],
            "success": {"all": [{"term": "object_height", "below": 0.01}], "hold": 0.5},
        }
        spec = validate_spec(spec, self.objects).spec
        return RewardPlan(spec, current is None, (), "lift it", "set_height(...)")


class Controller:
    """The controller node's status lines about a task, as the planner node hands them on."""

    def __init__(self, handoff: SpecHandOff) -> None:
        self.handoff = handoff

    def say(self, state: str, task: str, detail: str = "", time_s: float = 0.0, **measures):
        stats = {"time": time_s, "measures": measures}
        line = {"node": "controller", "state": state, "task": task, "detail": detail}
        self.handoff.on_status(line | {"stats": stats, "success": state == "success"})


def reward_conductor(**handoff):
    conductor, outlet = make(sim_code(), {})
    outlet.answer = None  # the test speaks for the controller
    outlet.handoff = conductor.reward.executor = SpecHandOff(outlet, **handoff)
    conductor.reward.make_planner = GoalPlanner
    return conductor, outlet, Controller(outlet.handoff)


def started(conductor, outlet, text: str = LIFT):
    """Start ``text`` and wait until its spec went to the controller."""
    before = len(outlet.specs)
    assert conductor.instruct(text)
    deadline = time.monotonic() + 30
    while not any(outlet.specs[before:]) and time.monotonic() < deadline:
        time.sleep(0.01)
    spec = outlet.specs[-1]
    assert spec is not None and spec.task == text
    return spec


def finals(outlet, text: str = LIFT) -> list[str]:
    return [s for s in outlet.states(text) if s in FINAL]


def each_once(outlet) -> None:
    said = [(e.state, e.instruction, str(e.detail)) for e in outlet.events]
    assert len(said) == len(set(said)), said


# ------------------------------------------------------------------ the reward route
def test_a_reward_plan_is_done_only_after_the_controllers_success_condition_held():
    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("accepted", spec.task)
    controller.say("running", spec.task, time_s=3.0, object_height=0.08)
    controller.say("running", spec.task, time_s=4.0, object_height=0.03)
    time.sleep(0.3)
    assert conductor.busy and finals(outlet) == []  # handed on is not done
    controller.say("success", spec.task, "success conditions held", 6.5, object_height=0.004)
    conductor.wait_idle(10)
    final = outlet.events[-1]
    assert final.state == "done" and final.instruction == LIFT
    detail = final.detail
    assert (detail["verdict"], detail["outcome"]) == ("goal_reached", "success")
    assert detail["goal"] == "object_height <= 0.01 m, held 0.5 s"
    assert detail["controller"] == {
        "state": "success",
        "reason": "success conditions held",
        "task": LIFT,
    }
    assert detail["message"] == "controller: success (success conditions held)"
    assert detail["measures"] == {"object_height": 0.004}
    assert outlet.states(LIFT) == ["received", "planning", "planning", "plan", "running", "done"]
    each_once(outlet)


def test_a_reward_plan_that_cannot_succeed_fails_with_the_controllers_reason_and_the_terms():
    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("accepted", spec.task)
    controller.say("running", spec.task, time_s=1.0, object_height=0.1)
    controller.say("timeout", spec.task, "8 s passed", 9.0, object_height=0.042)
    conductor.wait_idle(10)
    final = outlet.events[-1]
    assert final.state == "failed" and finals(outlet) == ["failed"]
    detail = final.detail
    assert (detail["verdict"], detail["outcome"]) == ("goal_not_reached", "timeout")
    assert detail["message"] == (
        "controller: timeout (8 s passed); object_height 0.042 m (needs <= 0.01)"
    )
    assert detail["measures"] == {"object_height": 0.042}
    each_once(outlet)


def test_lines_of_another_task_or_before_the_acceptance_do_not_end_the_plan():
    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("success", spec.task, "an older run's end, not yet accepted")
    controller.say("accepted", "another task")
    controller.say("success", "another task")
    time.sleep(0.3)
    assert conductor.busy and finals(outlet) == []
    controller.say("rejected", spec.task, "spec.terms[0]: unknown object 'red block'")
    conductor.wait_idle(10)
    detail = outlet.events[-1].detail
    assert outlet.events[-1].state == "failed" and detail["outcome"] == "rejected"
    assert "unknown object 'red block'" in detail["message"] and detail["verdict"] == "failed"


def test_a_controller_that_never_answers_fails_the_plan_saying_so_and_cancels_the_spec():
    conductor, outlet, controller = reward_conductor(accept_timeout_s=0.3, answer_margin_s=0.5)
    started(conductor, outlet)
    conductor.wait_idle(10)
    detail = outlet.events[-1].detail
    assert outlet.events[-1].state == "failed" and detail["outcome"] == "no_answer"
    assert "did not answer the spec within 0.3 s" in detail["message"]
    assert outlet.specs[-1] is None  # nothing left running that nobody reports on

    spec = started(conductor, outlet)  # accepted, then silent: its duration and the margin
    controller.say("accepted", spec.task)
    began = time.monotonic()
    conductor.wait_idle(30)
    assert 8.0 <= time.monotonic() - began < 15.0
    detail = outlet.events[-1].detail
    assert "did not end the task within 8.5 s" in detail["message"]
    assert outlet.specs[-1] is None


def test_a_stop_while_the_controller_runs_the_spec_ends_the_plan_and_the_task():
    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("accepted", spec.task)
    conductor.stop("stop said")
    conductor.wait_idle(10)
    final = outlet.events[-1]
    assert (final.state, final.instruction) == ("stopped", LIFT)
    assert final.detail["outcome"] == "stopped" and final.detail["verdict"] == "failed"
    assert outlet.specs[-1] is None and outlet.states("") == ["stopped"]


def test_an_edit_while_the_spec_runs_is_handed_on_and_the_edited_spec_is_judged():
    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("accepted", spec.task)
    conductor.corrections.correct("a bit higher")
    assert outlet.last("correction").detail["action"] == "edit_spec"
    edited = outlet.specs[-1]
    assert edited.term("object_height").params["height"] > 0.1
    controller.say("success", spec.task, "the old spec's end, before the edit was accepted")
    time.sleep(0.3)
    assert conductor.busy
    controller.say("accepted", edited.task)
    controller.say("success", edited.task, "success conditions held", object_height=0.002)
    conductor.wait_idle(10)
    assert outlet.events[-1].state == "done"
    assert outlet.events[-1].detail["verdict"] == "goal_reached"


# ------------------------------------------------------------------ the skill route
def test_a_skill_plan_is_done_only_on_the_skills_success_check_and_says_each_event_once():
    vla = FakeVLA(final=None)
    conductor, outlet = make_skill(vla)
    text = "lift the red block"
    assert conductor.instruct(text)
    deadline = time.monotonic() + 30
    while not vla.plan_id and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert conductor.busy and finals(outlet, text) == []
    vla.say("timeout", "the time budget of 20 s is spent; lift error 4.2 cm")
    conductor.wait_idle(10)
    final = outlet.events[-1]
    assert final.state == "failed"
    assert final.detail["verdict"] == "goal_not_reached"
    assert final.detail["message"] == "the time budget of 20 s is spent; lift error 4.2 cm"
    assert not [e for e in outlet.events if str(e.detail).startswith("VLA")]  # not repeated
    each_once(outlet)

    vla.final = "success"
    result = conductor.handle(text)
    assert result.state == "done" and result.detail["verdict"] == "goal_reached"
    assert result.detail["goal"] == f"the success check of '{text}'"


def test_the_terminal_shows_the_controllers_verdict_as_the_plans_outcome():
    from lang2policy.terminal.status import StatusModel

    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("accepted", spec.task)
    controller.say("timeout", spec.task, "8 s passed", object_height=0.042)
    conductor.wait_idle(10)
    model = StatusModel()
    notices = [model.fold(json.dumps(e.to_dict())) for e in outlet.events]
    final = notices[-1]
    assert final.final and not final.ok and final.state == "failed"
    assert final.line == (
        f"[planner] failed (reward): {LIFT} — finished but goal not reached: controller: "
        "timeout (8 s passed); object_height 0.042 m (needs <= 0.01)"
    )
    assert final.more == ("    goal: object_height <= 0.01 m, held 0.5 s",)


def test_an_edit_the_controller_rejects_leaves_the_running_spec_to_be_judged():
    conductor, outlet, controller = reward_conductor()
    spec = started(conductor, outlet)
    controller.say("accepted", spec.task)
    conductor.corrections.correct("a bit higher")
    controller.say("rejected", spec.task, "spec.terms[0].params.height: out of range")
    time.sleep(0.3)
    assert conductor.busy  # the first spec runs on at the controller
    controller.say("timeout", spec.task, "8 s passed", object_height=0.03)
    conductor.wait_idle(10)
    final = outlet.events[-1]
    assert final.state == "failed" and final.detail["outcome"] == "timeout"
    assert "object_height 0.030 m" in final.detail["message"]
