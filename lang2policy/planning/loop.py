"""A code plan's loop: plan, check on a copy, run, judge by the goal, re-plan once.

``PlanLoop.handle(instruction)``:

1. asks the planner for a program and states its goal (``goals.state_goal``: the relation the
   person asked for, or what the program aims at, or "nothing to move" for a question);
2. with ``grounding.dry_run``, runs it first on a simulated copy of the scene (``DryRun``): a
   program that fails there, or does not reach its goal there, never moves the arm;
3. runs it with the ``SandboxRunner`` (the only way a program runs) and judges the outcome by
   the goal in the world (``goals.judge``): goal reached, finished but goal not reached,
   answered, refused or failed;
4. when it did not succeed, gives the LLM the program, the sandbox's feedback and the verdict's
   reason for one corrected program, which goes through 2-3 too.

An LLM failure (unreachable server, timeout, replay miss, cut-off answer) becomes an outcome of
kind ``rejected`` that says so; nothing runs then and the arm is not moved.

Only plans that reached their goal (or answered) join ``history`` as (instruction, code): the
main code, then one comment line per object the program moved saying where it was before,
e.g. ``# (the red block was at [0.21, 0.06, 0.01])``. Failed, refused and repaired-into-``say``
plans never become examples for the next instruction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from lang2policy.errors import Lang2PolicyError, LLMError
from lang2policy.planning.candidates import Choice
from lang2policy.planning.candidates import plan as plan_candidates
from lang2policy.planning.cap import CodeAsPoliciesPlanner, GeneratedProgram
from lang2policy.planning.dry_run import DryRun
from lang2policy.planning.goals import Goal, Verdict, corrected_goal, judge, state_goal
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.progress import llm_budget, waiting
from lang2policy.planning.reader_plan import MovedMemory, moved_between, read_plan
from lang2policy.planning.request_programs import Refusal
from lang2policy.planning.result import InstructionResult
from lang2policy.planning.sequence import PlanBackend, run_steps
from lang2policy.planning.steps import split_steps
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.process import ChildProcess
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.sandbox.spare_child import SpareChild
from lang2policy.text_quote import one_line, prompt_quote

if TYPE_CHECKING:
    from lang2policy.planning.correcting import ArgEdits

Status = Callable[[str], None]
Event = Callable[[str, object], None]  # ("plan" | "said", detail)
# What most first instructions ask (the start-up warm-up plans for it: its examples, its prompt).
TYPICAL_INSTRUCTION = "put the red block in the blue bowl"


@dataclass
class Attempt:
    """One program, its goal, and how its run went."""

    program: GeneratedProgram
    goal: Goal
    outcome: PlanOutcome
    verdict: Verdict


class PlanLoop:
    """Keeps history; plans, checks, runs through the sandbox, judges, re-plans once."""

    def __init__(
        self,
        planner: CodeAsPoliciesPlanner,
        runner: SandboxRunner,
        backend: PlanBackend,
        *,
        grounding: GroundingSettings | None = None,
        spare_child: SpareChild | None = None,
    ) -> None:
        self.planner, self.runner, self.backend = planner, runner, backend
        self.grounding = grounding or GroundingSettings.off()
        self.history: list[tuple[str, str]] = []
        # Asked after a failed run: True (e.g. the person said stop) skips the re-plan.
        self.cancelled: Callable[[], bool] = lambda: False
        self.on_event: Event = lambda _state, _detail: None  # the plan before it runs; said
        # With a spare: the next program's sandbox child (on the copy or the arm) starts ahead
        self.spare_child = spare_child
        start_child = ChildProcess if spare_child is None else spare_child.take
        if spare_child is not None:
            runner.start_child = start_child
        self._dry_run = (
            DryRun(runner.policy, runner.limits, start_child) if self.grounding.dry_run else None
        )
        self.choice: Choice | None = None  # the scored candidates of the last instruction
        self.moved = MovedMemory()  # what "put it back" returns, and where to

    def reset(self) -> None:
        """Forget the history (a new scene)."""
        self.history.clear()
        self.moved.clear()

    def prepare(self) -> str:
        """Pay the first instruction's one-time costs now (hosts call it at start-up, before
        they say they are ready): the example retriever's model and embeddings, and with
        ``grounding.dry_run`` one rehearsed pick-and-place on the simulated copy. Returns what
        was done, for the start-up log."""
        started = time.monotonic()
        done = []
        if self.grounding.retrieved_examples > 0:
            self.planner.main_prompt(TYPICAL_INSTRUCTION)
            done.append("example retriever loaded")
        if self.spare_child is not None:
            self.spare_child.prepare(self.runner.limits.max_message_bytes)
        if self._dry_run is not None:
            world = self.backend.world
            outcome = self._dry_run.rehearse(world.description.name, world.layout.name)
            done.append(f"check on a copy rehearsed ({outcome.headline()})")
        return f"{', '.join(done) or 'nothing to prepare'} in {time.monotonic() - started:.1f} s"

    def handle(self, instruction: str, on_status: Status | None = None) -> InstructionResult:
        """Plan, check, run and judge ``instruction``; a compound one step by step
        (``steps.split_steps``), stopping at the first step that fails."""
        status = on_status or (lambda _text: None)
        steps = split_steps(instruction, self.backend.object_names())
        if len(steps) > 1:
            return run_steps(self, instruction, steps, status)
        return self.handle_step(instruction, status)

    def handle_step(self, instruction: str, status: Status) -> InstructionResult:
        """One step: the instruction reader's program when it reads the request
        (``reader_plan``), else the LLM's; checked, run, judged, repaired once."""
        objects = self.backend.object_names()
        before = self.positions(objects)
        history = list(self.history)
        status(f"planning: {one_line(instruction)}")
        read = self._read(instruction, before)
        if isinstance(read, Refusal):
            status(f"failed: {read.reason}")
            refused = PlanOutcome("rejected", f"nothing was run: {read.reason}")
            return InstructionResult(instruction, None, refused, 1)
        try:
            program = (
                read[0] if read else self._first_program(instruction, objects, history, status)
            )
        except LLMError as exc:
            status(f"failed: the LLM call failed: {one_line(str(exc))}")
            return InstructionResult(instruction, None, _llm_failure(exc), attempts=1)
        goal = read[1] if read else None
        if goal is not None:
            status(f"planned from the instruction's words (no LLM call); goal: {goal.describe()}")
        first = self._attempt(instruction, program, objects, before, status, goal)
        if first.verdict.ok:
            return self._succeeded(instruction, first, before, 1, None, status)
        if self.cancelled():
            status(f"cancelled: {first.verdict.reason}")
            return InstructionResult(instruction, program, first.outcome, 1, None, first.verdict)
        return self._repair(instruction, objects, history, before, first, status)

    def _repair(self, instruction, objects, history, before, first: Attempt, status: Status):
        """The one re-plan after a failed first attempt: the LLM's corrected program, held to
        the first attempt's goal."""
        program = first.program
        status(f"repairing after: {first.verdict.reason}")
        try:
            budget = llm_budget(getattr(self.planner, "llm", None))
            with waiting(status, "the LLM to correct the program", budget):
                repaired = self.planner.repair(
                    instruction, objects, history, program, _feedback(first)
                )
        except LLMError as exc:
            status(f"failed: the LLM call for the repair failed: {one_line(str(exc))}")
            final = _llm_failure(exc, f"no repair was run after: {first.verdict.reason};")
            return InstructionResult(instruction, program, final, 2, first.outcome, first.verdict)
        second = self._attempt(instruction, repaired, objects, before, status, first.goal)
        if second.verdict.ok:
            result = self._succeeded(instruction, second, before, 2, first.outcome, status)
        else:
            status(f"failed: {second.verdict.reason}")
            result = InstructionResult(
                instruction, repaired, second.outcome, 2, first.outcome, second.verdict
            )
        result.first_program, result.first_verdict = program, first.verdict
        return result

    def _read(self, instruction: str, before: dict[str, np.ndarray]):
        """(program, goal) when the instruction reader plans it, a ``Refusal`` when it reads
        the request but the scene does not allow it, else None (the LLM plans)."""
        world = self.backend.world
        kinds = {name: world.object_kind(name) for name in before}
        read = read_plan(instruction, before, kinds, world.description, self.moved)
        if read is None or isinstance(read, Refusal):
            return read
        self.choice = None
        program = GeneratedProgram(code=read.code, main=read.history)
        return program, read.goal

    def _first_program(self, instruction, objects, history, status: Status) -> GeneratedProgram:
        """The greedy program, or with ``grounding.candidates`` > 1 the best-scoring of that
        many (SayCan style: the model's likelihood with the scene's grounding signals)."""
        self.choice = None
        budget = llm_budget(getattr(self.planner, "llm", None))
        if self.grounding.candidates <= 1:
            with waiting(status, "the LLM to write the program", budget):
                return self.planner.generate(instruction, objects, history)
        with waiting(status, "the LLM to write the candidate programs", budget):
            self.choice = plan_candidates(self.planner, instruction, objects, history)
        status(
            f"chose 1 of {1 + len(self.choice.alternatives)} candidate programs "
            f"(score {self.choice.score.total:.2f})"
        )
        return self.choice.program

    def _attempt(self, instruction, program, objects, before, status: Status, goal=None):
        """State the goal (unless the reader stated it), check on a copy (``dry_run``), run
        on the arm, judge."""
        world = self.backend.world
        kinds = {name: world.object_kind(name) for name in objects}
        if goal is None:
            goal = state_goal(instruction, program.code, objects, kinds)
        if program.problems:  # it breaks the grammar's rules (an endpoint without grammars)
            reason = "the program breaks the scene's rules: " + "; ".join(program.problems)
            refused = PlanOutcome("rejected", reason)
            return Attempt(program, goal, refused, Verdict("failed", goal, reason))
        if self._dry_run is not None:
            checked = self._check_on_copy(program, goal, before, status)
            if checked is not None:
                return checked
        self.on_event(
            "plan",
            {
                "route": "code",
                "code": program.code,
                "goal": goal.describe(),
                **self._scores(program),
            },
        )
        status(
            f"running the program ({program.code.count(chr(10))} lines, "
            f"{len(program.functions)} generated functions, {program.llm_calls} LLM calls in "
            f"{program.llm_seconds:.1f} s)"
        )
        outcome = self.runner.run(program.code)
        for line in outcome.said:
            self.on_event("said", line)
        session = self.backend.session
        if outcome.ok and _judged_on_objects(goal):  # a camera's view is cleared first
            session.observe(list(before), status)
        else:  # the arm stays where the plan left it
            session.sync()
        edits = cast("ArgEdits | None", self.runner.edits)  # the conductor's (correcting.py)
        if edits is not None and edits.accepted:  # the person changed the calls as they ran
            goal = corrected_goal(goal, outcome, objects, kinds)
        return Attempt(program, goal, outcome, judge(goal, outcome, self.backend.world, before))

    def _scores(self, program: GeneratedProgram) -> dict:
        """The chosen candidate's score and the alternatives, when candidates were scored."""
        if self.choice is None or self.choice.program is not program:
            return {"score": None}
        return {
            "score": self.choice.score.total,
            "reasons": self.choice.score.reasons,
            "alternatives": self.choice.alternatives,
        }

    def _check_on_copy(self, program, goal: Goal, before, status: Status) -> Attempt | None:
        """The attempt as it ended on the simulated copy when it would not succeed there (the
        arm does not move); None when the copy reached the goal."""
        status("checking the program on a simulated copy of the scene")
        assert self._dry_run is not None  # called only with a dry run (_attempt)
        outcome, copy = self._dry_run.run(program.code, self.backend.world)
        verdict = judge(goal, outcome, copy, before)
        if verdict.ok:
            return None
        verdict.reason = f"on a simulated copy (the arm did not move): {verdict.reason}"
        return Attempt(program, goal, outcome, verdict)

    def _succeeded(self, instruction, attempt: Attempt, before, attempts, first, status):
        after = self.positions(list(before))  # read once: the memory and the history share it
        self.moved.remember(before, after)
        code = "\n".join([attempt.program.main.strip("\n"), *moved_lines(before, after)])
        self.history.append((instruction, code))
        status(f"done: {attempt.verdict.verdict.replace('_', ' ')}: {attempt.goal.describe()}")
        return InstructionResult(
            instruction, attempt.program, attempt.outcome, attempts, first, attempt.verdict
        )

    def positions(self, objects: list[str]) -> dict[str, np.ndarray]:
        positions = {}
        for name in objects:
            try:
                value = self.backend.execute("get_obj_pos", {"obj": name})
            except Lang2PolicyError:
                continue
            positions[name] = np.asarray(value, dtype=float)
        return positions


def _judged_on_objects(goal: Goal) -> bool:
    """Whether ``goal`` is read from where objects are: not an answer, nor the arm's own
    motion (the arm must stay where the person asked it to go)."""
    if goal.kind == "answer":
        return False
    return goal.kind != "moved" or bool(goal.moved)


def moved_lines(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> list[str]:
    """One history comment per object that moved. Object names come from the scene
    (perception, the network), so each is quoted with ``prompt_quote``: a line break in a
    name cannot start an uncommented line of the next prompt's history."""
    return [
        f"# (the {prompt_quote(name)} was at [{', '.join(f'{v:.2f}' for v in before[name])}])"
        for name in moved_between(before, after)
    ]


def _feedback(attempt: Attempt) -> str:
    """What the re-plan prompt quotes: the sandbox's feedback, or the unmet goal."""
    feedback = attempt.outcome.feedback()
    if attempt.outcome.ok or attempt.verdict.reason not in feedback:
        feedback = "\n".join(x for x in (feedback, f"not done: {attempt.verdict.reason}") if x)
    return feedback


def _llm_failure(exc: LLMError, what: str = "no program was run:") -> PlanOutcome:
    return PlanOutcome("rejected", f"{what} the LLM call failed ({type(exc).__name__}): {exc}")
