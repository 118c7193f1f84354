"""``lang2policy bench cap``: the Code-as-Policies tabletop benchmark, oracle and LLM tracks.

Every episode (see ``cap_tasks``) is a seeded scene plus an instruction. The ORACLE track runs
the episode's reference program through the sandbox (default privilege policy), the LLM tracks
give the instruction to a fresh ``PlanLoop`` (plan, run through the same sandbox,
repair once; see ``cap_llm``): ``llm`` with grounded planning, ``llm-off`` with the ungrounded
baseline (``--grounding on|off|both``). All are judged on the simulator state afterwards.
Running them on the same episodes separates planner failures (LLM fails, oracle succeeds) from
execution failures (both fail) and measures what grounding changes. Results are counted per
family and split (seen/unseen attributes x seen/unseen phrasings), with planning latency
(p50/p90/mean per instruction) per LLM track. Episodes run in ``--workers`` processes, here or
on Ray (``parallel.executor``): the same report either way.

    report = run("so101", llm_spec="local", episodes=10, seed=0, oracle=True, progress=True)
    print(format_text(report))
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import mujoco
import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.bench import camera_route
from lang2policy.bench.cap_checks import Check
from lang2policy.bench.cap_llm import (
    GROUNDINGS,
    LLM_TRACKS,
    add_grounding_argument,
    groundings,
    llm_tracks,
    outcome_fields,
    sim_runner,
    success_count,
    tally,
    track_latency,
)
from lang2policy.bench.cap_splits import PHRASING_NAMES, SPLIT_NAMES, phrasing
from lang2policy.bench.cap_tasks import (
    CATEGORIES,
    FAMILIES,
    Episode,
    check_episode,
    family,
    make_episode,
)
from lang2policy.bench.cap_text import format_text
from lang2policy.errors import ConfigError
from lang2policy.parallel.executor import Executor, run_ordered
from lang2policy.parallel.executor import add_arguments as add_executor_arguments
from lang2policy.parallel.executor import from_args as executor_from_args
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy
from lang2policy.session.sim import SimSession
from lang2policy.skills.catalog import SKILLS

if TYPE_CHECKING:
    from lang2policy.llm.exchange import LLM
    from lang2policy.session.camera import CameraSession

__all__ = ["add_arguments", "format_text", "judge", "run", "run_args", "run_oracle"]

SETTLE_SECONDS = 0.5  # let objects come to rest before judging
RIG_EPISODES = 10  # camera route: episodes per rig (one user's objects and table, calibrated)


def judge(session: SimSession, episode: Episode) -> Check:
    """Let the objects settle, then check the task on the simulator state (a camera
    session's ``truth``: its own world is what perception reported). A simulation that blew up
    (MuJoCo gives up on it) is a failed episode, not a failed run."""
    world = getattr(session, "truth", session).world
    try:
        getattr(session, "settle", world.step_seconds)(SETTLE_SECONDS)
        with getattr(session, "truth_lock", contextlib.nullcontext)():  # the bus steps it too
            positions = [world.object_pose(n).position for n in episode.objects]
            if not np.isfinite(positions).all():
                return Check(False, "the simulation became unstable (non-finite object positions)")
            return check_episode(world, episode)
    except mujoco.FatalError as exc:
        return Check(False, f"the simulation became unstable: {str(exc).splitlines()[0]}")


def run_oracle(session: SimSession, episode: Episode, policy: PrivilegePolicy) -> dict:
    """Run the episode's reference program; judge the final state."""
    session.reset(episode.reset_seed, list(episode.objects))
    _, runner = sim_runner(session, policy)
    started = time.perf_counter()
    outcome = runner.run(episode.reference)
    check = judge(session, episode)
    return {
        "success": check.success,
        "reason": check.reason,
        **outcome_fields(outcome),
        "wall_seconds": round(time.perf_counter() - started, 2),
    }


def make_episodes(
    session: SimSession, episodes: int, seed: int, families: Sequence[str] | None = None
) -> list[Episode]:
    """``episodes`` episodes of each family (all, or those named), in family order."""
    chosen = FAMILIES if families is None else tuple(family(name) for name in families)
    return [make_episode(session, f, seed, i) for f in chosen for i in range(episodes)]


class TrackRunner:
    """The session, privilege policy and tracks of one benchmark run: the oracle track
    (``oracle``: the episodes' reference programs) and the LLM tracks that ``grounding``
    selects, on ``client`` or else the client ``llm_spec`` names (see ``cap_llm``)."""

    def __init__(
        self,
        robot: str,
        llm_spec: str | None,
        oracle: bool,
        grounding: str = "both",
        client: LLM | None = None,
        camera: CameraSession | None = None,
    ) -> None:
        """``camera``: the tracks run on this camera session (``bench.cap_camera``), and the
        ``truth`` track runs the reference programs on the simulator's poses beside."""
        if llm_spec is None and not oracle:
            raise ConfigError("nothing to run: give an LLM (--llm) or run the oracle track")
        self.session = SimSession(robot)  # draws the episodes; the ground-truth track's arm
        self.camera = camera
        self.policy = default_policy(self.session.world.description, known_skills=SKILLS)
        self.oracle = oracle
        self.llms = {}
        if llm_spec is not None:
            from lang2policy.llm import make_client

            self.llms = llm_tracks(client or make_client(llm_spec), grounding, judge)

    @property
    def tracks(self) -> list[str]:
        """The tracks that run, in report order (oracle, llm, llm-off)."""
        truth = ["truth"] * (self.camera is not None)
        return ["oracle"] * self.oracle + truth + list(self.llms)

    def record(self, episode: Episode, number: int = 0) -> dict:
        """One episode's record: its fields and one result per track (``number``: its place
        in the run, which picks the camera route's rig)."""
        record = {**episode.as_dict()}
        arm = self.camera or self.session
        if self.camera is not None and number % RIG_EPISODES == 0:
            self.camera.use_rig(number // RIG_EPISODES)
        if self.oracle:
            record["oracle"] = run_oracle(arm, episode, self.policy)
        if self.camera is not None:
            record["truth"] = run_oracle(self.session, episode, self.policy)
        for track, llm in self.llms.items():
            record[track] = llm.run(arm, episode, self.policy)
        return record

    def run(
        self,
        episodes: Sequence[Episode],
        desc: str,
        progress: bool = True,
        on_episode: Callable[[dict], None] | None = None,
    ) -> list[dict]:
        """Each episode's record, run here, with a progress bar (``desc``) of each track's
        successes so far."""
        records = (self.record(episode, number) for number, episode in enumerate(episodes))
        return collect(records, len(episodes), self.tracks, desc, progress, on_episode)


def collect(
    records: Iterable[dict],
    total: int,
    tracks: Sequence[str],
    desc: str,
    progress: bool = True,
    on_episode: Callable[[dict], None] | None = None,
) -> list[dict]:
    """The records as they come, each shown to ``on_episode`` and counted in a progress bar
    (``desc``) of each track's successes so far."""
    done: list[dict] = []
    bar = tqdm(total=total, desc=desc, unit="ep", disable=not progress)
    for record in records:
        done.append(record)
        if on_episode is not None:
            on_episode(record)
        bar.update()
        bar.set_postfix({t: tally(done, t) for t in tracks}, refresh=False)
    bar.close()
    return done


# ----------------------------------------------------------------------------- workers
def _worker_state(robot: str, llm_spec: str | None, oracle: bool, grounding: str,
                  client: LLM | None, server_url: str | None) -> TrackRunner:
    """A worker's own session and tracks, made once; its LLM client reaches the server the
    parent started (``server_url``), or is a copy of the parent's ``client``."""
    if client is None and llm_spec is not None:
        from lang2policy.llm import make_client

        client = make_client(llm_spec, server_url=server_url)
    return TrackRunner(robot, llm_spec, oracle, grounding, client)


def _work(runner: TrackRunner, episode: Episode) -> dict:
    return runner.record(episode)


def _label(episode: Episode) -> str:
    return f"{episode.family} episode {episode.index} ({episode.instruction!r})"


def _run_in_workers(executor: Executor, robot: str, llm_spec: str | None, oracle: bool,
                    grounding: str, client: LLM | None, plan: list[Episode]) -> Iterator[dict]:
    """Each episode's record from ``executor``'s workers, in ``plan``'s order. The local LLM
    server, if the spec runs one, is started here once and shared by every worker."""
    if llm_spec is None and not oracle:
        raise ConfigError("nothing to run: give an LLM (--llm) or run the oracle track")
    server_url = None
    if llm_spec is not None and client is None:
        from lang2policy.llm.factory import shared_server_url

        server_url = shared_server_url(llm_spec)
    setup_args = (robot, llm_spec, oracle, grounding, client, server_url)
    return run_ordered(executor, _worker_state, setup_args, _work, plan, _label)


def track_names(llm_spec: str | None, oracle: bool, grounding: str) -> list[str]:
    """The tracks a run without the camera route has, in report order (``TrackRunner``'s)."""
    llms = [GROUNDINGS[g][0] for g in groundings(grounding)] if llm_spec is not None else []
    return ["oracle"] * oracle + llms

def run(
    robot: str = "so101",
    llm_spec: str | None = None,
    episodes: int = 10,
    seed: int = 0,
    oracle: bool = True,
    progress: bool = True,
    families: Sequence[str] | None = None,
    on_episode: Callable[[dict], None] | None = None,
    grounding: str = "both",
    client: LLM | None = None,
    camera: CameraSession | None = None,
    executor: Executor | None = None,
) -> dict:
    """Run the benchmark: ``episodes`` per family, the oracle track (``oracle``) and/or the LLM
    track (``llm_spec``, as ``make_client`` takes it) on the same seeded episodes.

    ``grounding`` (on, off, both) picks the LLM tracks: ``llm`` plans with grounding on,
    ``llm-off`` with ``GroundingSettings.off()``, both on one client. ``client`` stands in for
    the client ``llm_spec`` would make (tests; ``llm_spec`` then only names it in the report).
    ``families`` limits the run to those task families; ``on_episode`` sees each episode's
    record as it finishes. ``camera``: the tracks run from camera perception on this session,
    the ``truth`` track beside (see ``TrackRunner``). ``executor``: the episodes run in its
    worker processes (each its own session and LLM client; ``client`` is copied to each),
    else here; the camera route always runs here. Returns the report (JSON-able; see
    ``format_text``); the same whichever executor ran it, timings aside."""
    if episodes < 1 and (llm_spec is not None or oracle):
        raise ConfigError(f"episodes must be at least 1, not {episodes}")
    started = time.perf_counter()
    if executor is None or camera is not None:  # the camera route runs here
        if executor is not None and executor.kind == "ray":
            raise ConfigError("the camera route runs in this process: --executor ray goes "
                              "without --perception camera")  # fmt: skip
        runner = TrackRunner(robot, llm_spec, oracle, grounding, client, camera)
        plan = make_episodes(runner.session, episodes, seed, families)
        tracks, records = runner.tracks, runner.run(plan, f"cap {robot}", progress, on_episode)
    else:
        tracks = track_names(llm_spec, oracle, grounding)
        plan = make_episodes(SimSession(robot), episodes, seed, families)
        done = _run_in_workers(executor, robot, llm_spec, oracle, grounding, client, plan)
        records = collect(done, len(plan), tracks, f"cap {robot}", progress, on_episode)
    return _report(robot, llm_spec, episodes, seed, tracks, records, started)


def _by(records: list[dict], key: Callable[[dict], str], names: Sequence[str], tracks) -> dict:
    """Counts per track of the records in each group ``key`` puts them in (groups in
    ``names`` order, empty ones left out)."""
    return {
        name: {t: success_count(mine, t) for t in tracks}
        for name in names
        if (mine := [r for r in records if key(r) == name])
    }


def _split(record: dict) -> str:
    return record["split"]


def _category(record: dict) -> str:
    return record["category"]


def _report(robot, llm_spec, episodes, seed, tracks, records, started) -> dict:
    def counts(selected: list[dict]) -> dict:
        return {t: success_count(selected, t) for t in tracks}

    families = []
    for name in dict.fromkeys(r["family"] for r in records):
        mine = [r for r in records if r["family"] == name]
        families.append(
            {
                "family": name,
                "category": mine[0]["category"],
                **counts(mine),
                "splits": _by(mine, _split, SPLIT_NAMES, tracks),
                "phrasings": _by(mine, phrasing, PHRASING_NAMES, tracks),
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
        "categories": _by(records, _category, CATEGORIES, tracks),
        "splits": _by(records, _split, SPLIT_NAMES, tracks),
        "phrasings": _by(records, phrasing, PHRASING_NAMES, tracks),
        "wall_seconds": round(time.perf_counter() - started, 2),
        "episodes": records,
    }
    llm_names = [t for t in tracks if t in LLM_TRACKS]
    if llm_names:
        report["llm_summary"] = {t: _llm_summary(records, t, "oracle" in tracks) for t in llm_names}
    return report


def _llm_summary(records: list[dict], track: str, with_oracle: bool) -> dict:
    """How one LLM track planned (latency, calls, repairs, outcomes), and whether its failures
    are the planner's or shared with the reference program."""
    done = [r[track] for r in records]
    summary = {
        "mean_planning_seconds": round(sum(d["llm_seconds"] for d in done) / len(done), 3),
        "latency": track_latency(done),
        "mean_llm_calls": round(sum(d["llm_calls"] for d in done) / len(done), 2),
        "repaired": sum(d["attempts"] == 2 for d in done),
        "outcomes": dict(Counter(d["outcome"] for d in done).most_common()),
        "verdicts": dict(Counter(d["verdict"] for d in done).most_common()),
    }
    if with_oracle:  # planner failures vs failures the reference program shares
        failed = [r for r in records if not r[track]["success"]]
        summary["failed_where_oracle_succeeded"] = sum(r["oracle"]["success"] for r in failed)
        summary["failed_with_oracle"] = sum(not r["oracle"]["success"] for r in failed)
    return summary


# ----------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--llm", help=cli_types.LLM_HELP + "; omit for the oracle track only")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task family")
    cli_types.add_seed(parser, "first episode seed")
    parser.add_argument("--families", help="comma-separated task families (default: all)")
    parser.add_argument("--no-oracle", action="store_true", help="skip the reference programs")
    add_grounding_argument(parser)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes (0: in this process; with --executor ray: the "
                        "local cluster's CPUs); the camera route runs in this process")
    add_executor_arguments(parser)
    camera_route.add_arguments(parser)


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench cap``."""
    bus = camera_route.emulated_bus(args)
    robot, camera, profile = camera_route.description(args), None, None
    if args.perception == "camera":
        from lang2policy.realism import load_realism

        profile = load_realism(args.realism)
        camera = camera_route.camera_session(robot, profile, bus)
    try:
        report = run(
            robot,
            args.llm,
            args.episodes,
            args.seed,
            oracle=not args.no_oracle,
            progress=not args.json,
            families=cli_types.names(args.families),
            grounding=args.grounding,
            camera=camera,
            executor=executor_from_args(args),
        )
    finally:
        if camera is not None:
            camera.close()
    if camera is not None:
        report.update(camera_route.route_fields(profile, bus))
    return report
