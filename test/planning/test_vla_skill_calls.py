"""``vla_skill(...)`` in policy code (issue 18): a skill of the robot API that the sandbox's
privilege gate decides per call by the rule of skill plans (``vla-skill``), and that runs the
VLA: in this process the shipped checkpoint on the session's own simulated arm, in the graph
the VLA node through the skill route. The prompt and the grammars offer it only with a VLA.

Real parts: the sandbox runner and its child, the default policy, the simulated arm, the
shipped model. The graph's VLA node is ``FakeVLA`` (support/conductor.py); the ROS path of the
same route is ros/test_skill_plan.py. The shipped policy rarely succeeds, so the tests ask
that the call ran within its limits and returned a bool, not that it succeeded."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.conductor import FakeVLA, make_skill, poll_until
from support.grammar import PARSERS, rejected_at

from lang2policy.conductor import SimCodeExecutor
from lang2policy.planning.cap import CodeAsPoliciesPlanner
from lang2policy.planning.code_grammar import code_grammars
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.catalog import SKILLS

LIMITS = SandboxLimits(wall_seconds=120, cpu_seconds=20, memory_mb=512)
OBJECTS = ["red block", "blue bowl"]


def runner_for(code: SimCodeExecutor) -> SandboxRunner:
    policy = default_policy(code.backend.description, known_skills=SKILLS)
    return SandboxRunner(code.backend, policy, limits=LIMITS)


@pytest.fixture(scope="module")
def local():
    code = SimCodeExecutor(SimSession("so101"), vla=True)
    code.reset(3, OBJECTS)
    return code


def test_in_process_the_shipped_vla_runs_on_the_sessions_arm_within_its_limits(local):
    before = local.session.robot.get_observation().position.copy()
    program = (
        "ok = vla_skill('lift the red block', time_budget_s=2.0, max_joint_speed=0.8)\n"
        "say('lifted' if ok else 'not lifted')\n"
    )
    outcome = runner_for(local).run(program)
    assert outcome.ok, outcome.message
    call = outcome.intents[0]
    assert (call.skill, call.decision, call.rule) == ("vla_skill", "allowed", "vla-skill")
    assert outcome.said in (["lifted"], ["not lifted"])
    result = local.backend.vla.results[-1]
    print(f"\nin-process vla_skill: {result}")
    assert 1.9 <= result.sim_seconds <= 2.2 or result.success  # the budget, in simulated s
    assert result.steps >= 15  # 10 Hz policy steps
    moved = np.abs(local.session.robot.get_observation().position - before)[:5]
    assert moved.max() > 0.005, "the policy moved the arm"
    assert moved.max() <= 0.8 * result.sim_seconds + 0.05  # never faster than the cap


def test_the_gate_decides_each_call_and_a_denied_one_moves_nothing(local):
    ran = len(local.backend.vla.results)
    program = "vla_skill('lift the red block', max_joint_speed=3.0)\n"
    outcome = runner_for(local).run(program)
    assert not outcome.ok
    call = outcome.intents[0]
    assert call.decision == "denied" and "max_joint_speed=3 fails" in call.error
    far = runner_for(local).run("vla_skill('lift the yellow block')\n")
    assert "'yellow block' is not in the scene" in far.intents[0].error
    assert len(local.backend.vla.results) == ran  # nothing ran


def test_without_a_vla_the_call_is_refused_clearly():
    code = SimCodeExecutor(SimSession("so101"))
    code.reset(3, OBJECTS)
    outcome = runner_for(code).run("vla_skill('lift the red block')\n")
    assert not outcome.ok
    assert "no VLA policy runs here" in outcome.intents[0].error


def test_in_the_graph_a_call_runs_on_the_vla_node_through_the_skill_route():
    vla = FakeVLA(final="success")
    conductor, _ = make_skill(vla)
    program = "ok = vla_skill('lift the red block', time_budget_s=5.0)\nsay(str(ok))\n"
    outcome = conductor.planning.runner.run(program)
    assert outcome.ok and outcome.said == ["True"], outcome.message
    start = json.loads(vla.sent[0])
    assert start["skill"] == "lift the red block"
    assert (start["limits"]["time_budget_s"], start["limits"]["max_joint_speed"]) == (5.0, 1.0)
    vla.final = "timeout"
    again = conductor.planning.runner.run(program)
    assert again.said == ["False"]


def test_prompts_and_grammars_offer_it_only_with_a_vla(vocab):
    assert "def vla_skill(" in CodeAsPoliciesPlanner(object(), vla=True).prompts.main
    assert "def vla_skill(" not in CodeAsPoliciesPlanner(object()).prompts.main
    code = "ok = vla_skill('lift the red block')\n#"
    with_vla = code_grammars(OBJECTS, PARSERS, vla=True).program
    assert rejected_at(vocab, with_vla, code) is None
    assert rejected_at(vocab, code_grammars(OBJECTS, PARSERS).program, code) is not None


def test_corrections_reach_a_code_plans_vla_call_and_stop_ends_the_plan():
    program = "ok = vla_skill('lift the red block')\nsay(str(ok))\n"
    instruction = "use the learned policy on the red block"  # not a skill phrasing: code
    vla = FakeVLA(final=None)
    conductor, outlet = make_skill(vla, programs={instruction: program})
    conductor.instruct(instruction)
    poll_until(lambda: vla.plan_id, "the start")
    conductor.corrections.correct("a bit higher")
    poll_until(lambda: outlet.states().count("correction") == 2, "the VLA's answer")
    assert json.loads(vla.sent[-1])["motion"] == "a bit higher"
    conductor.corrections.correct("stop")

    def plan_end():  # the plan's own final line (the stop's own "stopped" line comes first)
        ends = [e.detail for e in outlet.events if e.state in ("done", "failed", "stopped")]
        return next((d for d in ends if isinstance(d, dict) and d.get("route") == "code"), None)

    poll_until(plan_end, "the plan's end", timeout=20.0)
    final = plan_end()
    assert final["outcome"] == "stopped", final  # a plan a stop ended ends stopped
    assert outlet.states()[-1] == "stopped"
    assert vla.sent[-1] == "" and conductor.outlet.stop_requests == 1
    assert "True" not in final["said"] and "False" not in final["said"]  # it ended there


def test_a_call_never_outlasts_what_is_left_of_the_plans_motion_budget():
    """The sandbox hands each motion call the rest of the plan's motion budget
    (``budgets.max_motion_seconds``); a VLA skill runs on its own for its whole time budget,
    so its budget is cut to that rest: 50 s into a 60 s plan, a 30 s skill gets 10 s."""
    code = SimCodeExecutor(SimSession("so101"))
    code.reset(3, OBJECTS)
    asked: list[dict] = []
    code.backend.vla = lambda args: asked.append(args) or True
    args = {"instruction": "lift the red block", "time_budget_s": 30.0, "max_joint_speed": 1.0}
    assert code.backend.execute("vla_skill", args, time_limit=10.0) is True
    assert asked[-1]["time_budget_s"] == 10.0
    code.backend.execute("vla_skill", dict(args, time_budget_s=2.0), time_limit=10.0)
    assert asked[-1]["time_budget_s"] == 2.0
    code.backend.execute("vla_skill", args)
    assert asked[-1]["time_budget_s"] == 30.0


class _Reaching:
    """A stand-in VLA that always asks for the arm straight up (tool 0.52 m high), and a
    renderer that draws nothing: the limits, not the policy, are under test."""

    target = np.array([0.0, 0.0, -1.5, 0.0, 0.0, 1.0])

    def reset(self) -> None: ...

    def act(self, images, state, instruction):
        return self.target

    def sync_look(self) -> None: ...

    def render(self, data, camera):
        return np.zeros((4, 4, 3), np.uint8)


def test_in_process_the_tool_stays_in_the_box_the_gate_decided():
    """A plan allowing VLA skills only below 15 cm: the sandbox hands the gate's box to the
    in-process VLA, and every command is limited before it is sent (the VLA node's
    ``TargetLimiter``), so a policy reaching up leaves the tool at the box's ceiling, not
    above it (before: the robot's 45 cm box, checked after each step)."""
    from lang2policy.sandbox.policy import PrivilegePolicy
    from lang2policy.vla.skill.local import LocalSkillRunner

    code = SimCodeExecutor(SimSession("so101"))
    code.reset(3, OBJECTS)
    runner = LocalSkillRunner(code.session)
    runner._policy = runner._renderer = _Reaching()
    asked: list[dict] = []
    code.backend.vla = lambda args: asked.append(args) or runner(args)
    base = default_policy(code.backend.description, known_skills=SKILLS)
    box = base.zones["workspace"]
    low = {"min": list(box.min), "max": [*box.max[:2], 0.15]}
    args = {"max_joint_speed": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5},
            "time_budget_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 60}}
    rule = {"id": "low", "skill": "vla_skill", "effect": "allow",
            "when": {"targets_in": "low", "objects_in_scene": True, "args": args}}
    plan = {"version": 1, "rules": [rule, {"id": "say", "skill": "say", "effect": "allow"}],
            "zones": {"low": low}}  # fmt: skip
    policy = base.narrowed(PrivilegePolicy.from_dict(plan, box, "plan",
                                                     known_skills=SKILLS))  # fmt: skip
    heights: list[float] = []
    code.session.robot.observers.append(
        lambda: heights.append(float(code.session.primitives.tool_point()[2]))
    )
    program = "vla_skill('lift the red block', time_budget_s=2.0, max_joint_speed=1.0)\n"
    outcome = SandboxRunner(code.backend, policy, limits=LIMITS).run(program)
    assert outcome.ok, outcome.message
    assert asked[-1]["workspace"].max[2] == 0.15  # the gate's box, not the robot's
    result = runner.results[-1]
    print(f"\nhighest tool point {max(heights):.4f} m (box ceiling 0.15): {result}")
    assert result.steps >= 15 and "time budget" in result.detail
    assert max(heights) > 0.13, "the policy pushed the tool up to the ceiling"
    assert max(heights) <= 0.15 + 0.005  # the measured tool, within 5 mm of the face
