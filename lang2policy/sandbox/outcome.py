"""What running a plan produced: a structured outcome a planner can feed back to an LLM and a
person can read (what happened, where in the program, why), plus the record of every intent.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict, dataclass, field

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


def printable(text: str) -> str:
    """Text from the sandbox made safe for a terminal: control characters (ANSI escapes, bells,
    carriage returns) are shown as escapes instead of acting on the terminal."""
    return "".join(
        c if c in "\n\t" or unicodedata.category(c)[0] != "C" else repr(c)[1:-1] for c in text
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
        return f"{what}{where}: {self.message}"

    def summary(self) -> str:
        """Several readable lines: the headline, the offending line, the intents (terminal-safe)."""
        return printable(self._summary())

    def _summary(self) -> str:
        lines = [self.headline()]
        if self.source_line:
            lines.append(f"    {self.line}: {self.source_line.strip()}")
        for number, intent in enumerate(self.intents, 1):
            args = ", ".join(f"{k}={v!r}" for k, v in intent.args.items())
            status = "ok" if intent.ok else intent.error or intent.reason
            lines.append(f"  {number:>3}. {intent.skill}({args}) [{intent.decision}] {status}")
        if self.output:
            lines.append("printed:\n" + self.output.rstrip())
        return "\n".join(lines)

    def feedback(self) -> str:
        """The error as an LLM repair prompt should quote it (empty when the plan succeeded)."""
        if self.ok:
            return ""
        text = f"{KINDS.get(self.kind, self.kind)}. {self.headline()}"
        if self.source_line:
            text += f"\nOffending line {self.line}: {self.source_line.strip()}"
        denied = self.denied
        if denied:
            text += "\nDenied calls: " + "; ".join(f"{d.skill}: {d.reason}" for d in denied)
        return text
