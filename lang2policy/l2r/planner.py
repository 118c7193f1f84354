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

from lang2policy.errors import ConfigError, UnknownObjectError
from lang2policy.l2r.coder import RewardCoder
from lang2policy.l2r.descriptor import MotionDescriptor
from lang2policy.l2r.grammar import missing_objects
from lang2policy.l2r.prompts import RewardPrompts
from lang2policy.l2r.sandboxed import CodeResult, run_reward_code
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


def _scene(objects: Sequence[str] | Positions) -> tuple[list[str], dict]:
    """(names, positions) from a list of names or a mapping name -> [x, y, z]."""
    if isinstance(objects, str) or not isinstance(objects, Sequence | Mapping):
        raise ConfigError(f"objects must be a list of names or a mapping of names to "
                          f"positions; got {type(objects).__name__}")
    names = [str(n) for n in objects]
    if not names or any(not n.strip() for n in names) or len(set(names)) != len(names):
        raise ConfigError(f"the planner needs distinct, non-empty object names; got {names}")
    positions = {}
    if isinstance(objects, Mapping):
        positions = {str(n): tuple(float(v) for v in p) for n, p in objects.items()
                     if p is not None}
    return names, positions


class RewardPlanner:
    """Language to Rewards over one scene; ``reset()`` forgets the conversation.

    ``objects``: the scene's object names, or a mapping name -> position [x, y, z] (positions
    help the descriptor place points and serve relative pushes). ``constrained``: None picks
    grammar-constrained decoding for completion-mode LLMs (the local model). ``attempts``:
    descriptor attempts per instruction.
    """

    def __init__(self, llm: LLM, objects: Sequence[str] | Positions, *,
                 prompts: RewardPrompts | None = None, constrained: bool | None = None,
                 attempts: int = 3, limits: SandboxLimits | None = None) -> None:
        self.llm = llm
        self.objects, self.positions = _scene(objects)
        self.headings: dict[str, float] = {}
        self.prompts = prompts or RewardPrompts.load()
        if constrained is None:
            constrained = llm.config.mode == "completion"
        self.constrained = constrained
        self.descriptor = MotionDescriptor(llm, self.prompts, constrained=constrained,
                                           attempts=attempts)
        self.coder = RewardCoder(llm, self.prompts.coder_prompt(), constrained=constrained)
        self.limits = limits

    def reset(self) -> None:
        """Forget the conversation (a new scene, or the user said "reset")."""
        self.descriptor.reset()

    def set_scene(self, objects: Sequence[str] | Positions,
                  headings: Mapping[str, float] | None = None) -> None:
        """Replace the objects (names or name -> position) and their headings (degrees)."""
        self.objects, self.positions = _scene(objects)
        self.headings = {str(n): float(v) for n, v in (headings or {}).items()}

    def plan(self, instruction: str, current: RewardSpec | None = None, *,
             positions: Positions | None = None,
             headings: Mapping[str, float] | None = None) -> RewardPlan:
        """Plan ``instruction``; ``current`` is the spec running now (None: nothing runs).

        ``positions`` (name -> [x, y, z]) and ``headings`` (name -> degrees) update what the
        planner knows of the objects now (relative pushes and turns need them).
        """
        started = time.perf_counter()
        instruction = check_instruction(instruction)
        missing = missing_objects(instruction, self.objects)
        if missing:
            raise UnknownObjectError(f"the instruction names {', '.join(missing)}, which "
                                     f"{'is' if len(missing) == 1 else 'are'} not in the "
                                     f"scene; objects: {sorted(self.objects)}")
        if positions is not None:
            self.positions.update({str(n): tuple(float(v) for v in p)
                                   for n, p in positions.items()})
        if headings is not None:
            self.headings.update({str(n): float(v) for n, v in headings.items()})
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
                                 base=None if new_task else current, limits=self.limits,
                                 positions=self.positions, headings=self.headings)
        notes += _result_notes(result, new_task)
        self.descriptor.remember(instruction, description)
        return RewardPlan(
            spec=result.spec, new_task=new_task, notes=tuple(notes),
            description=description.text, code=written.code, calls=result.calls,
            attempts=described.attempts,
            llm_seconds=described.llm_seconds + written.llm_seconds,
            plan_ms=1000 * (time.perf_counter() - started),
            retried_because=described.errors,
        )


def _result_notes(result: CodeResult, new_task: bool) -> list[str]:
    notes = list(result.validated.notes)
    if not result.executed:
        notes.append("the reward code did not call execute_plan(); the reward is used as set")
    if not new_task and "reset_reward" in result.calls:
        notes.append("the reward code called reset_reward(): the running reward was replaced")
    return notes


def _joined(previous: str, instruction: str, limit: int = 500) -> str:
    """The running task's text with the correction appended (the newest part kept)."""
    text = f"{previous}; {instruction}" if previous else instruction
    return text if len(text) <= limit else text[-limit:]
