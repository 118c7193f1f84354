"""The messages between the sandbox runner and its child: what the child is told of a skill,
the reply to a refused call, and the outcome a child's error or exit means."""

from __future__ import annotations

import signal

from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.plan_state import TEXT_LIMIT, PlanEnded, PlanState
from lang2policy.sandbox.process import ProtocolError
from lang2policy.skills.spec import Skill

ERROR_KINDS = {"runtime", "syntax", "memory", "recursion", "denied", "invalid", "skill", "limit"}


def skill_message(skill: Skill) -> dict:
    """How the child is told of a skill: its name, parameters, return and doc."""
    return {
        "name": skill.name,
        "params": [p.name for p in skill.params],
        "returns": skill.returns,
        "doc": skill.doc,
    }


def error_outcome(message: dict) -> PlanOutcome:
    """The outcome of the child's ``error`` message (the program raised or hit a limit)."""
    kind = message.get("kind")
    if kind not in ERROR_KINDS:
        raise ProtocolError(f"unknown error kind from the child: {str(kind)[:40]}")
    line = message.get("line")
    line = line if isinstance(line, int) and not isinstance(line, bool) else None
    text = str(message.get("message", ""))[:TEXT_LIMIT]
    exc_type = str(message.get("exc_type", ""))[:100]
    if kind == "memory":
        return PlanOutcome(
            "limit", text or "out of memory", line, exc_type=exc_type, limit="memory"
        )
    if kind == "recursion":
        kind = "runtime"
    return PlanOutcome(
        kind, f"{exc_type}: {text}" if kind == "runtime" else text, line, exc_type=exc_type
    )


def exit_outcome(status: int | None, stderr: str, cpu_seconds: float) -> PlanOutcome:
    """The outcome of a child that exited mid-plan (killed by a limit, seccomp or a crash)."""
    if status is None:
        return PlanOutcome("protocol", "the child closed its message channel and was killed")
    if status == -signal.SIGXCPU or status == -signal.SIGKILL:
        return PlanOutcome(
            "limit",
            f"the program used more than {cpu_seconds:g} s of CPU",
            limit="cpu",
        )
    if status == -signal.SIGSYS:
        return PlanOutcome("crashed", "the child made a forbidden system call and was killed")
    tail = stderr.strip().splitlines()[-3:]
    detail = f"; stderr: {' | '.join(tail)[:500]}" if tail else ""
    return PlanOutcome(
        "crashed", f"the sandbox child exited unexpectedly (status {status}){detail}"
    )


def error_reply(call_id: int, kind: str, message: str) -> dict:
    """The reply to a call that was refused or failed, with the error's kind."""
    return {
        "type": "result",
        "id": call_id,
        "ok": False,
        "error": {"kind": kind, "message": message},
    }


def short_args(args: dict) -> dict:
    """A bounded copy of raw (unvalidated) arguments for the record."""
    return {str(k)[:40]: repr(v)[:80] for k, v in list(args.items())[:8]}


def check_ready(message: dict, state: PlanState, required_layers: tuple[str, ...]) -> None:
    """Check the child's ``ready`` message and keep the sandbox layers it reports; ends the
    plan when a required layer is not on."""
    layers = message.get("layers")
    if message["type"] != "ready" or not isinstance(layers, dict):
        raise ProtocolError("the child did not report ready")
    state.layers = {str(k)[:40]: str(v)[:200] for k, v in list(layers.items())[:8]}
    missing = [n for n in required_layers if state.layers.get(n) != "on"]
    if missing:
        detail = "; ".join(f"{n}: {state.layers.get(n, 'not reported')}" for n in missing)
        raise PlanEnded(
            PlanOutcome("crashed", f"required sandbox layers are not active ({detail})")
        )


def collect_output(message: dict, state: PlanState, budget: int) -> None:
    """Keep a ``print`` message's text within ``budget`` bytes; ends the plan past 8 times it."""
    text = message.get("text")
    if not isinstance(text, str):
        raise ProtocolError("a print message without text")
    state.output_seen += len(text)
    if state.output_seen > 8 * budget:
        raise PlanEnded(
            PlanOutcome(
                "limit", f"the program printed more than {8 * budget} bytes", limit="output"
            )
        )
    keep = text[: max(0, budget - state.output_kept)]
    state.output_kept += len(keep)
    if len(keep) < len(text) and not state.output_truncated:
        keep += "\n[output truncated]\n"
        state.output_truncated = True
    state.output.append(keep)
