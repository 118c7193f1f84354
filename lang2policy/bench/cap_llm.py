"""The LLM side of the planning benchmarks (``bench cap``, ``bench paraphrase``): one planner per
grounding setting on one shared LLM client, timed per instruction.

Each ``LLMTrack`` gives an episode's instruction to a fresh ``PlanLoop`` (plan, run through the
sandbox, repair once) with its ``GroundingSettings``, and records the outcome, the LLM calls
and the planning latency: seconds inside the LLM (``llm_seconds``, the figure the README's
"2.7 s mean" is) and the instruction's wall seconds but the program's run on the arm
(``planning_seconds``: grammar, candidates, scoring, retrieval, the dry run on a simulated copy
and a re-plan included). Running both grounding settings on the same seeded scenes in one run
measures what grounding changes.

    tracks = llm_tracks(make_client("local"), "both", judge)  # {"llm": on, "llm-off": off}
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from lang2policy.bench.cap_checks import Check
from lang2policy.bench.cap_tasks import Episode
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.synced import SyncedSkillBackend

# grounding name -> (track name in reports, settings). "on" is the planner's default.
GROUNDINGS: dict[str, tuple[str, GroundingSettings]] = {
    "on": ("llm", GroundingSettings()),
    "off": ("llm-off", GroundingSettings.off()),
}
GROUNDING_CHOICES = ("on", "off", "both")
LLM_TRACKS = tuple(track for track, _ in GROUNDINGS.values())
_CODE_LIMIT = 4000  # characters of generated code kept per episode in the report

Judge = Callable[[SimSession, Episode], Check]


def groundings(choice: str) -> tuple[str, ...]:
    """The grounding names ``--grounding`` selects (``both``: on, then off)."""
    if choice not in GROUNDING_CHOICES:
        valid = ", ".join(GROUNDING_CHOICES)
        raise ConfigError(f"grounding must be one of {valid}, not {choice!r}")
    return ("on", "off") if choice == "both" else (choice,)


def add_grounding_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--grounding",
        choices=GROUNDING_CHOICES,
        default="both",
        help="LLM track with grounded planning (on), the ungrounded baseline (off), or both "
        "on the same episodes (default)",
    )


class _Timed:
    """Wraps an object: counts the calls of the method a subclass times and adds up their wall
    seconds; every other attribute is the wrapped object's."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.calls = 0
        self.seconds = 0.0

    def _timed(self, method: str, *args, **kwargs):
        started = time.perf_counter()
        try:
            return getattr(self._inner, method)(*args, **kwargs)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


class TimedLLM(_Timed):
    """An LLM client whose ``complete`` calls are counted and timed."""

    def complete(self, *args, **kwargs):
        return self._timed("complete", *args, **kwargs)


class TimedRunner(_Timed):
    """A sandbox runner whose ``run`` calls (the program running on the arm) are timed; its
    policy and limits (for the dry run) are the runner's."""

    def run(self, *args, **kwargs):
        return self._timed("run", *args, **kwargs)


def outcome_fields(outcome) -> dict:
    """The sandbox outcome's part of an episode record."""
    return {
        "outcome": outcome.kind,
        "message": outcome.message[:300],
        "line": outcome.line,
        "skill_calls": len(outcome.intents),
        "motion_seconds": round(outcome.motion_seconds, 2),
    }


def sim_runner(
    session: SimSession, policy: PrivilegePolicy
) -> tuple[SimSkillBackend, SandboxRunner]:
    """The skill backend on ``session`` and the sandbox runner in front of it. The backend
    syncs the session before each call: a camera session's world is what perception last
    reported (a simulated one's sync does nothing)."""
    backend = SyncedSkillBackend(session)
    return backend, SandboxRunner(backend, policy)


class LLMTrack:
    """One grounding setting's planner on the shared, timed LLM client; a fresh session state
    and ``PlanLoop`` per episode, judged by ``judge`` on the simulator state afterwards."""

    def __init__(self, llm: TimedLLM, grounding: GroundingSettings, judge: Judge) -> None:
        from lang2policy.planning import CodeAsPoliciesPlanner

        self.llm, self.grounding, self.judge = llm, grounding, judge
        self.planner = CodeAsPoliciesPlanner(llm, grounding=grounding)

    def run(self, session: SimSession, episode: Episode, policy: PrivilegePolicy) -> dict:
        from lang2policy.planning import PlanLoop

        session.reset(episode.reset_seed, list(episode.objects))
        backend, sandbox = sim_runner(session, policy)
        runner = TimedRunner(sandbox)
        planning = PlanLoop(self.planner, runner, backend, grounding=self.grounding)
        calls, seconds = self.llm.calls, self.llm.seconds
        started = time.perf_counter()

        def timing() -> dict:
            wall = time.perf_counter() - started
            return {
                "wall_seconds": round(wall, 2),
                "planning_seconds": round(wall - runner.seconds, 3),
                "llm_calls": self.llm.calls - calls,
                "llm_seconds": round(self.llm.seconds - seconds, 3),
            }

        try:
            result = planning.handle(episode.instruction)
        except Lang2PolicyError as exc:  # the planner should not raise; count it as a failure
            backend.hold()
            return {
                "success": False,
                "reason": "the planner raised an error; " + self.judge(session, episode).reason,
                "outcome": "error",
                "message": f"{type(exc).__name__}: {exc}"[:300],
                "line": None,
                "skill_calls": 0,
                "motion_seconds": 0.0,
                **timing(),
                "attempts": 0,
                "verdict": "error",
                "code": "",
            }
        check = self.judge(session, episode)
        program = result.program
        return {
            "success": check.success,
            "reason": check.reason,
            **outcome_fields(result.outcome),
            **timing(),
            "attempts": result.attempts,
            # the planner's own judgement (its stated goal); success above is the benchmark's
            "verdict": result.verdict.verdict if result.verdict is not None else "failed",
            "code": "" if program is None else program.code[:_CODE_LIMIT],
            **_first_attempt(result),
        }


def _first_attempt(result) -> dict:
    """The first program and why it was re-planned, when it was (what a reader of the JSON
    needs to see how the re-plan changed it)."""
    if result.first_program is None or result.first_verdict is None:
        return {}
    return {
        "first_code": result.first_program.code[:_CODE_LIMIT],
        "first_reason": result.first_verdict.reason[:300],
    }


def llm_tracks(llm, choice: str, judge: Judge) -> dict[str, LLMTrack]:
    """Track name -> ``LLMTrack`` for the groundings ``choice`` selects, on one timed client."""
    timed = TimedLLM(llm)
    return {
        GROUNDINGS[name][0]: LLMTrack(timed, GROUNDINGS[name][1], judge)
        for name in groundings(choice)
    }


def tally(records: list[dict], track: str) -> str:
    """``3/5``: successes of ``track`` over the records that ran it (for progress bars)."""
    done = [r[track]["success"] for r in records if track in r]
    return f"{sum(done)}/{len(done)}"


def success_count(records: list[dict], track: str) -> dict:
    """Successes, episodes and success rate of ``track`` over the records that ran it."""
    done = [r for r in records if track in r]
    successes = sum(r[track]["success"] for r in done)
    return {
        "successes": successes,
        "episodes": len(done),
        "success_rate": round(successes / len(done), 4) if done else None,
    }


def latency(values: list[float]) -> dict:
    """p50, p90 and mean of per-instruction seconds (None when there are none)."""
    if not values:
        return {"p50": None, "p90": None, "mean": None}
    p50, p90 = np.percentile(np.asarray(values, dtype=float), [50, 90])
    return {
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "mean": round(float(np.mean(values)), 3),
    }


def track_latency(records: list[dict]) -> dict:
    """Planning latency of one LLM track's episode records, per instruction: seconds in the
    LLM, and all seconds but the program's run on the arm."""
    return {
        "llm_seconds": latency([r["llm_seconds"] for r in records]),
        "planning_seconds": latency([r["planning_seconds"] for r in records]),
    }


def seconds_text(stats: dict) -> str:
    """``p50 1.23 s, p90 2.34 s, mean 1.50 s`` (or ``-``)."""
    if stats["p50"] is None:
        return "-"
    return f"p50 {stats['p50']:.2f} s, p90 {stats['p90']:.2f} s, mean {stats['mean']:.2f} s"
