"""Run reward code in the sandbox and turn its calls into a validated reward spec.

The code runs in the same confined child as policy programs (``SandboxRunner``: own process,
no network, no files, seccomp, restricted Python), with the reward API as its only functions.
Each call leaves the child as a JSON intent, is checked against its ``Skill`` and the privilege
policy below (reward functions only, objects must be in the scene), and is applied by a
``RewardBuilder`` in the host. The resulting spec JSON goes through ``validate_spec``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lang2policy.errors import Lang2PolicyError
from lang2policy.l2r.api import REWARD_API, RewardBackend, RewardBuilder
from lang2policy.rewards.spec import RewardSpec, Validated, validate_spec
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner

MAX_CALLS = 64
REWARD_LIMITS = SandboxLimits(wall_seconds=5.0, cpu_seconds=5.0, memory_mb=512)


class RewardCodeError(Lang2PolicyError):
    """Reward code did not run to the end in the sandbox; ``outcome`` says why."""

    def __init__(self, message: str, outcome: PlanOutcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class CodeResult:
    validated: Validated
    calls: tuple[str, ...]  # the API functions called, in order
    executed: bool  # whether the code called execute_plan()
    outcome: PlanOutcome

    @property
    def spec(self) -> RewardSpec:
        return self.validated.spec


def reward_policy() -> PrivilegePolicy:
    """Allow the reward functions (on objects in the scene) and nothing else."""
    rules = [{"id": "reward-api", "skill": sorted(REWARD_API), "effect": "allow",
              "priority": 50, "when": {"objects_in_scene": True}}]
    data = {"version": 1, "budgets": {"max_skill_calls": MAX_CALLS, "max_motion_seconds": 1},
            "default_fallback": "error", "rules": rules}
    return PrivilegePolicy.from_dict(data, source="reward-api", known_skills=REWARD_API)


def run_reward_code(code: str, objects: Sequence[str], task: str, *,
                    base: RewardSpec | None = None, limits: SandboxLimits | None = None,
                    ast_check: bool = True,
                    positions: Mapping[str, Sequence[float]] | None = None,
                    headings: Mapping[str, float] | None = None) -> CodeResult:
    """Run ``code`` against a builder started from ``base`` (None: empty) and validate the
    spec it built. ``positions``/``headings`` of objects serve the relative calls.
    Raises ``RewardCodeError`` (the sandbox outcome) or ``RewardSpecError``."""
    builder = RewardBuilder(objects, base, positions=positions, headings=headings)
    runner = SandboxRunner(RewardBackend(builder), reward_policy(), limits=limits or REWARD_LIMITS,
                           ast_check=ast_check, skills=REWARD_API)
    outcome = runner.run(code)
    if not outcome.ok:
        raise RewardCodeError(f"the reward code failed in the sandbox: {outcome.feedback()}",
                              outcome)
    if not builder.terms:
        raise RewardCodeError("the reward code set no reward terms; call set_* functions "
                              f"(one of {', '.join(REWARD_API)})", outcome)
    validated = validate_spec(builder.to_dict(task), objects)
    return CodeResult(validated, tuple(builder.calls), builder.executed, outcome)
