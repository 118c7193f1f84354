"""How the planner's plan, the robot's words, the verdict and the scene read in the terminal.

Everything shown here is untrusted: the program and the said lines were written by a language
model, object names come from perception over the network. A person must be able to tell the
terminal's own lines from that text, so a program line is printed indented behind ``PROGRAM``
and escaped with ``one_line`` (a line of the program that reads ``outcome: ok`` or holds a
carriage return can never look like a status line), and every other value is one escaped line
inside a line the terminal wrote.

The planner's statuses read here (built in ``conductor/conductor.py``): ``plan`` with
{"route": "code", "code", "goal", "score"} or {"route": "reward", "spec", "description"},
sent just before the arm moves; ``said`` with the said text; the final ``done`` / ``failed``
whose detail carries ``verdict`` (``VERDICTS``), ``goal`` and ``said``.
A final detail without a verdict (an older planner) is rendered by the caller as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from lang2policy.sandbox.outcome import printable
from lang2policy.text_quote import one_line, quoted_lines

# verdict -> the words shown, and whether the instruction achieved what was asked
VERDICTS: dict[str, tuple[str, bool]] = {
    "goal_reached": ("goal reached", True),
    "done_not_verified": ("done, not verified (no checkable goal in the words)", True),
    "goal_not_reached": ("finished but goal not reached", False),
    "answered": ("answered", True),
    "refused": ("refused", False),
    "failed": ("failed", False),
}
PROGRAM = "    | "  # the prefix of every program line shown
INDENT = "    "  # the prefix of the other lines that belong to a status line
MAX_PROGRAM_LINES = 40  # of a plan about to run
HISTORY_PROGRAM_LINES = 3  # of each instruction in :history
MAX_SAID = 10  # said lines repeated under a final status
FIELD = 300  # characters of one quoted field


def text_of(value: object) -> str:
    """A status value as text: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def short(value: object, limit: int = 200) -> str:
    """One line of at most ``limit`` characters for any detail value (whitespace runs made
    one space, control characters escaped)."""
    text = printable(" ".join(text_of(value).split())) if value not in (None, "") else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(value: object, limit: int = FIELD) -> str:
    """An untrusted value as one escaped line (a line break in it is shown as ``\\n``)."""
    return one_line(text_of(value), limit) if value not in (None, "") else ""


def verdict_of(detail: object) -> str:
    """The final status's verdict (a key of ``VERDICTS``), or "" when it names none."""
    verdict = detail.get("verdict") if isinstance(detail, dict) else None
    return verdict if isinstance(verdict, str) and verdict in VERDICTS else ""


def verdict_words(verdict: str) -> str:
    return VERDICTS[verdict][0] if verdict in VERDICTS else ""


def verdict_ok(verdict: str) -> bool:
    return verdict in VERDICTS and VERDICTS[verdict][1]


def program_lines(
    code: str, prefix: str = PROGRAM, max_lines: int = MAX_PROGRAM_LINES
) -> list[str]:
    """The program's lines, each behind ``prefix`` and escaped; the last says how many more."""
    if not code.strip():
        return []
    return quoted_lines(code.strip("\n"), prefix, FIELD, max_lines).split("\n")


def said_line(detail: object) -> str:
    """``robot says: <text>`` for a live ``said`` status."""
    return f"robot says: {quoted(detail)}"


def plan_summary(detail: object) -> str:
    """What a plan status is about to do, in a few words (the toolbar's progress too)."""
    if not isinstance(detail, dict):
        return short(detail)
    if detail.get("route") == "reward":
        spec = detail.get("spec")
        task = spec.get("task") if isinstance(spec, dict) else ""
        return "reward spec: " + short(detail.get("description") or task or "(no description)")
    goal = short(detail.get("goal", "")) or "(no goal stated)"
    score = detail.get("score")
    number = isinstance(score, int | float) and not isinstance(score, bool)
    return f"goal: {goal}" + (f", score {score:.2f}" if number else "")


def plan_body(detail: object) -> list[str]:
    """The lines under a plan status: the program, or the reward spec's task and terms."""
    if not isinstance(detail, dict):
        return []
    if detail.get("route") != "reward":
        return program_lines(text_of(detail.get("code", "")))
    spec = detail.get("spec")
    if not isinstance(spec, dict):
        return []
    lines = [f"{PROGRAM}task: {quoted(spec['task'])}"] if spec.get("task") else []
    terms = spec.get("terms")
    if isinstance(terms, list) and terms:
        lines.append(f"{PROGRAM}terms: {quoted(', '.join(map(_term, terms)))}")
    return lines


def _term(term: object) -> str:
    """``lift(object='red block', height=0.15) x2`` for one reward term."""
    if not isinstance(term, dict):
        return text_of(term)
    params = term.get("params")
    args = ", ".join(f"{k}={v!r}" for k, v in params.items()) if isinstance(params, dict) else ""
    weight = term.get("weight")
    times = f" x{weight:g}" if isinstance(weight, int | float) and weight != 1 else ""
    return f"{text_of(term.get('term', '?'))}({args}){times}"


def final_what(detail: dict, verdict: str) -> str:
    """After the instruction in a final line: the verdict's words, and for a failure why."""
    words = verdict_words(verdict)
    if verdict_ok(verdict):
        return words
    outcome, message = short(detail.get("outcome", ""), 40), short(detail.get("message", ""))
    kind = f" ({outcome})" if outcome and outcome != "ok" and verdict == "failed" else ""
    return f"{words}{kind}" + (f": {message}" if message else "")


def final_body(detail: dict) -> list[str]:
    """The lines under a final status with a verdict: the goal and what the robot said."""
    lines = [f"{INDENT}goal: {quoted(detail['goal'])}"] if detail.get("goal") else []
    said = detail.get("said")
    if isinstance(said, list):
        lines += [f"{INDENT}robot said: {quoted(text)}" for text in said[:MAX_SAID]]
        if len(said) > MAX_SAID:
            lines.append(f"{INDENT}...[{len(said) - MAX_SAID} more said lines]")
    return lines


def scene_line(objects: Mapping[str, Sequence[float]] | None, topic: str) -> str:
    """``objects: red block at [0.40, 0.10, 0.02], ...``; what is missing when none were heard."""
    if objects is None:
        return f"objects: none heard yet on {topic}; perception may not be running"
    if not objects:
        return f"objects: none on the table (the last message on {topic} named none)"
    shown = ", ".join(
        f"{quoted(name, 80)} at [{', '.join(f'{v:.2f}' for v in position)}]"
        for name, position in objects.items()
    )
    return f"objects: {shown}"
