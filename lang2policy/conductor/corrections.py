"""The conductor's side of live corrections: route, apply or refuse, remember, recall.

A correction is classified and routed by ``planning.correcting.CorrectionRouter`` (rules, no
LLM, well under a millisecond) against what runs:

* ``stop``: the safety layer is asked to stop and hold the arm, and the plan is aborted here.
* an edit (offset, speed, target) of a running **code plan**: the running motion stops, the
  sandbox runner's privilege gate decides the edited call from where the arm is, and it
  restarts with the edited arguments (as does every later call); an edit the policy denies is
  answered with a second status ``"action": "refused"`` and the rule's reason, and the call
  goes on unedited (a speed above the policy's limit is capped at the limit instead).
* an edit of a running **reward task**: the edited spec goes to the reward executor, which
  swaps it in at its next iteration.
* ``replan``: the running code motion is aborted and the text is planned as a follow-up.
* anything but ``stop`` during a **skill plan** (a VLA): forwarded to the VLA node as a language
  motion (``"action": "forwarded"``); its answer follows as a second status ``correction``
  (``"action": "applied"`` or ``"refused"``), and an applied one is remembered for later
  similar skill plans, which get it in their start message's ``motions`` (``recall_motions``).

Each correction is answered with one status ``correction`` whose detail is ``{"text", "kind",
"edit", "action", "notes"[, "error"]}``. Edits are remembered (``CorrectionMemory``) and
applied to later similar instructions when they start (status ``remembered``).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from lang2policy.conductor.ports import CodeExecutor, Positions, SkillExecutor
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.corrections import Correction, CorrectionError, check_text, classify
from lang2policy.errors import Lang2PolicyError
from lang2policy.planning.correcting import ArgEdits, CorrectionRouter
from lang2policy.planning.loop import PlanLoop
from lang2policy.rewards.spec import RewardSpec

REPLAN_WAIT = 30.0  # s a replan waits for the aborted plan to end
SKILL_PLAN = "skill"  # the ``plan`` of a skill plan's remembered corrections


class Conducting(Protocol):
    """The conductor as the desk sees it (``lang2policy.conductor.conductor.Conductor``)."""

    instruction: str
    positions: Positions
    code: CodeExecutor
    reward: RewardRoute
    planning: PlanLoop
    skills: SkillExecutor | None

    def say(self, state: str, instruction: str, detail: Any = "") -> None: ...
    def running(self, route: str) -> bool: ...
    def scene_names(self) -> list[str]: ...
    def instruct(self, text: object) -> bool: ...
    def request_stop(self, reason: str) -> None: ...
    def end_motion(self, reason: str) -> None: ...
    def wait_idle(self, timeout: float | None = None) -> None: ...


class CorrectionDesk:
    """Corrections for one conductor: live routing, and recall at the start of a plan."""

    def __init__(self, conductor: Conducting, router: CorrectionRouter) -> None:
        self.conductor = conductor
        self.router = router
        self.edits: ArgEdits | None = None  # the running code plan's argument edits

    def correct(self, text: str) -> None:
        """Route one correction to what runs and say what became of it."""
        c = self.conductor
        if c.skills is not None and (c.running("skill") or c.skills.active):
            self._correct_skill(text)  # a skill plan, or a code plan's vla_skill call
            return
        instruction, running_code = c.instruction, c.running("code")
        try:
            routed = self.router.route(
                text,
                c.scene_names(),
                instruction=instruction,
                spec=None if running_code else c.reward.running,
                code_call=c.code.current_call() if running_code else None,
                edits=self.edits if running_code else None,
                positions=dict(c.positions),
            )
        except Lang2PolicyError as exc:
            detail = {"text": text[:200], "kind": "invalid", "action": "rejected"}
            c.say("correction", instruction, {**detail, "error": str(exc)})
            return
        if routed.action == "stop":
            c.request_stop(f"stopped by a correction: {text!r}")
        elif routed.action == "edit_code":
            c.code.interrupt_for_edit()  # the runner's gate decides the edited call
        elif routed.action == "edit_spec":
            assert routed.spec is not None  # an edit_spec always carries the edited spec
            c.reward.swap(routed.spec)
        elif routed.action == "replan":
            self._replan(text, running_code)
        c.say("correction", instruction, {"text": text, **routed.as_dict()})

    def _replan(self, text: str, running_code: bool) -> None:
        """Plan ``text`` as a follow-up once the running code motion has been aborted."""
        c = self.conductor
        if running_code and c.code.live:
            c.end_motion(f"re-planning after the correction {text!r}")
        elif c.running("reward"):  # its end would not come before the follow-up's start
            c.reward.cancel()

        def follow_up() -> None:
            c.wait_idle(timeout=REPLAN_WAIT)
            c.instruct(text)

        threading.Thread(target=follow_up, daemon=True).start()

    # ------------------------------------------------------------------ skill plans
    def _correct_skill(self, text: str) -> None:
        """During a skill plan: ``stop`` stops; anything else goes to the VLA as a language
        motion, answered when the VLA node has applied or refused it."""
        c = self.conductor
        instruction = c.instruction
        try:
            correction = _skill_correction(text, c.scene_names())
        except Lang2PolicyError as exc:
            detail = {"text": str(text)[:200], "kind": "invalid", "action": "rejected"}
            c.say("correction", instruction, {**detail, "error": str(exc)})
            return
        detail = {"text": correction.text, "kind": correction.kind, "edit": correction.describe()}
        if correction.kind == "stop":
            c.request_stop(f"stopped by a correction: {text!r}")
            c.say("correction", instruction, {**detail, "action": "stop", "notes": []})
            return
        notes = ["sent to the VLA as a language motion; it applies at its next control cycle"]
        forwarded = {**detail, "action": "forwarded", "notes": notes}
        assert c.skills is not None  # a skill plan runs only with a skill executor
        problem = c.skills.motion(
            correction.text,
            lambda answer: self._motion_answer(instruction, correction, answer),
            lambda: c.say("correction", instruction, forwarded),
        )
        if problem:
            c.say("correction", instruction, {**detail, "action": "rejected", "error": problem})

    def _motion_answer(self, instruction: str, correction: Correction, answer: dict) -> None:
        """The VLA node's answer to a forwarded motion: say it; remember an applied one."""
        action = "applied" if answer.get("action") == "applied" else "refused"
        detail: dict[str, Any] = {"text": correction.text, "kind": correction.kind}
        detail["action"] = action
        detail["edit"] = correction.describe()
        detail["notes"] = [f"offset now {answer['offset']}"] if "offset" in answer else []
        if action == "refused":
            detail["error"] = f"refused by the VLA: {answer.get('reason') or 'no reason given'}"
        self.conductor.say("correction", instruction, detail)
        memory = self.router.memory
        if action == "applied" and memory is not None and instruction:
            situation = {"plan": SKILL_PLAN, "objects": self.conductor.scene_names()}
            try:
                memory.remember(instruction, correction, situation)
            except Lang2PolicyError as exc:  # a full disk must not end the skill
                self.conductor.say("correction", instruction, {**detail, "error": str(exc)})

    def recall_motions(self, instruction: str) -> list[str]:
        """The corrections applied to earlier skill plans of similar instructions, oldest
        first: the language motions a new skill plan starts with (status ``remembered``)."""
        memory = self.router.memory
        if memory is None or not len(memory):
            return []
        found = memory.recall(instruction, self.router.threshold, limit=1000)
        skill = [r for r in found if r.record.situation.get("plan") == SKILL_PLAN]
        skill.sort(key=lambda r: r.record.time)
        if skill:
            self.conductor.say("remembered", instruction, recalled_lines(skill))
        return [r.record.text for r in skill]

    # ------------------------------------------------------------------ the memory itself
    def memory_listing(self) -> tuple[bool, str]:
        """(memory on, one line per remembered correction): the terminal's ``:memory``."""
        memory = self.router.memory
        if memory is None:
            return False, 'the corrections memory is off (planner parameter memory: "")'
        lines = memory.listing()
        scope = f"recalled for a similar instruction naming the same objects (scope {memory.scope})"
        if not lines:
            return True, f"no corrections remembered in {memory.path}"
        return True, "\n".join([f"{len(memory)} remembered in {memory.path}, {scope}:", *lines])

    def forget(self) -> tuple[bool, str]:
        """Clear the remembered corrections: the terminal's ``:forget``."""
        memory = self.router.memory
        if memory is None:
            return False, "the corrections memory is off: nothing to forget"
        count = memory.forget()
        return True, f"forgot {count} remembered correction{'s' * (count != 1)}"

    # ------------------------------------------------------------------ recall
    def start_code_edits(self, instruction: str) -> None:
        """Fresh argument edits for a code plan, with what memory holds for it."""
        c = self.conductor
        self.edits = ArgEdits(
            lambda: (c.scene_names(), dict(c.positions)),
            on_accepted=self.router.remember_accepted,
            on_refused=lambda edit, reason: self._refused(instruction, edit, reason),
        )
        recalled = self.router.recall_into_edits(instruction, self.edits)
        c.planning.runner.edits = self.edits
        if recalled:
            c.say("remembered", instruction, recalled_lines(recalled))

    def _refused(self, instruction: str, edit, reason: str) -> None:
        """The privilege gate refused an edit: say why; the arm goes on as before it."""
        correction = edit.correction
        detail = {"text": correction.text, "kind": correction.kind, "edit": correction.describe()}
        detail |= {"action": "refused", "error": f"refused by the privilege policy: {reason}"}
        self.conductor.say("correction", instruction, detail)

    def recall_into_spec(self, instruction: str, spec: RewardSpec) -> tuple[RewardSpec, list]:
        """``spec`` with the remembered edits for ``instruction`` (and their notes)."""
        c = self.conductor
        applied, used = self.router.recall_into_spec(
            instruction, spec, c.scene_names(), positions=dict(c.positions)
        )
        if applied is None or not used:
            return spec, []
        c.say("remembered", instruction, recalled_lines(used))
        return applied.spec, list(applied.notes)


def recalled_lines(recalled) -> list[str]:
    """One line per recalled correction: what was said, for what, how similar."""
    return [
        f"{r.record.text!r} (said for {r.record.instruction!r}, similarity {r.score:.2f})"
        for r in recalled
    ]


def _skill_correction(text: object, objects: list[str]) -> Correction:
    """``text`` classified for a skill plan: a bad text raises ``CorrectionError``; one the
    rules cannot place (an object not in the scene) is a language motion for the VLA to
    judge (kind ``replan``)."""
    checked = check_text(text)
    try:
        return classify(checked, objects)
    except CorrectionError:
        raise
    except Lang2PolicyError:
        return Correction("replan", checked)
