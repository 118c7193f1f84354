"""What running a plan produced: a structured outcome a planner can feed back to an LLM and a
person can read (what happened, where in the program, why), plus the record of every intent.

Every field that came from the program (exception text, source lines, printed output, skill
names and errors) is rendered through ``lang2policy.text_quote``: in the summary and in the
feedback each such field stays on its own line, so the program cannot write lines that read
like the host's (a forged ``outcome : ok``, an uncommented line in the repair prompt).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict, dataclass, field

from lang2policy.text_quote import escape_char, one_line, quoted_lines

# Outcome kinds. "ok" is the only success; every other kind left the arm holding still.
KINDS = {
    "ok": "the program finished",
    "syntax": "the program does not parse",
    "rejected": "the pre-check refused the program before it ran",
    "runtime": "the program raised an exception",
    "invalid": "a skill was called with bad arguments",
    "denied": "the privilege policy denied a skill call",
    "skill": "a skill failed while running (e.g. a target out of reach)",
    "limit": "the program hit a limit (time, memory, output, calls, motion time)",
    "stopped": "a policy rule stopped the arm",
    "crashed": "the sandbox child died",
    "protocol": "the sandbox child broke the message protocol",
}


# Control, format, surrogate, private-use, unassigned; line and paragraph separators.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def printable(text: str) -> str:
    """Multi-line text made safe for a terminal: control characters (ANSI escapes, bells,
    carriage returns) and the Unicode line and paragraph separators are shown as escapes, so
    ``\\n`` is the only line break left (``str.splitlines`` sees the same lines a terminal
    shows). For a single untrusted field use ``one_line``, which escapes ``\\n`` too."""
    return "".join(
        c if c in "\n\t" or unicodedata.category(c) not in _ESCAPED_CATEGORIES else escape_char(c)
        for c in text
    )


@dataclass
class IntentRecord:
    """One skill call that left the sandbox, and what the host did with it."""

    skill: str
    args: dict
    decision: str  # "allowed" | "approved" (asked, user said yes) | "denied" | "invalid" | "budget"
    rule: str = ""
    reason: str = ""
    ok: bool = False
    error: str = ""
    motion_seconds: float = 0.0


@dataclass
class PlanOutcome:
    kind: str
    message: str = ""
    line: int | None = None
    source_line: str = ""
    exc_type: str = ""
    limit: str = ""  # which limit, when kind == "limit"
    intents: list[IntentRecord] = field(default_factory=list)
    output: str = ""
    said: list[str] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)
    wall_seconds: float = 0.0
    motion_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def denied(self) -> list[IntentRecord]:
        return [i for i in self.intents if i.decision == "denied"]

    def as_dict(self) -> dict:
        data = asdict(self)
        data["ok"] = self.ok
        return data

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def headline(self) -> str:
        if self.ok:
            return f"ok: {len(self.intents)} skill calls, {self.motion_seconds:.1f} s of motion"
        where = f" at line {self.line}" if self.line else ""
        what = f"{self.kind} ({self.limit})" if self.limit else self.kind
        return f"{one_line(what)}{where}: {one_line(self.message)}"

    def summary(self) -> str:
        """Readable lines, terminal-safe: the headline, the offending line, one line per intent,
        then the printed output, each of its lines behind ``  | ``. No text from the program
        can start a line of its own."""
        lines = [self.headline()]
        if self.source_line:
            lines.append(f"    {self.line}: {one_line(self.source_line.strip())}")
        for number, intent in enumerate(self.intents, 1):
            lines.append(f"  {number:>3}. {_intent_line(intent)}")
        if self.output:
            lines.append("printed:\n" + quoted_lines(self.output.rstrip("\n"), "  | "))
        return "\n".join(lines)

    def feedback(self) -> str:
        """The error as an LLM repair prompt should quote it (empty when the plan succeeded):
        ``\\n``-separated lines, each a fixed label and one quoted field."""
        if self.ok:
            return ""
        lines = [f"{KINDS.get(self.kind, self.kind)}. {self.headline()}"]
        if self.source_line:
            lines.append(f"Offending line {self.line}: {one_line(self.source_line.strip())}")
        denied = self.denied
        if denied:
            calls = "; ".join(f"{d.skill}: {d.reason}" for d in denied)
            lines.append(f"Denied calls: {one_line(calls)}")
        return "\n".join(lines)


def _intent_line(intent: IntentRecord) -> str:
    """One intent as ``skill(args) [decision] status`` on one line (every part quoted)."""
    args = ", ".join(f"{k}={v!r}" for k, v in intent.args.items())
    status = "ok" if intent.ok else intent.error or intent.reason
    return one_line(f"{intent.skill}({args}) [{intent.decision}] {status}")
