"""What one plan's run keeps while the sandbox child runs: its policy, the intents answered,
the printed output, the sandbox layers and the motion time; ``PlanEnded`` ends the run with an
outcome from anywhere in the conversation."""

from __future__ import annotations

from dataclasses import dataclass, field

from lang2policy.sandbox.outcome import IntentRecord, PlanOutcome
from lang2policy.sandbox.policy import PrivilegePolicy

TEXT_LIMIT = 2000


class PlanEnded(Exception):
    """Raised inside the conversation to end the plan with a given outcome."""

    def __init__(self, outcome: PlanOutcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


@dataclass
class PlanState:
    """The running plan's policy (narrowed for it), its answered intents, kept output, sandbox
    layers and motion time."""

    policy: PrivilegePolicy
    intents: list[IntentRecord] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    output_kept: int = 0
    output_seen: int = 0
    output_truncated: bool = False
    layers: dict[str, str] = field(default_factory=dict)
    motion_seconds: float = 0.0
    motion_wall: float = 0.0  # wall seconds of motion since the compute clock last took it
    motion_cpu: float = 0.0  # the host process's CPU seconds in motion, likewise

    def take_motion_cpu(self) -> float:
        seconds, self.motion_cpu = self.motion_cpu, 0.0
        return seconds

    def take_motion_wall(self) -> float:
        seconds, self.motion_wall = self.motion_wall, 0.0
        return seconds


def motion_budget_outcome(state: PlanState) -> PlanOutcome:
    """The outcome of a plan whose motion time budget is used up."""
    budget = state.policy.budgets.max_motion_seconds
    return PlanOutcome(
        "limit",
        f"the plan's motion time budget of {budget:g} s is used up",
        limit="motion_time",
    )
