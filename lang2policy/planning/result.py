"""What handling one instruction gave: the program, the outcome, the verdict by its goal."""

from __future__ import annotations

from dataclasses import dataclass

from lang2policy.planning.cap import GeneratedProgram
from lang2policy.planning.goals import Verdict
from lang2policy.sandbox.outcome import PlanOutcome


@dataclass
class InstructionResult:
    instruction: str
    program: GeneratedProgram | None  # None when the LLM failed; the outcome explains
    outcome: PlanOutcome  # final outcome (after the one re-plan, if any)
    attempts: int  # 1 or 2
    first_outcome: PlanOutcome | None = None  # the failed first attempt when a re-plan ran
    verdict: Verdict | None = None  # judged by the goal; None when nothing ran
    first_program: GeneratedProgram | None = None  # the first attempt's, when a re-plan ran
    first_verdict: Verdict | None = None

    @property
    def ok(self) -> bool:
        return self.verdict.ok if self.verdict is not None else False

    def as_dict(self) -> dict:
        return {
            "instruction": self.instruction,
            "ok": self.ok,
            "verdict": self.verdict.verdict if self.verdict else "failed",
            "goal": self.verdict.goal.describe() if self.verdict else "",
            "reason": self.verdict.reason if self.verdict else self.outcome.headline(),
            "program": None if self.program is None else self.program.as_dict(),
            "outcome": self.outcome.as_dict(),
            "attempts": self.attempts,
            "first_outcome": None if self.first_outcome is None else self.first_outcome.as_dict(),
        }
