"""``lang2policy bench cap``: the Code-as-Policies tabletop benchmark, oracle and LLM tracks.

Every episode (see ``cap_tasks``) is a seeded scene plus an instruction. The ORACLE track runs
the episode's reference program through the sandbox (default privilege policy), the LLM track
gives the instruction to a fresh ``PlanLoop`` (plan, run through the same sandbox,
repair once); both are judged on the simulator state afterwards. Running both on the same
episodes separates planner failures (LLM fails, oracle succeeds) from execution failures (both
fail). Results are counted per family and split (seen/unseen attributes x seen/unseen
phrasings).

    report = run("so101", llm_spec="local", episodes=10, seed=0, oracle=True, progress=True)
    print(format_text(report))
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable, Sequence

import mujoco
import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.bench.cap_checks import Check
from lang2policy.bench.cap_splits import SPLIT_NAMES
from lang2policy.bench.cap_tasks import (
    CATEGORIES,
    FAMILIES,
    Episode,
    check_episode,
    family,
    make_episode,
)
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS

SETTLE_SECONDS = 0.5  # let objects come to rest before judging
TRACKS = ("oracle", "llm")
_CODE_LIMIT = 4000  # characters of generated code kept per episode in the report


class TimedLLM:
    """Wraps an LLM client; counts ``complete`` calls and the seconds spent in them."""

    def __init__(self, llm) -> None:
        self._llm = llm
        self.calls = 0
        self.seconds = 0.0

    def complete(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self._llm.complete(*args, **kwargs)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started

    def __getattr__(self, name: str):
        return getattr(self._llm, name)


def _runner(session: SimSession, policy: PrivilegePolicy) -> tuple[SimSkillBackend, SandboxRunner]:
    backend = SimSkillBackend(session)
    return backend, SandboxRunner(backend, policy)


def _outcome_fields(outcome) -> dict:
    return {
        "outcome": outcome.kind,
        "message": outcome.message[:300],
        "line": outcome.line,
        "skill_calls": len(outcome.intents),
        "motion_seconds": round(outcome.motion_seconds, 2),
    }


def judge(session: SimSession, episode: Episode) -> Check:
    """Let the objects settle, then check the task on the simulator state. A simulation that
    blew up (MuJoCo gives up on it) is a failed episode, not a failed run."""
    try:
        session.world.step_seconds(SETTLE_SECONDS)
        positions = [session.world.object_pose(n).position for n in episode.objects]
        if not np.isfinite(positions).all():
            return Check(False, "the simulation became unstable (non-finite object positions)")
        return check_episode(session.world, episode)
    except mujoco.FatalError as exc:
        return Check(False, f"the simulation became unstable: {str(exc).splitlines()[0]}")


def run_oracle(session: SimSession, episode: Episode, policy: PrivilegePolicy) -> dict:
    """Run the episode's reference program; judge the final state."""
    session.reset(episode.reset_seed, list(episode.objects))
    _, runner = _runner(session, policy)
    started = time.perf_counter()
    outcome = runner.run(episode.reference)
    check = judge(session, episode)
    return {
        "success": check.success,
        "reason": check.reason,
        **_outcome_fields(outcome),
        "wall_seconds": round(time.perf_counter() - started, 2),
    }


class LLMTrack:
    """The planner side: one LLM client and planner for the run, a fresh session per episode."""

    def __init__(self, llm_spec: str) -> None:
        from lang2policy.llm import make_client
        from lang2policy.planning import CodeAsPoliciesPlanner

        self.spec = llm_spec
        self.llm = TimedLLM(make_client(llm_spec))
        self.planner = CodeAsPoliciesPlanner(self.llm)

    def run(self, session: SimSession, episode: Episode, policy: PrivilegePolicy) -> dict:
        from lang2policy.planning import PlanLoop

        session.reset(episode.reset_seed, list(episode.objects))
        backend, runner = _runner(session, policy)
        planning = PlanLoop(self.planner, runner, backend)
        calls, seconds = self.llm.calls, self.llm.seconds
        started = time.perf_counter()
        try:
            result = planning.handle(episode.instruction)
        except Lang2PolicyError as exc:  # the planner should not raise; count it as a failure
            backend.hold()
            return {
                "success": False,
                "reason": "the planner raised an error; " + judge(session, episode).reason,
                "outcome": "error",
                "message": f"{type(exc).__name__}: {exc}"[:300],
                "line": None,
                "skill_calls": 0,
                "motion_seconds": 0.0,
                "wall_seconds": round(time.perf_counter() - started, 2),
                "llm_calls": self.llm.calls - calls,
                "llm_seconds": round(self.llm.seconds - seconds, 3),
                "attempts": 0,
                "code": "",
            }
        check = judge(session, episode)
        program = result.program
        return {
            "success": check.success,
            "reason": check.reason,
            **_outcome_fields(result.outcome),
            "wall_seconds": round(time.perf_counter() - started, 2),
            "llm_calls": self.llm.calls - calls,
            "llm_seconds": round(self.llm.seconds - seconds, 3),
            "attempts": result.attempts,
            "code": "" if program is None else program.code[:_CODE_LIMIT],
        }


def make_episodes(
    session: SimSession, episodes: int, seed: int, families: Sequence[str] | None = None
) -> list[Episode]:
    """``episodes`` episodes of each family (all, or those named), in family order."""
    chosen = FAMILIES if families is None else tuple(family(name) for name in families)
    return [make_episode(session, f, seed, i) for f in chosen for i in range(episodes)]


def run(
    robot: str = "so101",
    llm_spec: str | None = None,
    episodes: int = 10,
    seed: int = 0,
    oracle: bool = True,
    progress: bool = True,
    families: Sequence[str] | None = None,
    on_episode: Callable[[dict], None] | None = None,
) -> dict:
    """Run the benchmark: ``episodes`` per family, the oracle track (``oracle``) and/or the LLM
    track (``llm_spec``, as ``make_client`` takes it) on the same seeded episodes.

    ``families`` limits the run to those task families; ``on_episode`` sees each episode's
    record as it finishes. Returns the report (JSON-able; see ``format_text``)."""
    if llm_spec is None and not oracle:
        raise ConfigError("nothing to run: give an LLM (--llm) or run the oracle track")
    if episodes < 1:
        raise ConfigError(f"episodes must be at least 1, not {episodes}")
    started = time.perf_counter()
    session = SimSession(robot)
    policy = default_policy(session.world.description, known_skills=SKILLS)
    llm = LLMTrack(llm_spec) if llm_spec is not None else None
    plan = make_episodes(session, episodes, seed, families)
    records: list[dict] = []
    bar = tqdm(plan, desc=f"cap {robot}", unit="ep", disable=not progress)
    for episode in bar:
        record = {**episode.as_dict()}
        if oracle:
            record["oracle"] = run_oracle(session, episode, policy)
        if llm is not None:
            record["llm"] = llm.run(session, episode, policy)
        records.append(record)
        if on_episode is not None:
            on_episode(record)
        bar.set_postfix({t: _tally(records, t) for t in TRACKS if t in record}, refresh=False)
    return _report(robot, llm_spec, episodes, seed, oracle, records, started)


def _tally(records: list[dict], track: str) -> str:
    done = [r[track]["success"] for r in records if track in r]
    return f"{sum(done)}/{len(done)}"


def _count(records: list[dict], track: str) -> dict:
    done = [r for r in records if track in r]
    successes = sum(r[track]["success"] for r in done)
    return {
        "successes": successes,
        "episodes": len(done),
        "success_rate": round(successes / len(done), 4) if done else None,
    }


def _report(robot, llm_spec, episodes, seed, oracle, records, started) -> dict:
    tracks = [t for t in TRACKS if (t == "oracle" and oracle) or (t == "llm" and llm_spec)]
    family_names = list(dict.fromkeys(r["family"] for r in records))

    def counts(selected: list[dict]) -> dict:
        return {t: _count(selected, t) for t in tracks}

    families = []
    for name in family_names:
        mine = [r for r in records if r["family"] == name]
        families.append(
            {
                "family": name,
                "category": mine[0]["category"],
                **counts(mine),
                "splits": {
                    s: counts([r for r in mine if r["split"] == s])
                    for s in SPLIT_NAMES
                    if any(r["split"] == s for r in mine)
                },
            }
        )
    report = {
        "benchmark": "cap",
        "robot": robot,
        "llm_spec": llm_spec,
        "tracks": tracks,
        "episodes_per_family": episodes,
        "seed": seed,
        **counts(records),
        "families": families,
        "categories": {
            c: counts([r for r in records if r["category"] == c])
            for c in CATEGORIES
            if any(r["category"] == c for r in records)
        },
        "splits": {
            s: counts([r for r in records if r["split"] == s])
            for s in SPLIT_NAMES
            if any(r["split"] == s for r in records)
        },
        "wall_seconds": round(time.perf_counter() - started, 2),
        "episodes": records,
    }
    if "llm" in tracks:
        report["llm_summary"] = _llm_summary(records, "oracle" in tracks)
    return report


def _llm_summary(records: list[dict], with_oracle: bool) -> dict:
    """How the LLM track planned, and whether its failures are the planner's or shared."""
    done = [r["llm"] for r in records]
    summary = {
        "mean_planning_seconds": round(sum(d["llm_seconds"] for d in done) / len(done), 3),
        "mean_llm_calls": round(sum(d["llm_calls"] for d in done) / len(done), 2),
        "repaired": sum(d["attempts"] == 2 for d in done),
        "outcomes": dict(Counter(d["outcome"] for d in done).most_common()),
    }
    if with_oracle:  # planner failures vs failures the reference program shares
        failed = [r for r in records if not r["llm"]["success"]]
        summary["failed_where_oracle_succeeded"] = sum(r["oracle"]["success"] for r in failed)
        summary["failed_with_oracle"] = sum(not r["oracle"]["success"] for r in failed)
    return summary


# ----------------------------------------------------------------------------- text
def _cell(block: dict, tracks: list[str]) -> str:
    return " ".join(f"{block[t]['successes']}/{block[t]['episodes']}".rjust(6) for t in tracks)


def _pct(block: dict) -> str:
    rate = block["success_rate"]
    return "  -" if rate is None else f"{100 * rate:.0f}%"


def format_text(report: dict) -> str:
    tracks = report["tracks"]
    width = 7 * len(tracks)
    splits = [s for s in SPLIT_NAMES if s in report["splits"]]
    llm = f", LLM {report['llm_spec']}" if report["llm_spec"] else ""
    lines = [
        f"Code-as-Policies tabletop benchmark on {report['robot']}: "
        f"{report['episodes_per_family']} episodes per family, seed {report['seed']}{llm}",
        "splits: SA/UA = seen/unseen attributes (colours, corners, directions, lines), "
        "SI/UI = seen/unseen instruction phrasings",
        "",
    ]
    header = f"{'family':<16}{'category':<14}" + "".join(
        f"{s:>{width + 2}}" for s in [*splits, "all"]
    )
    sub = " " * 30 + "".join(
        f"{' '.join(t.rjust(6) for t in tracks):>{width + 2}}" for _ in [*splits, "all"]
    )
    lines += [header, sub]
    for fam in report["families"]:
        cells = [fam["splits"].get(s) for s in splits]
        row = f"{fam['family']:<16}{fam['category']:<14}"
        for cell in cells:
            row += f"{_cell(cell, tracks) if cell else '-':>{width + 2}}"
        row += f"{_cell(fam, tracks):>{width + 2}}"
        lines.append(row)
    lines.append("")
    for name, block in [*report["categories"].items(), ("all", report)]:
        rates = "  ".join(
            f"{t} {block[t]['successes']}/{block[t]['episodes']} ({_pct(block[t])})" for t in tracks
        )
        lines.append(f"{name:<16}{rates}")
    split_rates = "  ".join(
        f"{s} " + "/".join(_pct(report["splits"][s][t]) for t in tracks) for s in splits
    )
    lines.append(f"{'by split':<16}{split_rates}  ({'/'.join(tracks)})")
    if "llm_summary" in report:
        summary = report["llm_summary"]
        outcomes = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
        lines.append(
            f"LLM planning: {summary['mean_planning_seconds']:.2f} s mean per instruction "
            f"({summary['mean_llm_calls']:.1f} LLM calls), {summary['repaired']} repaired; "
            f"outcomes: {outcomes}"
        )
        if "failed_where_oracle_succeeded" in summary:
            lines.append(
                f"LLM failures: {summary['failed_where_oracle_succeeded']} where the oracle "
                f"succeeded (planning), {summary['failed_with_oracle']} where it failed too"
            )
    lines.append(f"wall time {report['wall_seconds']:.0f} s")
    failures = [r for r in report["episodes"] if "oracle" in r and not r["oracle"]["success"]]
    for r in failures:
        o = r["oracle"]
        lines.append(
            f"  oracle failed: {r['family']} #{r['index']} ({r['split']}) "
            f"'{r['instruction']}': {o['reason']}; {o['outcome']}: "
            f"{(o['message'].splitlines() or [''])[0][:120]}"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--llm", help=cli_types.LLM_HELP + "; omit for the oracle track only")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task family")
    cli_types.add_seed(parser, "first episode seed")
    parser.add_argument("--families", help="comma-separated task families (default: all)")
    parser.add_argument("--no-oracle", action="store_true", help="skip the reference programs")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench cap``."""
    return run(
        args.robot,
        args.llm,
        args.episodes,
        args.seed,
        oracle=not args.no_oracle,
        progress=not args.json,
        families=cli_types.names(args.families),
    )
