"""Eureka-style reward reflection: a reward spec judged by a few seeded MPC episodes.

``evaluate(world, spec, scene, settings)`` runs ``settings.episodes`` short lockstep MPC episodes
on one scene (the same seeded layout each time, so the spec's points stay where the planner put
them; the sampler's seed differs per episode) and gathers what Eureka feeds back to the LLM:

- per term, the *weighted* cost of the plan the MPC chose at each iteration (mean, min, max over
  all iterations of all episodes), its share of the total, whether it stayed constant (no
  signal for the optimiser) and its unweighted measure at the start and end of the episodes;
- success k/N and time to success, judged by a fixed ``judge`` spec (the first spec's own
  conditions, or a benchmark task's), so a revision cannot succeed by loosening its own rule;
- the judged final error: the mean, over the judge's "below" conditions, of measure/tolerance
  (1.0 is at the tolerance; lower is better).

``reflection_text(stats)`` words it, with Eureka's rules as advice: near-zero success -> change
the goal terms; a constant term -> rescale it or set its weight to 0; a dominating term ->
rescale. The MPC (seconds per episode) is the evaluator on purpose: RL in this loop would take
hours on the 2 CPU cores this runs on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from lang2policy.mpc.cost import measures
from lang2policy.mpc.episode import LockstepMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import RewardSpec, check_objects
from lang2policy.rewards.terms import DEFAULT_TERMS, TERMS
from lang2policy.text_quote import prompt_quote

DOMINANT_SHARE = 0.8  # a term with this share of the mean total cost "dominates"
NEAR_ZERO_SUCCESS = 0.2  # success rates up to this are "near zero": rewrite the goal terms
CONSTANT_SPREAD = 0.02  # max - min within 2 % of the mean (or 1e-6): constant
GUARD_TERMS = frozenset({*DEFAULT_TERMS, "keep_out"})  # at 0 when all is well: not advised on


@dataclass(frozen=True)
class EvalSettings:
    """How a spec is evaluated: ``episodes`` lockstep MPC runs of ``samples`` samples each,
    sampler seeds ``seed``, ``seed + 1``, ...; ``max_seconds`` caps each episode's simulated
    time below the spec's duration (None: the spec's own)."""

    episodes: int = 2
    samples: int = 64
    seed: int = 0
    max_seconds: float | None = None
    threads: int = 2


@dataclass(frozen=True)
class Scene:
    """The layout every episode starts from: ``World.reset(seed, objects)`` (``objects``
    None: the seed's own draw of objects, which places them differently from the same names
    given explicitly)."""

    seed: int
    objects: tuple[str, ...] | None = None

    def reset(self, world) -> list[str]:
        """Put ``world`` in this layout; returns the objects on the table."""
        return world.reset(self.seed, None if self.objects is None else list(self.objects))


@dataclass(frozen=True)
class TermStats:
    """One term over the evaluation: weighted plan cost (mean/min/max), share of the mean
    total, whether it was constant, and its unweighted measure at the start and the end
    (means over episodes, in the term's unit)."""

    id: str
    term: str
    weight: float
    mean: float
    min: float
    max: float
    share: float
    constant: bool
    start: float
    end: float


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    status: str  # "success", "failed" or "timeout"
    sim_seconds: float
    judged_error: float
    final: dict[str, float] = field(default_factory=dict)  # the judge's measures at the end


@dataclass(frozen=True)
class SpecStats:
    """What one evaluation found: per-term statistics and the episodes' outcomes."""

    terms: tuple[TermStats, ...]
    episodes: tuple[EpisodeResult, ...]
    judge: str  # what decided success, in words
    wall_seconds: float = 0.0
    guards: tuple[str, ...] = ()  # term ids meant to stay at 0 (always-below conditions)

    @property
    def successes(self) -> int:
        return sum(e.status == "success" for e in self.episodes)

    @property
    def success_rate(self) -> float:
        return self.successes / max(1, len(self.episodes))

    @property
    def mean_time(self) -> float | None:
        """Mean simulated seconds to success over the successful episodes (None: none)."""
        times = [e.sim_seconds for e in self.episodes if e.status == "success"]
        return float(np.mean(times)) if times else None

    @property
    def judged_error(self) -> float:
        return float(np.mean([e.judged_error for e in self.episodes]))

    def dominant(self) -> TermStats:
        return max(self.terms, key=lambda t: t.share)

    def constant_terms(self) -> list[TermStats]:
        return [t for t in self.terms if t.constant]

    def score(self) -> tuple[float, float]:
        """Higher is better: (success rate, minus the judged final error)."""
        return (self.success_rate, -self.judged_error)

    def as_dict(self) -> dict:
        return {"successes": self.successes, "episodes": [asdict(e) for e in self.episodes],
                "success_rate": round(self.success_rate, 3),
                "mean_time": None if self.mean_time is None else round(self.mean_time, 2),
                "judged_error": round(self.judged_error, 4), "judge": self.judge,
                "terms": [asdict(t) for t in self.terms],
                "wall_seconds": round(self.wall_seconds, 2)}


@dataclass
class _Trace:
    """Per-term series gathered during the episodes."""

    costs: dict[str, list[float]] = field(default_factory=dict)
    starts: dict[str, list[float]] = field(default_factory=dict)
    ends: dict[str, list[float]] = field(default_factory=dict)


def judged_error(judge: RewardSpec, final: dict[str, float]) -> float:
    """Mean of measure / tolerance over the judge's "below" conditions (1.0: at the
    tolerance); with none, the weighted sum of the judge's final measures."""
    below = [c for c in judge.conditions if not c.always]
    if below:
        return float(np.mean([final[c.term] / max(c.tolerance, 1e-3) for c in below]))
    return float(sum(t.weight * final[t.id] for t in judge.terms))


def _measured(spec: RewardSpec, mpc: LockstepMPC) -> dict[str, float]:
    return {k: float(np.ravel(v)[0]) for k, v in measures(spec, mpc.measure_now()).items()}


def run_episode(world, spec: RewardSpec, judge: RewardSpec, scene: Scene, config: MPCConfig,
                trace: _Trace) -> EpisodeResult:
    """One lockstep MPC episode from ``scene``; the chosen plan's per-term costs go to
    ``trace`` at every iteration."""
    scene.reset(world)
    mpc = LockstepMPC(world, spec, config, judge=judge)
    try:
        for key, value in _measured(spec, mpc).items():
            trace.starts.setdefault(key, []).append(value)

        def record(m: LockstepMPC) -> None:
            for key, value in m.sampler.nominal.term_costs.items():
                trace.costs.setdefault(key, []).append(value)

        outcome = mpc.run(on_step=record)
        for key, value in _measured(spec, mpc).items():
            trace.ends.setdefault(key, []).append(value)
    finally:
        mpc.close()
    return EpisodeResult(config.seed, outcome.status, round(outcome.sim_seconds, 2),
                         round(judged_error(judge, outcome.final), 4),
                         {k: round(v, 4) for k, v in outcome.final.items()})


def _term_stats(spec: RewardSpec, trace: _Trace) -> tuple[TermStats, ...]:
    means = {t.id: float(np.mean(trace.costs.get(t.id, [0.0]))) for t in spec.terms}
    total = sum(means.values())
    stats = []
    for t in spec.terms:
        series = np.asarray(trace.costs.get(t.id, [0.0]))
        low, high, mean = float(series.min()), float(series.max()), means[t.id]
        stats.append(TermStats(
            id=t.id, term=t.term, weight=t.weight, mean=round(mean, 6), min=round(low, 6),
            max=round(high, 6), share=round(mean / total, 4) if total > 0 else 0.0,
            constant=high - low <= max(1e-6, CONSTANT_SPREAD * abs(mean)),
            start=round(float(np.mean(trace.starts.get(t.id, [0.0]))), 4),
            end=round(float(np.mean(trace.ends.get(t.id, [0.0]))), 4)))
    return tuple(stats)


def evaluate(world, spec: RewardSpec, scene: Scene, settings: EvalSettings,
             judge: RewardSpec | None = None, judge_name: str = "",
             on_episode: Callable[[EpisodeResult], None] | None = None) -> SpecStats:
    """Run ``settings.episodes`` episodes of ``spec`` on ``scene``; success is decided by
    ``judge`` (default: the spec's own conditions). ``on_episode`` is told of each one (a
    progress bar)."""
    check_objects(spec, scene.reset(world))
    judge = judge or spec
    capped = spec if settings.max_seconds is None else replace(
        spec, duration=min(spec.duration, settings.max_seconds))
    trace = _Trace()
    began = time.perf_counter()
    episodes = []
    for i in range(settings.episodes):
        config = MPCConfig(samples=settings.samples, seed=settings.seed + i,
                           threads=settings.threads)
        episodes.append(run_episode(world, capped, judge, scene, config, trace))
        if on_episode is not None:
            on_episode(episodes[-1])
    guards = tuple(c.term for c in judge.conditions if c.always)
    return SpecStats(_term_stats(spec, trace), tuple(episodes),
                     judge_name or _conditions_text(judge), time.perf_counter() - began, guards)


def _conditions_text(judge: RewardSpec) -> str:
    parts = [f"{c.term} {'always ' if c.always else ''}below {c.tolerance:g}"
             for c in judge.conditions]
    return "the spec's conditions: " + (", ".join(parts) if parts else "none (never succeeds)")


# ---------------------------------------------------------------- reflection text
def _term_line(t: TermStats) -> str:
    unit = TERMS[t.term].unit
    flag = ", CONSTANT" if t.constant else ""
    measured = (f"; measure {t.start:.3g} -> {t.end:.3g} {unit}".rstrip()
                if t.start or t.end else "")  # "0 -> 0" says nothing
    return (f"  {prompt_quote(t.id)} ({t.term}, weight {t.weight:g}): {t.mean:.4g} / "
            f"{t.min:.4g} / {t.max:.4g}, {t.share:.0%} of the cost{flag}{measured}")


def advised_constants(stats: SpecStats) -> list[TermStats]:
    """Constant terms worth changing: all but guard terms that stay at 0, as they should."""
    return [t for t in stats.constant_terms()
            if abs(t.max) > 1e-6 or (t.term not in GUARD_TERMS and t.id not in stats.guards)]


def _dominating(stats: SpecStats) -> TermStats | None:
    top = stats.dominant()
    return top if top.share >= DOMINANT_SHARE and len(stats.terms) > 1 else None


def advice(stats: SpecStats) -> list[str]:
    """Eureka's rules applied to ``stats``: what to change, one line each."""
    lines = []
    if stats.success_rate <= NEAR_ZERO_SUCCESS:
        lines.append("Success is near zero: the goal is not reached. Raise the weight of the "
                     "goal terms or change their parameters.")
    for t in advised_constants(stats):
        what = "always 0" if abs(t.max) <= 1e-6 else f"constant at {t.mean:.3g}"
        lines.append(f"'{prompt_quote(t.id)}' is {what}: it gives the optimiser no signal. "
                     "Rescale its parameters or set its weight to 0.")
    top = _dominating(stats)
    if top is not None:
        lines.append(f"'{prompt_quote(top.id)}' dominates ({top.share:.0%} of the cost): lower "
                     "its weight or raise the others'.")
    if not lines:
        lines.append("No rule fired: small changes to weights may still shorten the time.")
    return lines


def reflection_text(stats: SpecStats) -> str:
    """The reflection the LLM reads: outcome, per-term statistics, advice. Term ids and the
    judge's name come from a spec (the LLM's code, a file): each is quoted with
    ``prompt_quote``, so none can start a line of its own."""
    time_text = ("" if stats.mean_time is None
                 else f", mean time to success {stats.mean_time:.1f} s")
    lines = [f"Evaluated with {len(stats.episodes)} MPC episodes; success "
             f"{stats.successes}/{len(stats.episodes)}{time_text}.",
             f"Success judged by {prompt_quote(stats.judge)}; final error "
             f"{stats.judged_error:.3g} (1 = at the tolerance, lower is better).",
             "Weighted cost per term (mean / min / max over the plans, share of the total; "
             "unweighted measure start -> end):"]
    lines += [_term_line(t) for t in stats.terms]
    lines.append("Advice:")
    lines += [f"- {line}" for line in advice(stats)]
    return "\n".join(lines)


def focus_terms(stats: SpecStats) -> list[str]:
    """The term ids the advice is about, for a grammar that lets a small model edit only
    those: with near-zero success every term but the default ones (the goal may need any of
    them), then the constant and the dominating terms; every term when no rule fired."""
    ids = []
    if stats.success_rate <= NEAR_ZERO_SUCCESS:
        ids += [t.id for t in stats.terms if t.term not in DEFAULT_TERMS]
    ids += [t.id for t in advised_constants(stats)]
    top = _dominating(stats)
    ids += [top.id] if top is not None else []
    return list(dict.fromkeys(ids)) or [t.id for t in stats.terms]
