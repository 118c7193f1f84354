"""Live corrections of a running plan: classify, route, apply, remember (no ROS here).

``CorrectionRouter`` decides what a correction does to what is running:

* ``stop``: the caller halts the arm through the safety layer; no LLM is involved.
* ``offset`` / ``speed`` / ``target`` while a **code plan** runs: the edit joins ``ArgEdits``,
  the argument edit of the running skill calls. The running motion is interrupted, and the
  sandbox runner's privilege gate decides the edited call from where the arm is: allowed, it
  restarts with the edited arguments (and every later call of the program is edited too);
  denied, the edit is refused with the rule's reason and the call goes on as before.
* the same kinds while a **reward task** runs: the running spec is edited
  (``apply_to_spec``) and re-sent; the MPC picks it up at its next iteration.
* ``replan`` (anything else): the caller re-plans with the correction as a follow-up
  instruction (the planners keep the history).

Every edit is remembered (``CorrectionMemory``, a JSONL log + MiniLM embeddings) with its
instruction and situation (a code-plan edit once the gate has accepted it);
``remembered_for(instruction)`` returns the edits learnt on similar instructions, applied when
the new plan starts (through the gate too), so the same mistake needs no second correction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lang2policy.corrections import (
    Applied,
    Correction,
    CorrectionError,
    CorrectionMemory,
    Recalled,
    apply_recalled,
    apply_to_args,
    apply_to_spec,
    classify,
    objects_in_args,
    objects_in_spec,
    situation_for_call,
    situation_for_spec,
)
from lang2policy.corrections.correction import MAX_OFFSET, MAX_TEXT, describe_offset
from lang2policy.errors import Lang2PolicyError
from lang2policy.rewards.spec import RewardSpec

log = logging.getLogger(__name__)
Positions = Mapping[str, Sequence[float]]
MAX_TOTAL_OFFSET = MAX_OFFSET  # m per axis: all offsets of one plan together (one bound)


@dataclass(frozen=True)
class ArgEdit:
    """One correction of a code plan's skill calls, and what it is remembered with once the
    privilege policy has accepted it (``situation`` None: recalled from memory, not re-logged).
    ``situate`` marks an edit said while no motion ran (the program starting, or between two
    calls): it is remembered with the first call it is accepted on."""

    correction: Correction
    instruction: str = ""
    situation: dict | None = None
    situate: bool = False


EditHook = Callable[[ArgEdit, str], None]  # (the edit, a note or the refusal's reason)


class ArgEdits:
    """The corrections that apply to a code plan's skill calls, in the order they were said.

    New edits are *pending* until the sandbox runner's privilege gate has decided a call with
    them applied (``SandboxRunner`` reads them as ``runner.edits``): then they are accepted
    (``accept_pending``, and ``on_accepted`` remembers them), capped (a speed the policy
    forbids becomes the highest speed it allows, ``cap_pending_speed``) or refused
    (``refuse_pending``: ``on_refused`` tells the person why, and the calls keep the edits
    accepted before). ``apply(skill, bound)`` gives a call's arguments with the edits applied;
    a correction that does not fit a call (an offset on ``open_gripper``) leaves it unchanged.
    Offsets add up, within ``MAX_TOTAL_OFFSET`` per axis of what the program asked for.
    """

    def __init__(
        self,
        scene: Callable[[], tuple[list[str], dict]],
        *,
        on_accepted: EditHook | None = None,
        on_refused: EditHook | None = None,
    ) -> None:
        self._scene = scene  # () -> (object names, positions by name)
        self._lock = threading.Lock()
        self.accepted: list[ArgEdit] = []
        self._pending: list[ArgEdit] = []
        self.on_accepted, self.on_refused = on_accepted, on_refused
        self.notes: list[str] = []
        self._decided: tuple[str, dict] | None = None  # the call the pending edits apply to

    @property
    def corrections(self) -> list[Correction]:
        """Every correction in force or waiting for the gate, oldest first."""
        with self._lock:
            return [e.correction for e in (*self.accepted, *self._pending)]

    @property
    def pending(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def add(
        self, correction: Correction, instruction: str = "", situation=None, situate=False
    ) -> None:
        """Queue ``correction`` for the next gate decision (``situate``: remember it with the
        call it is accepted on). Raises ``CorrectionError`` when the offsets said so far would
        add up to more than ``MAX_TOTAL_OFFSET`` on an axis."""
        edit = ArgEdit(correction, instruction, situation, situate)
        with self._lock:
            _check_total_offset([e.correction for e in (*self.accepted, *self._pending, edit)])
            self._pending.append(edit)

    def __bool__(self) -> bool:
        return bool(self.corrections)

    def apply(self, skill: str, bound: dict, *, pending: bool = True) -> dict:
        """``bound`` with the accepted edits (and the pending ones) applied in order."""
        with self._lock:
            edits = [*self.accepted, *(self._pending if pending else [])]
            if pending and self._pending:
                self._decided = (skill, dict(bound))
        objects, positions = self._scene()
        args = dict(bound)
        for edit in edits:
            try:
                applied = apply_to_args(edit.correction, skill, args, objects, positions=positions)
            except Lang2PolicyError:
                continue  # this correction is about another kind of call
            args = applied.args
            self.notes.extend(applied.notes)
        return args

    __call__ = apply

    def accept_pending(self, note: str = "") -> None:
        """The gate allowed a call with the pending edits: they are in force from now on."""
        self._settle(self.on_accepted, note, keep=True)

    def refuse_pending(self, reason: str) -> None:
        """The gate denied the pending edits (and allowed the call without them): drop them."""
        self._settle(self.on_refused, reason, keep=False)

    def cap_pending_speed(self, speed: float, reason: str) -> None:
        """The pending edits (all speed edits) asked for more than the policy allows: they
        become one absolute ``speed``, the highest the policy allows, and are accepted."""
        with self._lock:
            texts = "; ".join(e.correction.text for e in self._pending)
            first = self._pending[0]
            capped = Correction("speed", texts[:MAX_TEXT], speed=round(float(speed), 6))
            self._pending = [ArgEdit(capped, first.instruction, first.situation)]
        self.accept_pending(reason)

    def pending_kinds(self) -> set[str]:
        with self._lock:
            return {e.correction.kind for e in self._pending}

    def _settle(self, hook: EditHook | None, note: str, *, keep: bool) -> None:
        with self._lock:
            settled, self._pending = self._pending, []
            if keep:
                settled = [self._situated(e) for e in settled]
                self.accepted.extend(settled)
        for edit in settled:
            if hook is not None:
                hook(edit, note)

    def _situated(self, edit: ArgEdit) -> ArgEdit:
        """``edit`` with the situation of the call it was accepted on, if it waited for one."""
        if not edit.situate or self._decided is None:
            return edit
        objects, _positions = self._scene()
        return replace(edit, situation=situation_for_call(*self._decided, objects), situate=False)


def _check_total_offset(corrections: list[Correction]) -> None:
    """Offsets accumulate; their sum stays within ``MAX_TOTAL_OFFSET`` per axis."""
    total = [0.0, 0.0, 0.0]
    for correction in corrections:
        if correction.kind == "offset" and correction.offset is not None:
            total = [t + d for t, d in zip(total, correction.offset, strict=True)]
    worst = max(abs(t) for t in total)
    if worst > MAX_TOTAL_OFFSET + 1e-9:
        raise CorrectionError(
            f"the offsets said so far add up to {describe_offset(total)}; corrections may move "
            f"a target at most {MAX_TOTAL_OFFSET * 100:.0f} cm per axis from what the program "
            "asked for. Give the new goal as an instruction"
        )


@dataclass
class Routed:
    """What the caller must do for one correction."""

    correction: Correction
    action: str  # "stop" | "edit_code" | "edit_spec" | "replan" | "rejected"
    spec: RewardSpec | None = None  # the edited spec (edit_spec)
    notes: list[str] = field(default_factory=list)
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.correction.kind,
            "edit": self.correction.describe(),
            "action": self.action,
            "notes": list(self.notes),
            **({"error": self.error} if self.error else {}),
        }


class CorrectionRouter:
    """Routes corrections to the running plan and remembers them (see the module docstring)."""

    def __init__(self, memory: CorrectionMemory | None, threshold: float = 0.8) -> None:
        self.memory = memory
        self.threshold = threshold

    def route(
        self,
        text: str,
        objects: Sequence[str],
        *,
        instruction: str,
        spec: RewardSpec | None = None,
        code_call: tuple[str, dict] | None = None,
        edits: ArgEdits | None = None,
        positions: Positions | None = None,
        current_speed: float | None = None,
    ) -> Routed:
        """Classify ``text`` against what runs (``spec`` or a code plan's ``code_call``) and
        apply it. Raises ``Lang2PolicyError`` for text that is not a valid correction."""
        acting = (
            objects_in_spec(spec, positions)
            if spec is not None
            else objects_in_args(*code_call)
            if code_call is not None
            else []
        )
        correction = classify(text, list(objects), acting)
        if correction.kind in ("stop", "replan"):
            return Routed(correction, correction.kind)
        if edits is not None:  # a code plan runs: its calls are edited
            return self._edit_code(correction, instruction, objects, edits, code_call)
        if spec is not None:
            try:
                applied = apply_to_spec(
                    correction, spec, objects, positions=positions, current_speed=current_speed
                )
            except Lang2PolicyError as exc:
                return Routed(correction, "rejected", error=str(exc))
            self._remember(instruction, correction, situation_for_spec(spec, objects))
            return Routed(correction, "edit_spec", spec=applied.spec, notes=list(applied.notes))
        return Routed(
            correction,
            "rejected",
            error="nothing is running to correct; say it as a new instruction",
        )

    @staticmethod
    def _edit_code(
        correction: Correction,
        instruction: str,
        objects: Sequence[str],
        edits: ArgEdits,
        code_call: tuple[str, dict] | None,
    ) -> Routed:
        """Queue the edit of a running code plan's calls: from the running motion on, or, when
        none runs (the program starting, or between two calls), from its next motion on."""
        situation = None if code_call is None else situation_for_call(*code_call, objects)
        try:
            edits.add(correction, instruction, situation, situate=code_call is None)
        except CorrectionError as exc:
            return Routed(correction, "rejected", error=str(exc))
        where = "the program's next motion" if code_call is None else f"{code_call[0]}()"
        note = f"applies from {where} on, once the privilege policy allows it"
        return Routed(correction, "edit_code", notes=[note])

    def _remember(self, instruction: str, correction: Correction, situation: dict) -> None:
        if self.memory is not None and instruction:
            self.memory.remember(instruction, correction, situation)

    def remember_accepted(self, edit: ArgEdit, _note: str = "") -> None:
        """``ArgEdits.on_accepted``: log a live code-plan edit once the gate has allowed it
        (recalled edits, with no situation, are already in the log)."""
        if edit.situation is not None:
            self._remember(edit.instruction, edit.correction, edit.situation)

    # ------------------------------------------------------------------ recall
    def remembered_for(self, instruction: str) -> list[Recalled]:
        """Edits learnt on instructions similar to ``instruction`` (oldest first)."""
        if self.memory is None or not len(self.memory):
            return []
        return self.memory.edits_for(instruction, self.threshold)

    def recall_into_spec(
        self, instruction: str, spec: RewardSpec, objects: Sequence[str], **kwargs: Any
    ) -> tuple[Applied | None, list[Recalled]]:
        """``spec`` with the remembered edits for ``instruction`` applied (None if none)."""
        recalled = self.remembered_for(instruction)
        if not recalled:
            return None, []
        return apply_recalled(spec, recalled, objects, **kwargs)

    def recall_into_edits(self, instruction: str, edits: ArgEdits) -> list[Recalled]:
        """Add the remembered edits for ``instruction`` to a code plan's ``edits``."""
        recalled = self.remembered_for(instruction)
        for item in recalled:
            try:
                edits.add(item.correction, instruction)  # pending: the gate decides it too
            except CorrectionError as exc:
                log.warning("remembered %r not applied: %s", item.record.text, exc)
        return recalled
