"""A compound instruction run step by step: each step planned, checked and judged on its own.

``run_steps(loop, instruction, steps, status)`` hands each step to ``loop.handle_step`` with
its own status prefix ("step 2 of 3: ..."), stops at the first step that does not succeed
(and says which), and at the end checks that every earlier step's goal still holds: a later
step that knocked an earlier one over makes the whole instruction fail, with the measured
reason. The result's goal lists every step's goal; its program is the steps' programs in
order, each under a comment naming its step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from lang2policy.planning.cap import GeneratedProgram
from lang2policy.planning.goals import Goal, Verdict, unmet_now
from lang2policy.planning.reader_plan import MovedMemory
from lang2policy.planning.result import InstructionResult
from lang2policy.skills.backend import SkillBackend

if TYPE_CHECKING:
    from lang2policy.scene.world import World
    from lang2policy.session.protocol import Session

Status = Callable[[str], None]


class PlanBackend(SkillBackend, Protocol):
    """A skill backend with the world its skills act in and the session that keeps that world
    in step with the arm (``SimSkillBackend``, ``RemoteSkillBackend``): where plans are
    judged."""

    @property
    def world(self) -> World: ...

    @property
    def session(self) -> Session: ...


class StepLoop(Protocol):
    """What ``run_steps`` needs of ``loop.PlanLoop``."""

    moved: MovedMemory
    backend: PlanBackend

    def handle_step(self, instruction: str, status: Status) -> InstructionResult: ...

    def positions(self, objects: list[str]) -> dict[str, np.ndarray]: ...


    def cancelled(self) -> bool: ...


def run_steps(
    loop: StepLoop, instruction: str, steps: list[str], status: Status
) -> InstructionResult:
    """Run ``steps`` of ``instruction`` in order (see the module doc)."""
    status(f"{len(steps)} steps: " + "; ".join(f"{i}. {s}" for i, s in enumerate(steps, 1)))
    before = loop.positions(loop.backend.object_names())
    done: list[tuple[str, InstructionResult]] = []
    for index, step in enumerate(steps, 1):
        prefix = f"step {index} of {len(steps)}"
        result = loop.handle_step(step, _prefixed(status, prefix))
        done.append((step, result))
        if not result.ok:
            return _stopped_at(instruction, done, len(steps), status)
        if loop.cancelled():
            break
    broken = _broken(loop, done)
    if broken:
        return _stopped_at(instruction, done, len(steps), status, broken)
    after = loop.positions(list(before))
    loop.moved.remember(before, after)
    return _combined(instruction, done, None)


def _prefixed(status: Status, prefix: str) -> Status:
    """``status`` with ``prefix: `` before each line."""
    return lambda line: status(f"{prefix}: {line}")


def _broken(loop: StepLoop, done) -> str:
    """Why an earlier step's goal no longer holds at the end, or ""."""
    world = loop.backend.world
    for index, (step, result) in enumerate(done[:-1], 1):
        why = unmet_now(result.verdict.goal, world)
        if why:
            return f"step {index} ({step!r}) no longer holds at the end: {why}"
    return ""


def _stopped_at(instruction, done, total: int, status: Status, broken: str = ""):
    """The sequence's result when a step failed (the last of ``done``), or an earlier step's
    goal was undone (``broken``)."""
    step, last = done[-1]
    if broken:
        reason = broken
    else:
        why = last.verdict.reason if last.verdict else last.outcome.headline()
        left = total - len(done)
        rest = f"; {left} later step{'s' * (left != 1)} not run" if left else ""
        reason = f"step {len(done)} of {total} ({step!r}) failed: {why}{rest}"
    status(f"failed: {reason}")
    return _combined(instruction, done, reason)


def _combined(instruction: str, done, failure: str | None) -> InstructionResult:
    """One result for the whole sequence: its steps' programs, goals and last outcome."""
    goals = tuple(r.verdict.goal for _, r in done if r.verdict is not None)
    goal = Goal("steps", steps=goals, objects=tuple(s for s, _ in done))
    if failure is None:
        unverified = any(r.verdict.verdict == "done_not_verified" for _, r in done)
        verdict = Verdict("done_not_verified" if unverified else "goal_reached", goal)
    else:
        last = done[-1][1]
        kind = last.verdict.verdict if last.verdict and not last.ok else "goal_not_reached"
        verdict = Verdict(kind, goal, failure)
    last = done[-1][1]
    return InstructionResult(
        instruction,
        _program(done),
        last.outcome,
        sum(r.attempts for _, r in done),
        verdict=verdict,
    )


def _program(done) -> GeneratedProgram:
    parts, calls, seconds = [], 0, 0.0
    for index, (step, result) in enumerate(done, 1):
        if result.program is None:
            continue
        parts.append(f"# step {index}: {step}\n{result.program.code.strip()}")
        calls += result.program.llm_calls
        seconds += result.program.llm_seconds
    code = "\n\n".join(parts) + "\n"
    return GeneratedProgram(code=code, main=code, llm_calls=calls, llm_seconds=seconds)
