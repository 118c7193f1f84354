"""Status never lies (issue 15, item 4): a plan is "done" only when its success condition holds
in the simulator; a program that only ``say``s for a motion instruction is not ok; a program is
checked on a simulated copy before the arm moves; failed plans never join the history.

The arm, sandbox, privilege policy and conductor are real; the LLM planner is scripted (it
returns the programs the offline model wrote in the issue's report), so each case is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.conductor import Conductor, SimCodeExecutor, SpecHandOff
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.graph.topics import StatusEvent
from lang2policy.planning.cap import GeneratedProgram
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.planning.goals import state_goal
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.loop import PlanLoop
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.catalog import SKILLS

OBJECTS = ["red block", "green block", "yellow bowl", "green bowl"]
PUT = "put the red block in the yellow bowl"
SAY_ONLY = "say('I see no blue bowl, only the green block')"
WRONG_BOWL = "put_first_on_second('red block', 'green bowl')"
RIGHT = "put_first_on_second('red block', 'yellow bowl')"


class ScriptedPlanner:
    """Stands in for the LLM planner: each instruction's programs in the order asked for."""

    def __init__(self, programs: dict[str, list[str]]) -> None:
        self.programs = {k: list(v) for k, v in programs.items()}
        self.feedback: list[str] = []
        self.asked_history: list[list] = []

    def _next(self, instruction: str) -> GeneratedProgram:
        queue = self.programs[instruction]
        code = queue.pop(0) if len(queue) > 1 else queue[0]
        return GeneratedProgram(code=code, main=code)

    def generate(self, instruction, objects, history):
        self.asked_history.append(list(history))
        return self._next(instruction)

    def repair(self, instruction, objects, history, program, feedback):
        self.feedback.append(feedback)
        return self._next(instruction)


class Outlet:
    def __init__(self) -> None:
        self.events: list[StatusEvent] = []

    def status(self, event: StatusEvent) -> None:
        self.events.append(event)

    def send_spec(self, spec) -> None:
        pass

    def request_stop(self) -> bool:
        return True

    def of(self, state: str) -> list:
        return [e.detail for e in self.events if e.state == state]


def conductor(programs: dict[str, list[str]], grounding: GroundingSettings | None = None):
    code = SimCodeExecutor(SimSession("so101"))
    code.reset(2, list(OBJECTS))
    outlet = Outlet()
    policy = default_policy(code.backend.description, known_skills=SKILLS)
    runner = SandboxRunner(code.backend, policy, limits=SandboxLimits(wall_seconds=60))
    loop = PlanLoop(ScriptedPlanner(programs), runner, code.backend, grounding=grounding)
    reward = RewardRoute(SpecHandOff(outlet), lambda objects: None)
    return Conductor(outlet, code, loop, reward, CorrectionRouter(None), "code"), outlet


def test_a_program_that_only_says_is_not_reported_as_done():
    """The issue's case: the offline model named a 'blue bowl' that is not there and the repair
    turned the program into a say(); main reported "done — ok — the program finished"."""
    host, outlet = conductor({PUT: [SAY_ONLY]})
    result = host.handle(PUT)
    assert result.state == "failed", result.detail
    assert result.detail["verdict"] == "goal_not_reached"
    assert result.detail["goal"] == "is_in('red block', 'yellow bowl')"
    assert "without moving anything" in result.detail["message"]
    assert "only said" in result.detail["message"]
    assert result.detail["said"] == ["I see no blue bowl, only the green block"]
    assert outlet.of("said") == ["I see no blue bowl, only the green block"] * 2  # both tries
    assert host.planning.history == []  # a failed plan is never an example for the next one


def test_a_finished_program_that_misses_the_goal_is_re_planned_with_the_reason():
    host, outlet = conductor({PUT: [WRONG_BOWL, RIGHT]})
    result = host.handle(PUT)
    assert result.state == "done" and result.detail["verdict"] == "goal_reached"
    assert result.detail["attempts"] == 2
    feedback = host.planning.planner.feedback[0]
    assert "is_in('red block', 'yellow bowl') does not hold" in feedback
    world = host.code.session.world
    assert world.is_in("red block", "yellow bowl")
    plans = outlet.of("plan")
    assert plans[-1]["code"] == RIGHT and plans[-1]["goal"] == "is_in('red block', 'yellow bowl')"
    assert host.planning.history and host.planning.history[0][0] == PUT


def test_a_program_that_fails_on_the_simulated_copy_never_moves_the_arm():
    grounded = GroundingSettings(grammar=False, candidates=1, retrieved_examples=0)
    unreachable = "move_to([0.30, 0.0, 0.10])\nput_first_on_second('red block', [0.9, 0.0, 0.05])"
    host, outlet = conductor({"reach far": [unreachable]}, grounded)
    world = host.code.session.world
    start = world.arm_qpos().copy()
    result = host.handle("reach far")
    assert result.state == "failed" and result.detail["verdict"] in ("failed", "refused")
    assert "simulated copy" in result.detail["message"]
    assert np.allclose(world.arm_qpos(), start, atol=1e-3)  # the arm never moved
    assert outlet.of("plan") == []  # nothing was about to run on the arm


def test_questions_are_answered_and_goals_are_stated_from_the_instruction():
    question = "where is the red block?"
    answer = "x = get_obj_pos('red block')[0]\nsay('at x = ' + str(round(float(x), 2)))"
    host, _ = conductor({question: [answer]})
    result = host.handle(question)
    assert result.state == "done" and result.detail["verdict"] == "answered"
    kinds = {"red block": "block", "green block": "block", "yellow bowl": "bowl"}
    polite = state_goal("could you put the red block in the yellow bowl?", "", OBJECTS, kinds)
    assert polite.describe() == "is_in('red block', 'yellow bowl')"  # a request, not a question
    stack = state_goal("stack the red block on the green block", "", OBJECTS, kinds)
    assert stack.describe() == "is_on('red block', 'green block')"
    aimed = state_goal("tidy up", RIGHT, OBJECTS, kinds)
    assert aimed.describe() == "is_in('red block', 'yellow bowl')"
    moved = state_goal(
        "nudge the green block", "push('green block', [0.2, 0.1, 0.0])", OBJECTS, kinds
    )
    assert moved.describe() == "moved('green block')"


@pytest.mark.parametrize("verdict_program", [SAY_ONLY, "pass"])
def test_lang2policy_run_exits_1_when_the_goal_is_not_reached(verdict_program):
    from lang2policy.commands.run import _code_lines, main_exit_code

    host, _ = conductor({PUT: [verdict_program]})
    result = host.handle(PUT).code.as_dict()
    report = {"result": result}
    assert main_exit_code(report) == 1
    assert any(line.startswith("verdict: goal not reached") for line in _code_lines(report))


class ScriptedLLM:
    """Stands in for the LLM: answers in order (greedy first, then the samples)."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.options = list(answers), []

    def complete(self, prompt, *, stop=None, max_tokens=None, **options):
        from lang2policy.llm.client import LLMReply

        self.options.append(options)
        return LLMReply(self.answers.pop(0), "stop", None, None, 0.0, "scripted")


def test_scored_candidates_choose_the_program_that_names_the_instructions_objects():
    from lang2policy.planning.cap import CodeAsPoliciesPlanner

    grounding = GroundingSettings(grammar=False, candidates=3, retrieved_examples=0)
    llm = ScriptedLLM([WRONG_BOWL, SAY_ONLY, RIGHT])
    code = SimCodeExecutor(SimSession("so101"))
    code.reset(2, list(OBJECTS))
    outlet = Outlet()
    policy = default_policy(code.backend.description, known_skills=SKILLS)
    runner = SandboxRunner(code.backend, policy, limits=SandboxLimits(wall_seconds=60))
    planner = CodeAsPoliciesPlanner(llm, max_depth=0, grounding=grounding)
    loop = PlanLoop(planner, runner, code.backend, grounding=grounding)
    reward = RewardRoute(SpecHandOff(outlet), lambda objects: None)
    host = Conductor(outlet, code, loop, reward, CorrectionRouter(None), "code")
    result = host.handle(PUT)
    assert result.state == "done" and result.detail["code"].strip() == RIGHT
    assert result.detail["attempts"] == 1 and len(result.detail["alternatives"]) == 2
    scores = [result.detail["score"], *(a["score"] for a in result.detail["alternatives"])]
    assert scores == sorted(scores, reverse=True)  # the chosen one scored highest
    assert [o.get("temperature") for o in llm.options][1:] == [0.7, 0.7]  # sampled
    assert outlet.of("plan")[-1]["score"] == result.detail["score"]


def test_a_program_that_breaks_the_scenes_rules_is_not_run_and_is_re_planned():
    """An endpoint without grammars: the post-decoding check's problems stop the program."""
    bad = "put_first_on_second('red block', 'blue bowl')"
    host, outlet = conductor({PUT: [bad, RIGHT]})
    planner = host.planning.planner
    first = planner._next

    def with_problems(instruction):
        program = first(instruction)
        if program.code == bad:
            program.problems = ["'blue bowl' is not on the table"]
        return program

    planner._next = with_problems
    result = host.handle(PUT)
    assert result.state == "done" and result.detail["attempts"] == 2
    assert "'blue bowl' is not on the table" in planner.feedback[0]
    assert [p["code"] for p in outlet.of("plan")] == [RIGHT]  # the bad one never ran
