"""Eureka-style reward refinement rounds: evaluate, reflect, revise; keep the best spec.

Round 1 evaluates the spec the planner wrote. Each later round asks the reviser for edits to
the *best* spec so far, given that spec's reflection and what the last attempt did, and
evaluates the result. The best spec is the one with the highest (success rate, minus judged
final error); a later round must beat it strictly. A revision that fails (the LLM's answer is
unusable, the edited spec invalid) is logged as that round's error and the best spec stays; the
next attempt then samples at a higher temperature, since at temperature 0 the same prompt would
give the same answer.

``refine`` takes the evaluator and the reviser as functions, so the loop and its keep-best rule
do not depend on the simulator or on a particular LLM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lang2policy.errors import Lang2PolicyError
from lang2policy.l2r.reflection import SpecStats, advised_constants, reflection_text
from lang2policy.l2r.revise import Revision
from lang2policy.rewards.spec import RewardSpec

RETRY_TEMPERATURE = 0.5  # after a round that failed or did not improve

Evaluate = Callable[[RewardSpec, int], SpecStats]  # (spec, round index) -> its statistics


@dataclass
class Round:
    """One round: the spec evaluated (None when the revision failed), its statistics and
    reflection, the edits that made it, the LLM's time and whether it became the best."""

    index: int
    spec: RewardSpec | None
    stats: SpecStats | None = None
    reflection: str = ""
    edits: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    llm_seconds: float = 0.0
    error: str = ""
    best: bool = False  # the best spec after this round is this round's

    def as_dict(self) -> dict:
        return {"round": self.index, "spec": self.spec.to_dict() if self.spec else None,
                "stats": self.stats.as_dict() if self.stats else None,
                "reflection": self.reflection, "edits": list(self.edits),
                "changes": list(self.changes), "notes": list(self.notes),
                "llm_seconds": round(self.llm_seconds, 3), "error": self.error,
                "best": self.best}


Revise = Callable[[Round, str, float], Revision]  # (best round, last attempt, temperature)


@dataclass
class Refinement:
    rounds: list[Round] = field(default_factory=list)
    best: Round | None = None


def better(candidate: SpecStats, incumbent: SpecStats) -> bool:
    """Strictly better: higher success rate, or the same and a lower judged final error."""
    return candidate.score() > incumbent.score()


def _evaluated(index: int, spec: RewardSpec, evaluate: Evaluate, **fields) -> Round:
    stats = evaluate(spec, index)
    return Round(index, spec, stats, reflection_text(stats), **fields)


def _last_attempt(last: Round, best: Round) -> str:
    """What the reviser is told of the round before (empty when it became the best)."""
    if last.error:
        return f"the revision failed ({last.error}); try different edits."
    if last.best:
        return ""
    stats, kept = last.stats, best.stats
    return (f"{'; '.join(last.changes)} gave success {stats.successes}/{len(stats.episodes)}, "
            f"error {stats.judged_error:.3g}: not better than the kept spec (success "
            f"{kept.successes}/{len(kept.episodes)}, error {kept.judged_error:.3g}); "
            "try different edits.")


def refine(initial: RewardSpec, evaluate: Evaluate, revise: Revise, rounds: int = 3, *,
           initial_llm_seconds: float = 0.0,
           on_round: Callable[[Round], None] | None = None) -> Refinement:
    """Run ``rounds`` rounds from ``initial``; ``on_round`` is told of each as it ends."""
    if rounds < 1:
        raise Lang2PolicyError(f"rounds must be at least 1, got {rounds}")
    first = _evaluated(1, initial, evaluate, llm_seconds=initial_llm_seconds, best=True)
    result = Refinement([first], first)
    if on_round is not None:
        on_round(first)
    for index in range(2, rounds + 1):
        best, last = result.best, result.rounds[-1]
        temperature = 0.0 if last.best else RETRY_TEMPERATURE
        try:
            revision = revise(best, _last_attempt(last, best), temperature)
        except Lang2PolicyError as exc:
            current = Round(index, None, error=f"{type(exc).__name__}: {exc}")
        else:
            current = _evaluated(index, revision.spec, evaluate,
                                 edits=tuple(e.text() for e in revision.edits),
                                 changes=revision.changes, notes=revision.notes,
                                 llm_seconds=revision.llm_seconds)
            current.best = better(current.stats, best.stats)
        if current.best:
            result.best = current
        result.rounds.append(current)
        if on_round is not None:
            on_round(current)
    return result


def status_line(r: Round, total: int) -> str:
    """One line per round: success, mean time, error, dominant and constant terms, changes."""
    head = f"round {r.index}/{total}:"
    if r.stats is None:
        return f"{head} revision failed: {r.error}; the best spec so far is kept"
    s = r.stats
    mean_time = "-" if s.mean_time is None else f"{s.mean_time:.1f} s"
    top = s.dominant()
    constant = ", ".join(t.id for t in advised_constants(s)) or "none"  # guards at 0 left out
    what = ("planned by the LLM" if r.index == 1 and not r.changes
            else "changed " + "; ".join(r.changes))
    return (f"{head} success {s.successes}/{len(s.episodes)}, mean time {mean_time}, "
            f"error {s.judged_error:.3g}, dominant {top.id} {top.share:.0%}, constant: "
            f"{constant}; {what} (LLM {r.llm_seconds:.1f} s){' [best]' if r.best else ''}")
