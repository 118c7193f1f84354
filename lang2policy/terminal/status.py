"""The live state of the graph as the terminal sees it, folded from status JSON messages.

Two topics feed it, with lines of the one schema (``lang2policy.graph.topics.StatusEvent``,
told apart by ``node``): ``/lang2policy/status`` (the planner's ``{"node": "planner", "state",
"instruction", "detail"}`` lines, also without ``node`` as recorded before every line named one,
and the controller's periodic ``{"node": "controller", "state", "task", "stats", ...}``) and
``/lang2policy/safety`` (``{"node": "safety", "state": "ok" | "stopped" | "holding",
"reason"}``). ``StatusModel.fold`` turns each message into an update of the model and, when
something changed that a person should read, a ``Notice`` with a one-line description.
Malformed or unknown messages (too big or too deep ones too: ``wire_json.decode_status``) are
reported raw; nothing here raises on bad input. Every text shown is made terminal-safe
(control characters and ANSI escapes are printed as escapes).
"""

from __future__ import annotations

from dataclasses import dataclass

from lang2policy.graph.topics import CONTROLLER_NODE, PLANNER_NODE, SAFETY_NODE, status_node
from lang2policy.terminal.planview import (
    final_body,
    final_what,
    plan_body,
    plan_summary,
    said_line,
    short,
    verdict_of,
    verdict_ok,
)
from lang2policy.wire_json import MessageError, decode_status

PLANNER_ACTIVE = frozenset({"received", "planning", "plan", "running", "correction", "remembered"})
PLANNER_FINAL = frozenset({"done", "failed", "stopped", "rejected", "busy"})  # busy: refused
CONTROLLER_EVENTS = frozenset({"accepted", "rejected", "cancelled"})  # one message per spec
CONTROLLER_ERRORS = frozenset({"failed", "timeout", "rejected"})
SENT_GRACE = 5.0  # s an instruction counts as running before the planner confirms it
MAX_RAW = 300  # characters of an unrecognised message that are shown


@dataclass(frozen=True)
class Notice:
    """Something worth a line in the log: who said it, the state, and the line itself.

    ``final`` marks the planner's last word on ``instruction`` (done, failed, stopped, rejected,
    busy); ``ok`` is True only for ``done`` (and, when the planner states a verdict, only for
    one that achieved what was asked). ``more`` holds the lines printed under ``line`` (a
    program, the goal, what the robot said), each indented; ``program`` is the plan's code (or
    its reward spec's task) and ``verdict`` the final verdict, for the console's history.
    """

    source: str  # planner | controller | safety | <other node> | unknown
    state: str
    instruction: str
    line: str
    final: bool = False
    ok: bool = False
    more: tuple[str, ...] = ()
    program: str = ""
    verdict: str = ""

    @property
    def lines(self) -> tuple[str, ...]:
        """Every line to print: ``line`` and then ``more``."""
        return (self.line, *self.more)


@dataclass
class StatusModel:
    """What the toolbar shows: plan kind, instruction, progress, controller, safety, error."""

    plan_kind: str = ""  # code | reward (the route of the last instruction)
    instruction: str = ""
    planner_state: str = ""
    progress: str = ""  # the last running line, or the final outcome
    correction: str = ""
    controller_state: str = ""
    controller_task: str = ""
    controller_rate: float | None = None
    controller_backend: str = ""  # "rl:<family>" while an RL policy runs the task, else ""
    safety_state: str = ""
    safety_reason: str = ""
    last_error: str = ""
    last_raw: str = ""
    verdict: str = ""  # the last final status's verdict ("" from a planner that states none)
    sent: str = ""  # an instruction sent and not yet confirmed by the planner
    sent_at: float = 0.0

    def note_sent(self, instruction: str, now: float) -> None:
        """An instruction left the terminal: treat it as running until the planner answers
        (or ``SENT_GRACE`` s pass), so a quick follow-up is routed as a correction."""
        self.sent, self.sent_at = same_text(instruction), now

    def task_running(self, now: float) -> bool:
        """True while plain text should be a correction: the planner is busy with an
        instruction, the controller runs a task, or an instruction was just sent."""
        if self.sent and now - self.sent_at < SENT_GRACE:
            return True
        return self.planner_state in PLANNER_ACTIVE or self.controller_state == "running"

    def fold(self, text: str) -> Notice | None:
        """Update the model with one status message (``/lang2policy/status`` or
        ``/lang2policy/safety``); the event to print, or None when nothing visible changed."""
        message = _decode(text)
        if message is None:
            return self._unrecognised(text)
        node = status_node(message)
        if node == CONTROLLER_NODE:
            return self._fold_controller(message)
        if node == SAFETY_NODE:
            return self._fold_safety(message)
        if node == PLANNER_NODE:
            return self._fold_planner(message)
        state, name = short(message["state"], 40), short(node, 40)
        detail = short(message.get("detail", message.get("reason", "")))
        return Notice(name, state, "", f"[{name}] {state}" + (f": {detail}" if detail else ""))

    def _unrecognised(self, text: object) -> Notice:
        raw = short(text[: MAX_RAW * 4] if isinstance(text, str | bytes) else text, MAX_RAW)
        self.last_raw = raw
        return Notice("unknown", "", "", f"[status] unrecognised message: {raw}")

    def _fold_planner(self, message: dict) -> Notice:
        state = short(message["state"], 40)
        instruction = short(message.get("instruction", ""), 500)
        detail = message.get("detail", "")
        if state == "ready":  # the planner warmed its LLM: instructions are answered quickly
            said = short(detail.get("llm", "")) if isinstance(detail, dict) else short(detail)
            if self.planner_state == "starting":  # the toolbar no longer shows the warm-up
                self.planner_state, self.progress = "", "ready"
            return Notice("planner", state, "", f"[planner] ready: {said}".rstrip(": "))
        if state in ("busy", "rejected") and self._other_instruction_active(instruction):
            # a refused second instruction does not end the one that runs
            self.last_error = f"{state}: {instruction}: {short(detail)}"
            return Notice(
                "planner", state, instruction, _planner_line(state, instruction, detail), final=True
            )
        if state == "correction":
            # A correction keeps a running task running; one of nothing starts nothing.
            if self.planner_state in PLANNER_ACTIVE:
                self.correction, self.planner_state = instruction, state
            self.progress = short(detail) or self.progress
            return Notice("planner", state, instruction, _planner_line(state, instruction, detail))
        if state == "said":  # the robot speaks; the task runs on
            self.progress = f"says: {short(detail, 80)}"
            return Notice("planner", state, instruction, said_line(detail))
        final = state in PLANNER_FINAL
        self.planner_state, self.instruction = state, instruction
        if instruction == self.sent or final:
            self.sent = ""
        self.plan_kind = _route(detail) or self.plan_kind
        if final:
            self.verdict = verdict_of(detail)
            if self.verdict:
                return self._fold_verdict(state, instruction, detail)
        if state == "plan":
            return self._fold_plan(instruction, detail)
        if state == "received":
            self.progress, self.correction = "", ""
        elif state == "done":
            self.progress, self.last_error, self.correction = _done_text(detail), "", ""
        elif final:  # failed, rejected, busy; a correction of it is over too
            self.progress, self.correction = "", ""
            self.last_error = f"{state}: {_outcome_text(detail)}"
        else:
            self.progress = short(detail)
        line = _planner_line(state, instruction, detail)
        return Notice("planner", state, instruction, line, final=final, ok=state == "done")

    def _fold_plan(self, instruction: str, detail: object) -> Notice:
        """The plan about to run: its goal (or reward spec) and, under it, the program."""
        summary = self.progress = plan_summary(detail)
        line = f"{_head('plan', detail)}: {instruction} — about to run, {summary}"
        program = ""
        if isinstance(detail, dict) and _route(detail) != "reward":
            program = detail.get("code", "") if isinstance(detail.get("code"), str) else ""
        elif isinstance(detail, dict):
            program = summary
        more = tuple(plan_body(detail))
        return Notice("planner", "plan", instruction, line, more=more, program=program)

    def _fold_verdict(self, state: str, instruction: str, detail: dict) -> Notice:
        """A final status that states its verdict: shown as it is, with the goal and what the
        robot said; ``ok`` only for a ``done`` whose verdict achieved what was asked."""
        ok = state == "done" and verdict_ok(self.verdict)
        what = final_what(detail, self.verdict)
        self.correction = ""
        self.progress = what if ok else ""
        self.last_error = "" if ok else f"{state}: {what}"
        code = detail.get("code")
        return Notice(
            "planner",
            state,
            instruction,
            f"{_head(state, detail)}: {instruction} — {what}",
            final=True,
            ok=ok,
            more=tuple(final_body(detail)),
            program=code if isinstance(code, str) else "",
            verdict=self.verdict,
        )

    def _other_instruction_active(self, instruction: str) -> bool:
        return self.planner_state in PLANNER_ACTIVE and instruction != self.instruction

    def _fold_controller(self, message: dict) -> Notice | None:
        state = short(message["state"], 40)
        task = short(message.get("task") or "")
        detail = short(message.get("detail", ""))
        line = f"[controller] {state}" + (f": {task}" if task else "")
        line += f" ({detail})" if detail else ""
        if state in CONTROLLER_ERRORS:
            self.last_error = f"controller {state}: {detail or task}"
        if state in CONTROLLER_EVENTS:
            return Notice("controller", state, task, line)
        stats = message.get("stats")
        rate = stats.get("rate_hz") if isinstance(stats, dict) else None
        self.controller_rate = float(rate) if isinstance(rate, int | float) else None
        backend = short(str(stats.get("backend", "")), 40) if isinstance(stats, dict) else ""
        if state == "running" and backend.startswith("rl:"):  # a learned policy drives it
            line += f" [policy {backend[3:]}]"
        else:
            backend = ""
        changed = (state, task, backend) != (
            self.controller_state,
            self.controller_task,
            self.controller_backend,
        )
        self.controller_state, self.controller_task = state, task
        self.controller_backend = backend
        return Notice("controller", state, task, line) if changed else None

    def _fold_safety(self, message: dict) -> Notice | None:
        state = short(message["state"], 40)
        reason = short(message.get("reason", ""))
        changed = (state, reason) != (self.safety_state, self.safety_reason)
        self.safety_state, self.safety_reason = state, reason
        if not changed:
            return None
        shown = state.upper() if state != "ok" else state
        return Notice("safety", state, "", f"[safety] {shown}" + (f": {reason}" if reason else ""))


def same_text(text: str) -> str:
    """``text`` as the model stores echoed instructions (whitespace runs made one space), so a
    sent text and the planner's echo of it compare equal."""
    return " ".join(text.split())


def _decode(text: object) -> dict | None:
    """The message as a dict with a text ``state``; None when it is not one (not text, not
    JSON, or beyond the limits on size, nesting and number length of ``decode_status``)."""
    if not isinstance(text, str | bytes):
        return None
    try:
        return decode_status(text)
    except MessageError:
        return None


def _route(detail: object) -> str:
    route = detail.get("route") if isinstance(detail, dict) else None
    return route if isinstance(route, str) else ""


def _done_text(detail: object) -> str:
    """What a finished plan achieved: the reward spec's task, or the code outcome's message."""
    if not isinstance(detail, dict):
        return short(detail)
    spec = detail.get("spec")
    if isinstance(spec, dict) and spec.get("task"):
        return f"reward spec: {short(spec['task'])}"
    parts = [short(detail.get(key, "")) for key in ("outcome", "message")]
    return " — ".join(p for p in parts if p)


def _outcome_text(detail: object) -> str:
    if isinstance(detail, dict):
        return short(detail.get("message") or detail.get("outcome") or detail)
    return short(detail)


_ACTIONS = {
    "edit_code": "applied to the running program",
    "edit_spec": "applied to the running reward spec",
    "stop": "stopping",
    "replan": "re-planning with it",
    "forwarded": "sent to the VLA as a language motion",  # a skill plan (issue 18)
    "applied": "applied by the VLA",
}


def _correction_line(detail: dict) -> str:
    """``[planner] correction "no, the blue one": target red block -> blue block, applied to
    the running program`` (or the reason it was not applied)."""
    said = short(detail.get("text", ""), 80)
    edit = short(detail.get("edit") or detail.get("kind", ""), 80)
    if detail.get("error"):
        return f'[planner] correction "{said}" not applied: {short(detail["error"])}'
    action = _ACTIONS.get(str(detail.get("action")), short(detail.get("action", ""), 40))
    return f'[planner] correction "{said}": {edit}, {action}'


def _head(state: str, detail: object) -> str:
    """``[planner] <state> (<route>)``."""
    route = _route(detail)
    return f"[planner] {state}" + (f" ({route})" if route else "")


def _planner_line(state: str, instruction: str, detail: object) -> str:
    """``[planner] <state> (<route>): <instruction> — <what happened>``."""
    head = _head(state, detail)
    if state == "done":
        what = _done_text(detail)
    elif state in ("failed", "rejected", "busy"):
        what = _outcome_text(detail)
    elif state == "correction" and isinstance(detail, dict):
        return _correction_line(detail)
    elif state == "stopped":
        return f"{head}: {short(detail)}"
    elif isinstance(detail, dict):
        what = short({k: v for k, v in detail.items() if k != "route"} or "")
    else:
        what = short(detail)
    if state in ("running", "planning", "starting") and what:
        return f"{head}: {what}"
    return f"{head}: {instruction}" + (f" — {what}" if what else "")
