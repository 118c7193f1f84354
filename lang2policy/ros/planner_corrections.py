"""The planner node's side of live corrections (``/lang2policy/correction``, std_msgs/String).

A correction is classified and routed by ``lang2policy.planning.correcting.CorrectionRouter``
in the subscription callback (rules, no LLM, well under a millisecond):

* ``stop``: ``/lang2policy/stop`` is called on the safety node (which holds the arm until
  ``/lang2policy/resume``) and the running plan is aborted here at once.
* an edit (offset, speed, target) of a running **code plan**: the running motion stops, the
  sandbox runner's privilege gate decides the edited call from where the arm is, and it
  restarts with edited arguments (as does every later skill call); an edit the policy denies
  is answered with a second status ``"action": "refused"`` and the rule's reason, and the
  call goes on unedited (a speed above the policy's limit is capped at the limit instead).
* an edit of a running **reward task**: the edited spec is published; the MPC controller swaps
  it in at its next iteration.
* ``replan``: the running code motion is aborted, and the text is planned as a follow-up
  instruction (the planners keep the history).

Each correction is answered with one status ``{"state": "correction", "instruction": <the
running instruction>, "detail": {"text", "kind", "edit", "action", "notes"[, "error"]}}``.
Edits are remembered on disk (parameter ``memory``: a JSONL path, "" = off) and applied to
later similar instructions when they start (status ``remembered``).
"""

from __future__ import annotations

import threading
from pathlib import Path

from std_msgs.msg import String
from std_srvs.srv import Trigger

from lang2policy.corrections import CorrectionMemory
from lang2policy.errors import Lang2PolicyError
from lang2policy.planning.correcting import ArgEdits, CorrectionRouter

CORRECTION_TOPIC = "/lang2policy/correction"
STOP_SERVICE = "/lang2policy/stop"


class PlannerCorrections:
    """Mixin for ``PlannerNode``: the correction subscription, routing, memory and recall."""

    def _setup_corrections(self) -> None:
        path = self._param("memory", "", 'corrections memory (JSONL path); "" = off')
        threshold = self._number("memory_threshold", 0.8, "similarity (cosine) to recall")
        memory = CorrectionMemory(Path(path).expanduser()) if path else None
        self.router = CorrectionRouter(memory, threshold)
        self.edits: ArgEdits | None = None  # the running code plan's argument edits
        self._stop_client = self.create_client(Trigger, STOP_SERVICE)
        self.create_subscription(String, CORRECTION_TOPIC, self._on_correction, 10)

    # ------------------------------------------------------------------ live corrections
    def _on_correction(self, message: String) -> None:
        text, instruction = message.data, self.current_instruction
        running_code = self._busy.locked() and self.current_route == "code"
        call = self.backend.current_call if running_code and self.arm is not None else None
        try:
            routed = self.router.route(
                text,
                self._scene_names(),
                instruction=instruction,
                spec=None if running_code else self.current_spec,
                code_call=call,
                edits=self.edits if running_code else None,
                positions=dict(self._live_objects),
            )
        except Lang2PolicyError as exc:
            self.publish_status(
                "correction",
                instruction,
                {"text": text[:200], "kind": "invalid", "action": "rejected", "error": str(exc)},
            )
            return
        action = routed.action
        if action == "stop":
            self.request_stop(f"stopped by a correction: {text!r}")
        elif action == "edit_code":
            self.backend.interrupt_for_edit()  # the runner's gate decides the edited call
        elif action == "edit_spec":
            self._spec.publish(String(data=routed.spec.to_json()))
            self.current_spec = routed.spec
        elif action == "replan":
            self._replan(text, running_code)
        self.publish_status("correction", instruction, {"text": text, **routed.as_dict()})

    def request_stop(self, reason: str) -> None:
        """Ask the safety node to stop (it holds until resumed) and abort what runs here."""
        if self._stop_client.service_is_ready():
            self._stop_client.call_async(Trigger.Request())
        else:
            self.get_logger().warning(
                f"no safety node answers on {STOP_SERVICE}; aborting the plan here only"
            )
        self.on_stop(reason)

    def _replan(self, text: str, running_code: bool) -> None:
        """Plan ``text`` as a follow-up once the running code motion has been aborted."""
        if running_code and self.arm is not None:
            self._stop_reason = f"re-planning after the correction {text!r}"
            self._stopped.set()  # no repair of the aborted program; its next call ends it
            self.backend.abort(self._stop_reason)

        def follow_up() -> None:
            self.wait_idle(timeout=30.0)
            self._on_instruction(String(data=text))

        threading.Thread(target=follow_up, daemon=True).start()

    def _scene_names(self) -> list[str]:
        if self._live_objects:
            return list(self._live_objects)
        return list(self.objects)

    # ------------------------------------------------------------------ recall
    def _start_code_edits(self, instruction: str) -> None:
        """Fresh argument edits for a code plan, with what memory holds for it."""
        self.edits = ArgEdits(
            lambda: (self._scene_names(), dict(self._live_objects)),
            on_accepted=self.router.remember_accepted,
            on_refused=lambda edit, reason: self._edit_refused(instruction, edit, reason),
        )
        recalled = self.router.recall_into_edits(instruction, self.edits)
        self.planning.runner.edits = self.edits
        if recalled:
            self.publish_status("remembered", instruction, _recalled_lines(recalled))

    def _edit_refused(self, instruction: str, edit, reason: str) -> None:
        """The privilege gate refused an edit: say why; the arm goes on as before it."""
        self.publish_status(
            "correction",
            instruction,
            {
                "text": edit.correction.text,
                "kind": edit.correction.kind,
                "edit": edit.correction.describe(),
                "action": "refused",
                "error": f"refused by the privilege policy: {reason}",
            },
        )

    def _recall_into_spec(self, instruction: str, spec):
        """``spec`` with the remembered edits for ``instruction`` (and their notes)."""
        applied, used = self.router.recall_into_spec(
            instruction, spec, self._scene_names(), positions=dict(self._live_objects)
        )
        if applied is None or not used:
            return spec, []
        self.publish_status("remembered", instruction, _recalled_lines(used))
        return applied.spec, list(applied.notes)


def _recalled_lines(recalled) -> list[str]:
    return [
        f"{r.record.text!r} (said for {r.record.instruction!r}, similarity {r.score:.2f})"
        for r in recalled
    ]
