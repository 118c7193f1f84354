"""One-line renderings of the status model: the live toolbar and the prompt label."""

from __future__ import annotations

from lang2policy.terminal.planview import verdict_ok, verdict_words
from lang2policy.terminal.status import StatusModel

SEPARATOR = " | "
Segment = tuple[str, str]  # (style: "" | "warn" | "alert", text)
STATE_LABELS = {"plan": "executing"}  # "plan: ..." would read like the plan kind's segment


def toolbar_segments(model: StatusModel) -> list[Segment]:
    """The toolbar as styled pieces, most important first (a narrow terminal cuts the end):
    safety state, plan kind, planner state and instruction, the last verdict, last error,
    correction, progress, controller state and rate. Pieces with nothing to say are left out."""
    segments: list[Segment] = [_safety_segment(model), ("", f"plan: {model.plan_kind or '-'}")]
    if model.planner_state:
        style = "warn" if model.planner_state in ("failed", "rejected", "busy") else ""
        label = STATE_LABELS.get(model.planner_state, model.planner_state)
        segments.append((style, f"{label}: {_clip(model.instruction, 50)}"))
    if model.verdict:
        style = "" if verdict_ok(model.verdict) else "warn"
        segments.append((style, f"last: {verdict_words(model.verdict)}"))
    if model.last_error:
        segments.append(("warn", f"error: {_clip(model.last_error, 60)}"))
    if model.correction:
        segments.append(("", f"fix: {_clip(model.correction, 40)}"))
    if model.progress:
        segments.append(("", _clip(model.progress, 60)))
    if model.controller_state:
        rate = f" {model.controller_rate:.1f} Hz" if model.controller_rate else ""
        segments.append(("", f"controller: {model.controller_state}{rate}"))
    return segments


def _safety_segment(model: StatusModel) -> Segment:
    state = model.safety_state
    if not state:
        return ("", "safety: ?")
    if state == "ok":
        return ("", "safety: ok")
    reason = f" ({_clip(model.safety_reason, 40)})" if model.safety_reason else ""
    hint = " :resume" if state == "stopped" else ""
    return ("alert", f"safety: {state.upper()}{reason}{hint}")


def render_toolbar(segments: list[Segment], width: int | None = None) -> str:
    """The segments as plain text on one line, cut to ``width`` characters with an ellipsis."""
    line = SEPARATOR.join(text for _style, text in segments)
    return _clip(line, width) if width else line


def prompt_label(task_running: bool) -> str:
    """The prompt says where plain text goes: a correction of the running task, or a new task."""
    return "correct> " if task_running else "instruct> "


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"
