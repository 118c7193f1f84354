"""The sandbox runner end to end: real child processes, the real privilege policy, the real
simulated arm. Benign Code-as-Policies programs must move the arm; every failure must come
back as a structured outcome with the arm holding still."""

from __future__ import annotations

import time

import numpy as np
import pytest

from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS

OBJECTS = ["red block", "green block", "blue bowl", "green bowl"]
FAST = SandboxLimits(wall_seconds=3, cpu_seconds=3, memory_mb=512)


@pytest.fixture
def scene(session):
    session.reset(3, OBJECTS)
    return session


def make_runner(session, policy=None, **kwargs) -> SandboxRunner:
    policy = policy or default_policy(session.world.description)
    kwargs.setdefault("limits", FAST)
    return SandboxRunner(SimSkillBackend(session), policy, **kwargs)


def joints(session) -> np.ndarray:
    return session.robot.get_observation().position.copy()


def policy_from(session, rules: list[dict], **extra) -> PrivilegePolicy:
    data = {"version": 1, "rules": rules, **extra}
    return PrivilegePolicy.from_dict(
        data, workspace_box(session.world.description), "test", known_skills=SKILLS
    )


def assert_still(session, before: np.ndarray) -> None:
    """The arm did not move and stays put when time passes."""
    session.world.step_seconds(0.5)
    assert np.abs(joints(session)[:-1] - before[:-1]).max() < 0.02


# ---------------------------------------------------------------- benign programs
CAP_PROGRAM = """
import numpy as np

def block_names():
    return [name for name in get_obj_names() if name.endswith("block")]

def matching_bowl(block):
    return block.replace("block", "bowl")

for block in block_names():
    bowl = matching_bowl(block)
    if bowl in get_obj_names():
        put_first_on_second(block, bowl)
say("done sorting")
"""


def test_code_as_policies_program_moves_blocks_into_bowls(scene):
    outcome = make_runner(scene).run(CAP_PROGRAM)
    assert outcome.ok, outcome.summary()
    scene.world.step_seconds(0.5)
    assert scene.world.is_in("green block", "green bowl")
    assert outcome.said == ["done sorting"]
    assert [i.skill for i in outcome.intents if i.skill == "put_first_on_second"] == [
        "put_first_on_second"
    ]
    assert all(i.decision == "allowed" and i.ok for i in outcome.intents)
    assert outcome.layers == {"namespaces": "on", "rlimits": "on", "seccomp": "on"}


def test_numpy_geometry_moves_the_arm_between_two_objects(scene):
    program = """
a = get_obj_pos("red block")
b = get_obj_pos("blue bowl")
middle = (a + b) / 2
middle[2] = 0.08
move_to(middle)
print("moved to", np.round(get_ee_pos(), 3).tolist())
"""
    outcome = make_runner(scene).run(program)
    assert outcome.ok, outcome.summary()
    a = scene.world.object_pose("red block").position
    b = scene.world.object_pose("blue bowl").position
    target = (a + b) / 2
    target[2] = 0.08
    tool = SimSkillBackend(scene).execute("get_ee_pos", {})  # the point move_to moves
    assert np.linalg.norm(np.array(tool) - target) < 0.01
    assert outcome.output.startswith("moved to")


# ---------------------------------------------------------------- structured errors
def test_syntax_error_reports_the_line_and_the_arm_holds(scene):
    before = joints(scene)
    outcome = make_runner(scene).run("x = 1\nfor i in range(3)\n    pass\n")
    assert outcome.kind == "syntax" and outcome.line == 2
    assert_still(scene, before)


def test_syntax_error_found_by_the_child_without_the_precheck(scene):
    outcome = make_runner(scene, ast_check=False).run("x = (\n")
    assert outcome.kind == "syntax" and outcome.line == 1


def test_runtime_error_says_what_and_where(scene):
    program = "names = get_obj_names()\nx = names[10]\n"
    outcome = make_runner(scene).run(program)
    assert outcome.kind == "runtime"
    assert outcome.exc_type == "IndexError" and outcome.line == 2
    assert outcome.source_line == "x = names[10]"
    assert "IndexError" in outcome.feedback() and "line 2" in outcome.feedback()


def test_unknown_object_is_an_invalid_intent_listing_what_exists(scene):
    before = joints(scene)
    outcome = make_runner(scene).run('pick("purple cat")\n')
    assert outcome.kind == "invalid"
    assert "red block" in outcome.message
    assert outcome.intents[0].decision == "invalid"
    assert_still(scene, before)


def test_target_outside_the_workspace_is_denied_and_the_arm_holds(scene):
    before = joints(scene)
    outcome = make_runner(scene).run("move_to([0.9, 0.0, 0.1])\n")
    assert outcome.kind == "denied"
    assert outcome.intents[0].rule == "default-deny"
    assert "workspace" in outcome.message
    assert_still(scene, before)


def test_denied_call_can_be_caught_and_the_program_continues(scene):
    program = """
try:
    move_to([0.9, 0.0, 0.1])
except SkillError as error:
    say("cannot: " + error.kind)
"""
    outcome = make_runner(scene).run(program)
    assert outcome.ok
    assert outcome.said == ["cannot: denied"]
    assert len(outcome.denied) == 1


def test_speed_above_the_cap_is_forbidden(scene):
    outcome = make_runner(scene).run('pick("red block", speed=0.4)\n')
    assert outcome.kind == "denied"
    assert outcome.intents[0].rule == "speed-limit"


def test_bad_argument_types_are_invalid(scene):
    outcome = make_runner(scene).run("move_to([0.2, 0.0])\n")
    assert outcome.kind == "invalid"
    assert "position" in outcome.message


# ---------------------------------------------------------------- limits
def test_infinite_loop_hits_the_compute_limit(scene):
    outcome = make_runner(scene).run("while True:\n    pass\n")
    assert outcome.kind == "limit" and outcome.limit in ("wall", "cpu")


def test_memory_bomb_hits_the_memory_limit(scene):
    outcome = make_runner(scene).run("x = [0] * (10 ** 9)\n")
    assert outcome.kind == "limit" and outcome.limit == "memory"


def test_printed_output_is_truncated_not_unbounded(scene):
    outcome = make_runner(scene).run("for i in range(100000):\n    print('x' * 100)\n")
    assert outcome.ok
    assert FAST.max_output_bytes <= len(outcome.output) <= FAST.max_output_bytes + 100
    assert outcome.output.endswith("[output truncated]\n")


def test_skill_call_budget(scene):
    policy = policy_from(
        scene,
        [{"id": "q", "skill": "get_ee_pos", "effect": "allow", "priority": 1}],
        budgets={"max_skill_calls": 5, "max_motion_seconds": 10},
    )
    outcome = make_runner(scene, policy).run("for i in range(100):\n    get_ee_pos()\n")
    assert outcome.kind == "limit" and outcome.limit == "skill_calls"
    assert len([i for i in outcome.intents if i.decision == "allowed"]) == 5


def test_motion_time_budget_stops_the_arm(scene):
    policy = policy_from(
        scene,
        [{"id": "all", "skill": "*", "effect": "allow", "priority": 1}],
        budgets={"max_skill_calls": 50, "max_motion_seconds": 0.5},
    )
    outcome = make_runner(scene, policy).run("move_to([0.25, 0.1, 0.05], speed=0.02)\n")
    assert outcome.kind == "limit" and outcome.limit == "motion_time"
    assert outcome.motion_seconds < 1.0
    assert_still(scene, joints(scene))


# ---------------------------------------------------------------- fallbacks
def fallback_policy(session, fallback: str) -> PrivilegePolicy:
    return policy_from(
        session,
        [
            {
                "id": "no-push",
                "skill": "push",
                "effect": "forbid",
                "priority": 1,
                "fallback": fallback,
                "message": "pushing needs a person",
            },
            {"id": "rest", "skill": "*", "effect": "allow", "priority": 50},
        ],
    )


PUSH = 'push("red block", get_obj_pos("red block") + np.array([0.0, 0.03, 0.0]))\nsay("after")\n'


def test_fallback_error_returns_the_message_to_the_program(scene):
    outcome = make_runner(scene, fallback_policy(scene, "error")).run(PUSH)
    assert outcome.kind == "denied"
    assert "pushing needs a person" in outcome.message
    assert outcome.said == []


def test_fallback_ask_runs_the_call_when_the_user_approves(scene):
    asked = []
    start = scene.world.object_pose("red block").position.copy()

    def approve(request, decision):
        asked.append((request.skill, decision.rule))
        return True

    outcome = make_runner(scene, fallback_policy(scene, "ask"), ask_user=approve).run(PUSH)
    assert outcome.ok, outcome.summary()
    assert asked == [("push", "no-push")]
    assert outcome.intents[1].decision == "approved"
    assert np.linalg.norm(scene.world.object_pose("red block").position - start) > 0.015


def test_fallback_ask_denies_when_the_user_declines_or_nobody_is_there(scene):
    before = joints(scene)
    declined = make_runner(scene, fallback_policy(scene, "ask"), ask_user=lambda r, d: False).run(
        PUSH
    )
    assert declined.kind == "denied" and "declined" in declined.message
    nobody = make_runner(scene, fallback_policy(scene, "ask")).run(PUSH)
    assert nobody.kind == "denied" and "no one can be asked" in nobody.message
    assert_still(scene, before)


def test_fallback_stop_ends_the_plan_and_holds_the_arm(scene):
    before = joints(scene)
    outcome = make_runner(scene, fallback_policy(scene, "stop")).run(PUSH)
    assert outcome.kind == "stopped"
    assert outcome.said == []  # nothing after the stopped call ran
    assert_still(scene, before)


# ---------------------------------------------------------------- narrowing
def test_plan_policy_narrows_to_the_instruction_objects(scene):
    plan = policy_from(
        scene,
        [
            {
                "id": "only-red",
                "skill": ["pick", "put_first_on_second"],
                "effect": "allow",
                "priority": 50,
                "when": {
                    "targets_in": "workspace",
                    "objects_in_scene": True,
                    "args": {
                        "obj": {"enum": ["red block"]},
                        "speed": {"type": "number", "maximum": 0.25},
                    },
                },
            },
            {
                "id": "look",
                "skill": ["get_obj_names", "get_obj_pos"],
                "effect": "allow",
                "priority": 100,
            },
        ],
    )
    outcome = make_runner(scene).run('pick("green block")\n', plan)
    assert outcome.kind == "denied" and "only-red" in outcome.message


def test_plan_policy_that_widens_is_rejected_before_running(scene):
    plan = policy_from(scene, [{"id": "anything", "skill": "*", "effect": "allow", "priority": 1}])
    outcome = make_runner(scene).run("get_ee_pos()\n", plan)
    assert outcome.kind == "rejected" and "widen" in outcome.message
    assert outcome.intents == []


# ---------------------------------------------------------------- pre-check
def test_precheck_rejects_dunder_access_with_the_line(scene):
    outcome = make_runner(scene).run("x = 1\ny = ().__class__\n")
    assert outcome.kind == "rejected" and outcome.line == 2
    assert "__class__" in outcome.message


def test_state_does_not_persist_between_plans(scene):
    runner = make_runner(scene)
    first = runner.run("def get_ee_pos():\n    return 'patched'\nleftover = 1\n")
    assert first.ok
    second = runner.run("print(get_ee_pos().tolist())\nprint('leftover' in dir())\n")
    assert second.kind == "rejected"  # dir() is not available in policy code
    third = runner.run("print(get_ee_pos().tolist())\nprint(leftover)\n")
    assert third.kind == "runtime" and "leftover" in third.message
    assert third.output.startswith("[")


class StalledBackend(SimSkillBackend):
    """The real backend on a machine so busy that every query waits (no CPU of its own) for
    ``stall`` seconds before it is answered: a second process holding the cores."""

    def __init__(self, session, stall: float) -> None:
        super().__init__(session)
        self.stall = stall

    def execute(self, skill, args, **limits):
        if skill == "get_obj_pos":
            time.sleep(self.stall)
        return super().execute(skill, args, **limits)


def test_a_busy_machine_does_not_cut_a_correct_program_short(session, scene):
    """The compute limit counts CPU time (the child's and the host's planning), not wall
    time: six answers that each wait 0.4 s (2.4 s of waiting) pass a 1 s limit, while a
    program that computes for longer than 1 s is still ended."""
    limits = SandboxLimits(wall_seconds=1, cpu_seconds=3, memory_mb=512)
    policy = default_policy(SimSkillBackend(session).description, known_skills=SKILLS)
    runner = SandboxRunner(StalledBackend(session, 0.4), policy, limits=limits)
    queries = "for _ in range(6):\n    get_obj_pos('red block')\n"
    outcome = runner.run(queries)
    assert outcome.ok, outcome.headline()
    assert outcome.wall_seconds > 2.4
    busy = runner.run("x = 0\nwhile True:\n    x += 1\n")
    assert busy.kind == "limit" and "compute time" in busy.message
