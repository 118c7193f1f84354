"""A reward task's end as the outcome contract states it: ``done`` only when the spec's success
condition held (the controller says so), else ``failed`` with the reason and the shortfall.

One function for every reward executor (the controller node's end-of-task line, the in-process
MPC's outcome), so a reward plan's final status reads the same in the graph and in
``lang2policy run``: ``verdict`` (``goal_reached`` | ``goal_not_reached`` | ``failed``, the
terminal's words), ``goal`` (the spec's success condition), ``message`` (the controller's reason
and, when the goal was missed, each unmet condition's measured value) and ``measures`` (every
term's unweighted value at the end).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lang2policy.rewards.spec import RewardSpec
from lang2policy.rewards.terms import TERMS

ENDED = ("success", "failed", "timeout")  # the controller's end-of-task states


def describe_goal(spec: RewardSpec) -> str:
    """The spec's success condition in words (``""`` when it has none: it runs its duration)."""
    goals = [c for c in spec.conditions if not c.always]
    if not goals:
        return ""
    parts = [f"{c.term} <= {c.tolerance:g} {_unit(spec, c.term)}".rstrip() for c in goals]
    return " and ".join(parts) + f", held {spec.hold:g} s"


def shortfall(spec: RewardSpec, measures: Mapping[str, Any]) -> str:
    """Each success condition the measured values miss: ``lift 0.042 m (needs <= 0.01)``."""
    missed = []
    for c in spec.conditions:
        value = measures.get(c.term)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if not math.isfinite(value) or value > c.tolerance:
            unit = _unit(spec, c.term)
            missed.append(
                f"{c.term} {value:.3f}{' ' + unit if unit else ''} (needs <= {c.tolerance:g})"
            )
    return ", ".join(missed)


def reward_verdict(
    spec: RewardSpec, status: str, reason: str, measures: Mapping[str, Any], seconds: float | None
) -> tuple[bool, dict[str, Any]]:
    """(ok, detail) of a reward task that ended with ``status`` (success | failed | timeout, or
    the hand-off's own: rejected | no_answer | stopped | cancelled) after ``seconds``.

    A spec without goal conditions that ran its duration out did what it asked (a "keep doing
    this" behaviour); any other end than ``success`` is a failure, with the unmet conditions."""
    goals = [c for c in spec.conditions if not c.always]
    ok = status == "success" or (status == "timeout" and not goals)
    values = {k: v for k, v in measures.items() if isinstance(v, int | float)}
    after = f" after {seconds:.1f} s" if seconds is not None else ""
    message = f"controller: {status}{after}" + (f" ({reason})" if reason else "")
    missed = "" if ok else shortfall(spec, values)
    if missed:
        message += f"; {missed}"
    if ok:
        verdict = "goal_reached"
    elif status in ENDED:
        verdict = "goal_not_reached"
    else:
        verdict = "failed"
    detail = {
        "verdict": verdict,
        "goal": describe_goal(spec) or f"run '{spec.task}' for {spec.duration:g} s",
        "outcome": status,
        "message": message,
        "measures": values,
    }
    return ok, detail


def _unit(spec: RewardSpec, term_id: str) -> str:
    term = next((t for t in spec.terms if t.id == term_id), None)
    found = TERMS.get(term.term) if term is not None else None
    return found.unit if found is not None else ""
