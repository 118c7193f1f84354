"""The conductor without ROS: routing, one plan at a time, stop, corrections (applied and
refused by the privilege gate), recall, and the typed status events its host publishes.

The arm is real: a ``SimSession`` in-process, or ``LiveArm`` (a simulated arm stepped by a
thread behind a message boundary, the robot node's part) under a ``LiveCodeExecutor``. The
sandbox runner, its privilege policy and the correction router are the real ones. Test doubles
stand in only for the LLM planners (``ScriptedPlanner`` returns the program a test needs) and
for the host (``RecordingOutlet`` keeps what the planner node would publish).
"""

from __future__ import annotations

import threading
import time

import pytest
from support.conductor import (
    RecordingOutlet,
    ScriptedPlanner,
    ScriptedRewardPlanner,
    make,
    sim_code,
)

from lang2policy.bench.live_arm import OBJECTS, LiveArm
from lang2policy.conductor import Conductor, LiveCodeExecutor, SpecHandOff
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.corrections import CorrectionMemory, classify
from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.planning.loop import PlanLoop
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.catalog import SKILLS

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)


def live_code(arm: LiveArm) -> LiveCodeExecutor:
    return LiveCodeExecutor(arm.session, 5.0, "/lang2policy/objects")


def keep_out(arm: LiveArm) -> PrivilegePolicy:
    base = default_policy(arm.world.description, known_skills=SKILLS)
    path = config_dir() / "policies" / "examples" / "keep_out.yaml"
    return base.narrowed(PrivilegePolicy.load(path, workspace_box(arm.world.description), SKILLS))


def once_moving(conductor: Conductor, arm: LiveArm, after: float = 0.3) -> None:
    """Wait until a motion has run ``after`` s of sim time."""
    deadline = time.monotonic() + 30
    while conductor.code.current_call() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    started = arm.world.time
    while arm.world.time < started + after and time.monotonic() < deadline:
        time.sleep(0.002)
    assert conductor.code.current_call() is not None, "the motion ended too early"


def correct_while_moving(conductor: Conductor, arm: LiveArm, instruction: str, text: str) -> None:
    """Start ``instruction``, say ``text`` once its motion runs, wait for the plan's end."""
    assert conductor.instruct(instruction)
    once_moving(conductor, arm)
    conductor.corrections.correct(text)
    conductor.wait_idle(30)


# ------------------------------------------------------------------ routing and status
def test_instructions_are_routed_by_their_words_and_every_event_names_the_planner():
    put = "put the red block in the blue bowl"
    conductor, outlet = make(sim_code(), {put: 'put_first_on_second("red block", "blue bowl")'})
    result = conductor.handle(put)
    assert result.ok and result.route == "code", result.detail
    assert "red block in blue bowl" in result.detail["relations"]
    assert outlet.states(put)[0] == "received" and outlet.events[0].detail == {"route": "code"}
    assert "running" in outlet.states(put) and outlet.states(put)[-1] == "done"

    lift = "lift the red block 10 cm"
    result = conductor.handle(lift)
    assert result.route == "reward" and result.ok
    assert result.detail["new_task"] and result.detail["outcome"] == "success"
    assert outlet.specs[-1].to_dict() == result.detail["spec"]  # handed to the controller
    follow_up = conductor.handle("higher")  # edits the running spec
    assert follow_up.detail["new_task"] is False
    assert outlet.specs[-1].term("object_height").params["height"] == pytest.approx(0.15)

    back = "put the red block back"
    conductor.planning.planner.programs[back] = 'move_to([0.2, 0.0, 0.15])'
    assert conductor.handle(back).route == "code"
    assert outlet.specs[-1] is None and conductor.reward.running is None  # the task ended
    assert {e.node for e in outlet.events} == {"planner"}
    assert all(e.to_dict()["node"] == "planner" for e in outlet.events)


def test_bad_instructions_are_rejected_and_one_plan_runs_at_a_time():
    slow = "wave"
    program = "move_to([0.25, 0.05, 0.15])\nmove_to([0.2, -0.05, 0.12])\ngo_home()"
    conductor, outlet = make(sim_code(), {slow: program}, route="code")
    assert conductor.handle("   ") is None
    assert outlet.last("rejected").detail.startswith("the instruction is empty")
    assert conductor.instruct(slow)
    assert not conductor.instruct("put the red block in the blue bowl")
    busy = outlet.last("busy")
    assert busy.instruction == "put the red block in the blue bowl"
    conductor.wait_idle(60)
    assert outlet.states(slow)[-1] == "done"
    with pytest.raises(ConfigError, match="not one of"):
        make(sim_code(), {}, route="vla")


# ------------------------------------------------------------------ stop
def test_a_stop_aborts_the_motion_skips_the_repair_and_cancels_the_reward_task(arm):
    far = "go to the front"
    conductor, outlet = make(live_code(arm), {far: "move_to([0.30, 0.0, 0.10], speed=0.02)"})
    conductor.handle("lift the red block 10 cm")
    assert conductor.reward.running is not None
    assert conductor.instruct(far)
    once_moving(conductor, arm)
    conductor.safety_state("stopped")  # the safety node's report
    conductor.safety_state("stopped")  # said again: handled once
    conductor.wait_idle(30)
    final = outlet.events[-1]  # the contract's third end: stopped, not failed
    assert (final.state, final.instruction) == ("stopped", far)
    assert "stop" in str(final.detail["message"])
    assert conductor.planning.planner.repairs == 0
    assert outlet.states("").count("stopped") == 1  # the stop itself, said once
    assert outlet.specs[-1] is None and conductor.reward.running is None
    time.sleep(0.3)
    assert arm.tool()[0] < 0.28  # it did not go on to the target


# ------------------------------------------------------------------ corrections
def test_an_allowed_edit_restarts_the_call_with_it(arm):
    ahead = "move forward"
    conductor, outlet = make(live_code(arm), {ahead: "move_to([0.26, 0.0, 0.10])"})
    correct_while_moving(conductor, arm, ahead, "3 cm further")
    said = outlet.last("correction").detail
    assert said["action"] == "edit_code" and said["text"] == "3 cm further"
    assert outlet.states(ahead)[-1] == "done"
    assert abs(arm.tool()[0] - 0.29) < 0.01


def test_an_edit_the_policy_denies_is_refused_with_the_rule_and_the_arm_stays_inside(arm):
    ahead = "move forward"
    conductor, outlet = make(live_code(arm), {ahead: "move_to([0.30, 0.0, 0.10], speed=0.08)"})
    t0 = arm.world.time
    correct_while_moving(conductor, arm, ahead, "10 cm further")
    refused = [e.detail for e in outlet.events if e.state == "correction"]
    assert [d["action"] for d in refused] == ["edit_code", "refused"]
    assert "workspace" in refused[1]["error"] and refused[1]["text"] == "10 cm further"
    assert outlet.states(ahead)[-1] == "done"  # the call went on unedited
    assert arm.since(t0)[:, 0].max() <= 0.35 + 0.003


def test_a_correction_of_a_running_reward_task_hands_on_the_edited_spec(tmp_path):
    memory = CorrectionMemory(tmp_path / "corrections.jsonl")
    conductor, outlet = make(sim_code(), {}, memory=memory)
    lift = "lift the red block 10 cm"
    conductor.handle(lift)
    conductor.corrections.correct("a bit higher")
    said = outlet.last("correction").detail
    assert said["action"] == "edit_spec", said
    edited = outlet.specs[-1].term("object_height").params["height"]
    assert edited > 0.1 and conductor.reward.running is outlet.specs[-1]
    assert len(memory) == 1  # remembered for similar instructions


def test_a_correction_with_nothing_running_and_a_bad_one_are_rejected():
    conductor, outlet = make(sim_code(), {})
    conductor.corrections.correct("a bit to the left")
    assert outlet.last("correction").detail["action"] == "rejected"
    assert "nothing is running" in outlet.last("correction").detail["error"]
    conductor.corrections.correct("\x00")
    assert outlet.last("correction").detail["kind"] == "invalid"


def test_stop_said_as_a_correction_asks_the_safety_layer_and_ends_the_plan(arm):
    far = "go to the front"
    conductor, outlet = make(live_code(arm), {far: "move_to([0.30, 0.0, 0.10], speed=0.02)"})
    correct_while_moving(conductor, arm, far, "stop")
    assert outlet.stop_requests == 1 and outlet.last("correction").detail["action"] == "stop"
    assert outlet.states(far)[-1] == "stopped" and outlet.states("") == ["stopped"]


# ------------------------------------------------------------------ recall
def test_a_remembered_edit_is_recalled_and_decided_by_the_gate_again(arm, tmp_path):
    memory = CorrectionMemory(tmp_path / "corrections.jsonl")
    memory.remember("move to the front", classify("at 50 cm/s", OBJECTS), {"plan": "code"})
    front = "move to the front"
    program = "move_to([0.25, -0.05, 0.12], speed=0.05)"
    conductor, outlet = make(live_code(arm), {front: program}, policy=keep_out(arm), memory=memory)
    result = conductor.handle(front)
    assert result.ok, result.detail
    remembered = outlet.last("remembered")
    assert remembered.instruction == front and "at 50 cm/s" in remembered.detail[0]
    intents = result.code.outcome.intents
    assert intents[0].args["speed"] == pytest.approx(0.10, abs=0.002)  # capped by keep_out


def test_a_replan_correction_plans_the_text_as_a_follow_up():
    first, second = "wave", "put the red block in the blue bowl instead"
    programs = {first: "move_to([0.25, 0.05, 0.15])\ngo_home()",
                second: 'put_first_on_second("red block", "blue bowl")'}
    conductor, outlet = make(sim_code(), programs, route="code")
    assert conductor.instruct(first)
    routed = threading.Event()
    conductor.corrections.correct(second)
    if outlet.last("correction").detail["action"] == "replan":
        routed.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "done" not in outlet.states(second):
        time.sleep(0.05)
    assert routed.is_set(), outlet.last("correction").detail
    assert outlet.states(second)[-1] == "done"


class RecordingSkills:
    """Stands in for a skill executor (conductor/test_skill_route.py runs the real one):
    records what it was asked to do; it can do anything."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.cancelled = 0

    def refusal(self, instruction) -> str:
        return ""

    def run(self, instruction, scene, on_line, motions=()):
        from lang2policy.conductor import RewardRun

        self.asked.append(instruction)
        on_line("skill running")
        return RewardRun(True, {"outcome": "skill_done"})

    def cancel(self) -> None:
        self.cancelled += 1


def test_the_skill_slot_takes_instructions_under_route_skill_and_needs_a_policy():
    with pytest.raises(ConfigError, match="needs a skill policy"):
        make(sim_code(), {}, route="skill")
    outlet = RecordingOutlet()
    code = sim_code()
    runner = SandboxRunner(code.backend, default_policy(code.backend.description), limits=LIMITS)
    skills = RecordingSkills()
    conductor = Conductor(
        outlet,
        code,
        PlanLoop(ScriptedPlanner({}), runner, code.backend),
        RewardRoute(SpecHandOff(outlet), ScriptedRewardPlanner),
        CorrectionRouter(None),
        "skill",
        skills,
    )
    result = conductor.handle("pick up the red block")
    assert result.ok and result.route == "skill" and skills.asked == ["pick up the red block"]
    assert result.detail == {
        "route": "skill", "outcome": "skill_done", "verdict": "goal_reached", "goal": ""
    }
    assert outlet.events[0].detail == {"route": "skill"}
