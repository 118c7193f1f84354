"""The Language to Rewards planner: an instruction (and the running spec) to a new reward spec.

    planner = RewardPlanner(make_client("local"), ["red block", "blue bowl"])
    first = planner.plan("lift the red block 10 cm", None)
    second = planner.plan("higher", first.spec)   # "not a new task": edits first.spec
    second.spec, second.new_task, second.notes, second.description, second.code

Two stages, as in the paper: the ``MotionDescriptor`` fills the template (keeping the
conversation, retried while slots stay unfilled), the ``RewardCoder`` turns the description into
reward-API calls, which run in the sandbox; the spec they build is validated (clamped values
become notes). "This is a new task" replaces the running spec; "This is not a new task" applies
the calls on top of it, so a correction edits what runs.

``constrained`` (default: True for completion-mode LLMs, i.e. the local llama.cpp model) makes
both stages decode under GBNF grammars built from the template and the API, so a small model's
answers always parse and validate; chat models (``--llm openai``) write free text, as in the
paper. Errors are ``Lang2PolicyError`` subclasses that say what was wrong: ``DescriptionError``,
``RewardCodeError``, ``RewardSpecError``, ``LLMError`` and bad instructions or objects.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lang2policy.errors import ConfigError
from lang2policy.l2r.coder import RewardCoder
from lang2policy.l2r.descriptor import MotionDescriptor
from lang2policy.l2r.prompts import RewardPrompts
from lang2policy.l2r.sandboxed import run_reward_code
from lang2policy.llm.exchange import LLM
from lang2policy.planning.route import check_instruction
from lang2policy.rewards.spec import RewardSpec
from lang2policy.sandbox.runner import SandboxLimits

Positions = Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class RewardPlan:
    """One planned instruction: the validated spec and how it came about."""

    spec: RewardSpec
    new_task: bool  # False: ``spec`` is the running spec edited
    notes: tuple[str, ...]  # clamped values and other things the user should know
    description: str  # the filled template (stage 1)
    code: str  # the reward code (stage 2) that ran in the sandbox
    calls: tuple[str, ...] = ()
    attempts: int = 1  # descriptor attempts
    llm_seconds: float = 0.0
    plan_ms: float = 0.0  # wall time of the whole plan
    retried_because: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        return {"spec": self.spec.to_dict(), "new_task": self.new_task, "notes": list(self.notes),
                "description": self.description, "code": self.code, "calls": list(self.calls),
                "attempts": self.attempts, "llm_seconds": round(self.llm_seconds, 3),
                "plan_ms": round(self.plan_ms, 1),
                "retried_because": list(self.retried_because)}


def _object_names(objects: Sequence[str] | Positions) -> tuple[list[str], dict]:
    if isinstance(objects, Mapping):
        names = [str(n) for n in objects]
        positions = {str(n): tuple(float(v) for v in p) for n, p in objects.items()}
    else:
        names, positions = [str(n) for n in objects], {}
    if not names or any(not n.strip() for n in names) or len(set(names)) != len(names):
        raise ConfigError(f"the planner needs distinct, non-empty object names; got {names}")
    return names, positions


class RewardPlanner:
    """Language to Rewards over one scene; ``reset()`` forgets the conversation."""

    def __init__(self, llm: LLM, objects: Sequence[str] | Positions, *,
                 prompts: RewardPrompts | None = None, constrained: bool | None = None,
                 attempts: int = 3, limits: SandboxLimits | None = None) -> None:
        self.llm = llm
        self.objects, self.positions = _object_names(objects)
        self.prompts = prompts or RewardPrompts.load()
        self.constrained = (llm.config.mode == "completion") if constrained is None \
            else constrained
        self.descriptor = MotionDescriptor(llm, self.prompts.descriptor,
                                           constrained=self.constrained, attempts=attempts)
        self.coder = RewardCoder(llm, self.prompts.coder, constrained=self.constrained)
        self.limits = limits

    def reset(self) -> None:
        """Forget the conversation (a new scene, or the user said "reset")."""
        self.descriptor.reset()

    def plan(self, instruction: str, current: RewardSpec | None = None, *,
             positions: Positions | None = None) -> RewardPlan:
        """Plan ``instruction``; ``current`` is the spec running now (None: nothing runs).

        ``positions`` (name -> [x, y, ...]) updates the object positions the descriptor sees.
        """
        started = time.perf_counter()
        instruction = check_instruction(instruction)
        if positions is not None:
            self.positions = {n: tuple(float(v) for v in p) for n, p in positions.items()}
        described = self.descriptor.describe(instruction, self.objects, self.positions)
        description = described.description
        notes = [f"description line not in the template (left to the coder): {line}"
                 for line in description.unknown]
        new_task = description.new_task or current is None
        if not description.new_task and current is None:
            notes.append("the description says 'This is not a new task' but no reward is "
                         "running: planned as a new task")
        written = self.coder.write(description, new_task, self.objects)
        task = instruction if new_task else _joined(current.task, instruction)
        result = run_reward_code(written.code, self.objects, task,
                                 base=None if new_task else current, limits=self.limits)
        notes += list(result.validated.notes)
        if not result.executed:
            notes.append("the reward code did not call execute_plan(); the reward is used as set")
        if not new_task and "reset_reward" in result.calls:
            notes.append("the reward code called reset_reward(): the running reward was replaced")
        self.descriptor.remember(instruction, description)
        return RewardPlan(
            spec=result.spec, new_task=new_task, notes=tuple(notes),
            description=description.text, code=written.code, calls=result.calls,
            attempts=described.attempts,
            llm_seconds=described.llm_seconds + written.llm_seconds,
            plan_ms=1000 * (time.perf_counter() - started),
            retried_because=described.errors,
        )


def _joined(previous: str, instruction: str, limit: int = 500) -> str:
    """The running task's text with the correction appended (the newest part kept)."""
    text = f"{previous}; {instruction}" if previous else instruction
    return text if len(text) <= limit else text[-limit:]
