"""Live corrections of a running plan: classify, route, apply, remember (no ROS here).

``CorrectionRouter`` decides what a correction does to what is running:

* ``stop``: the caller halts the arm through the safety layer; no LLM is involved.
* ``offset`` / ``speed`` / ``target`` while a **code plan** runs: the edit joins ``ArgEdits``,
  the argument edit of the running skill calls (the running motion restarts from where the arm
  is, with edited arguments; every later call of the program is edited too).
* the same kinds while a **reward task** runs: the running spec is edited
  (``apply_to_spec``) and re-sent; the MPC picks it up at its next iteration.
* ``replan`` (anything else): the caller re-plans with the correction as a follow-up
  instruction (the planners keep the history).

Every edit is remembered (``CorrectionMemory``, a JSONL log + MiniLM embeddings) with its
instruction and situation; ``remembered_for(instruction)`` returns the edits learnt on similar
instructions, applied when the new plan starts, so the same mistake needs no second correction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lang2policy.corrections import (
    Applied,
    Correction,
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
from lang2policy.errors import Lang2PolicyError
from lang2policy.rewards.spec import RewardSpec

Positions = Mapping[str, Sequence[float]]


class ArgEdits:
    """The corrections that apply to a code plan's skill calls, in the order they were said.

    Callable as ``RemoteSkillBackend.edit_arguments``: ``edits(skill, bound) -> bound``. A
    correction that does not fit a call (an offset on ``open_gripper``) leaves it unchanged.
    """

    def __init__(self, scene: Callable[[], tuple[list[str], dict]]) -> None:
        self._scene = scene  # () -> (object names, positions by name)
        self._lock = threading.Lock()
        self.corrections: list[Correction] = []
        self.notes: list[str] = []

    def add(self, correction: Correction) -> None:
        with self._lock:
            self.corrections.append(correction)

    def __bool__(self) -> bool:
        return bool(self.corrections)

    def __call__(self, skill: str, bound: dict) -> dict:
        with self._lock:
            corrections = list(self.corrections)
        objects, positions = self._scene()
        args = dict(bound)
        for correction in corrections:
            try:
                applied = apply_to_args(correction, skill, args, objects, positions=positions)
            except Lang2PolicyError:
                continue  # this correction is about another kind of call
            args = applied.args
            self.notes.extend(applied.notes)
        return args


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
        if edits is not None and code_call is not None:
            edits.add(correction)
            self._remember(instruction, correction, situation_for_call(*code_call, objects))
            return Routed(correction, "edit_code", notes=[f"applies from {code_call[0]}() on"])
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

    def _remember(self, instruction: str, correction: Correction, situation: dict) -> None:
        if self.memory is not None and instruction:
            self.memory.remember(instruction, correction, situation)

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
            edits.add(item.correction)
        return recalled
