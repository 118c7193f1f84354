"""A code plan's loop: plan an instruction, run the program in the sandbox, repair once.

``PlanLoop.handle(instruction)`` asks the planner for a program, runs it with the
``SandboxRunner`` (the only way a program runs), and, when the outcome is not ok, gives the LLM
the failed program and the sandbox's structured feedback for one corrected program, which runs
too. An LLM failure (unreachable server, timeout, replay miss, cut-off answer) becomes an
outcome of kind ``rejected`` that says so; nothing runs then and the arm is not moved.

Successful instructions join ``history`` as (instruction, code): the main code, then one comment
line per object the program moved saying where it was before, e.g.
``# (the red block was at [0.21, 0.06, 0.01])``. The planner shows the history before the
next instruction, so "now put it back" and "undo that" can be answered with positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import Lang2PolicyError, LLMError
from lang2policy.planning.cap import CodeAsPoliciesPlanner, GeneratedProgram
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.skills.backend import SkillBackend
from lang2policy.text_quote import one_line

Status = Callable[[str], None]
MOVED_METRES = 0.02  # an object whose centre moved farther than this (in x, y) was moved


@dataclass
class InstructionResult:
    instruction: str
    program: GeneratedProgram | None  # None when the LLM failed; the outcome explains
    outcome: PlanOutcome  # final outcome (after the one repair attempt, if any)
    attempts: int  # 1 or 2
    first_outcome: PlanOutcome | None = None  # the failed first attempt when a repair ran

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    def as_dict(self) -> dict:
        return {
            "instruction": self.instruction,
            "ok": self.ok,
            "program": None if self.program is None else self.program.as_dict(),
            "outcome": self.outcome.as_dict(),
            "attempts": self.attempts,
            "first_outcome": None if self.first_outcome is None else self.first_outcome.as_dict(),
        }


class PlanLoop:
    """Keeps history; plans, runs through the sandbox, repairs once."""

    def __init__(
        self, planner: CodeAsPoliciesPlanner, runner: SandboxRunner, backend: SkillBackend
    ) -> None:
        self.planner, self.runner, self.backend = planner, runner, backend
        self.history: list[tuple[str, str]] = []
        # Asked after a failed run: True (e.g. the person said stop) skips the repair attempt.
        self.cancelled: Callable[[], bool] = lambda: False

    def reset(self) -> None:
        """Forget the history (a new scene)."""
        self.history.clear()

    def handle(self, instruction: str, on_status: Status | None = None) -> InstructionResult:
        status = on_status or (lambda _text: None)
        objects = self.backend.object_names()
        before = self._positions(objects)
        history = list(self.history)
        status(f"planning: {one_line(instruction)}")
        try:
            program = self.planner.generate(instruction, objects, history)
        except LLMError as exc:
            status("failed: the LLM call failed")
            return InstructionResult(instruction, None, _llm_failure(exc), attempts=1)
        outcome = self._run(program, status)
        if outcome.ok:
            return self._succeeded(instruction, program, outcome, before, 1, None, status)
        if self.cancelled():
            status(f"cancelled: {outcome.headline()}")
            return InstructionResult(instruction, program, outcome, attempts=1)
        status(f"repairing after: {outcome.headline()}")
        try:
            repaired = self.planner.repair(
                instruction, objects, history, program, outcome.feedback()
            )
        except LLMError as exc:
            status("failed: the LLM call for the repair failed")
            final = _llm_failure(exc, f"no repair was run after: {outcome.headline()};")
            return InstructionResult(instruction, program, final, 2, outcome)
        second = self._run(repaired, status)
        if second.ok:
            return self._succeeded(instruction, repaired, second, before, 2, outcome, status)
        status(f"failed: {second.headline()}")
        return InstructionResult(instruction, repaired, second, 2, outcome)

    def _run(self, program: GeneratedProgram, status: Status) -> PlanOutcome:
        status(
            f"running the program ({program.code.count(chr(10))} lines, "
            f"{len(program.functions)} generated functions, {program.llm_calls} LLM calls in "
            f"{program.llm_seconds:.1f} s)"
        )
        return self.runner.run(program.code)

    def _succeeded(self, instruction, program, outcome, before, attempts, first, status):
        moved = self._moved_lines(before)
        self.history.append((instruction, "\n".join([program.main.strip("\n"), *moved])))
        status(f"done: {outcome.headline()}")
        return InstructionResult(instruction, program, outcome, attempts, first)

    def _positions(self, objects: list[str]) -> dict[str, np.ndarray]:
        positions = {}
        for name in objects:
            try:
                value = self.backend.execute("get_obj_pos", {"obj": name})
            except Lang2PolicyError:
                continue
            positions[name] = np.asarray(value, dtype=float)
        return positions

    def _moved_lines(self, before: dict[str, np.ndarray]) -> list[str]:
        """One history comment per object that moved. Object names come from the scene
        (perception, the network), so each is quoted with ``one_line``: a line break in a name
        cannot start an uncommented line of the next prompt's history."""
        after = self._positions(list(before))
        lines = []
        for name, start in before.items():
            end = after.get(name)
            if end is not None and np.linalg.norm(end[:2] - start[:2]) > MOVED_METRES:
                where = ", ".join(f"{v:.2f}" for v in start)
                lines.append(f"# (the {one_line(name)} was at [{where}])")
        return lines


def _llm_failure(exc: LLMError, what: str = "no program was run:") -> PlanOutcome:
    return PlanOutcome("rejected", f"{what} the LLM call failed ({type(exc).__name__}): {exc}")
