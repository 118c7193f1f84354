"""``lang2policy bench l2r``: per-task success of the MPC over seeded episodes, for reference
reward specs and (with ``--llm``) for specs the Language-to-Rewards planner writes.

Both tracks run on the same seeded scenes and are judged by each task's own conditions
(``l2r_tasks``), from simulator state. ``--backend rl`` runs the shipped RL policies
(``models/rl-*``) for tasks whose spec a family serves (hover: reach; move_slowly: move_slowly),
re-planning every control period of the policy, and the MPC for the rest; each episode says
which ran. Episodes run in ``--workers`` processes, here or on Ray (``parallel.executor``),
each seeded by its own seed: the report is the same whichever ran it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.bench.l2r_tasks import TASKS, TaskInstance
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.episode import LockstepMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.parallel.executor import Executor, run_ordered
from lang2policy.parallel.executor import add_arguments as add_executor_arguments
from lang2policy.parallel.executor import from_args as executor_from_args
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.rl.families import family_of
from lang2policy.rl.planner import BACKENDS, backend_settings, load_policies
from lang2policy.scene.world import World


@dataclass
class Episode:
    task: str
    track: str
    seed: int
    success: bool
    status: str
    sim_seconds: float
    plan_ms: float
    error: str = ""
    backend: str = ""  # what planned the episode's last step: "mpc" or "rl:<family>"


@dataclass(frozen=True)
class Backend:
    """The low-level controller: ``LockstepMPC`` settings and the policies' control periods."""

    name: str
    settings: dict
    periods: dict[str, float]  # family -> control period (s) of its policy

    def timing(self, spec: RewardSpec) -> dict:
        """Re-plan every control period of the policy that serves ``spec`` (none: defaults)."""
        served = family_of(spec)
        period = self.periods.get(served[0].name) if served else None
        return {"replan_period": period, "control_period": period} if period else {}


def make_backend(name: str, robot: str) -> Backend:
    """``mpc`` or ``rl`` (the shipped policies); ``ConfigError`` names the valid ones."""
    settings = backend_settings(name, robot, lead=0.0)  # lockstep: targets act at once
    settings.pop("families", None)
    options = settings.get("sampler_options", {})
    policies = load_policies(options["policies"], robot) if options else {}
    return Backend(name, settings, {f: p.control_period for f, p in policies.items()})


def _run_one(world: World, task: TaskInstance, spec: RewardSpec, config: MPCConfig,
             backend: Backend) -> dict:
    judge = validate_spec(task.judge, world.present, add_defaults=False).spec
    mpc = LockstepMPC(world, spec, config, judge=judge, **backend.settings,
                      **backend.timing(spec))
    try:
        outcome = mpc.run()
    finally:
        mpc.close()
    return {"success": outcome.success, "status": outcome.status,
            "sim_seconds": round(outcome.sim_seconds, 2), "plan_ms": round(outcome.plan_ms, 1),
            "backend": outcome.backend}


def _llm_spec(planner, world: World, task: TaskInstance) -> RewardSpec:
    """A fresh plan for the task's instruction, the planner told this episode's scene."""
    from lang2policy.session.readout import scene_state

    planner.reset()
    planner.set_scene(*scene_state(world))
    return planner.plan(task.instruction, None).spec


def run(robot: str = "so101", episodes: int = 5, first_seed: int = 0,
        tasks: Sequence[str] | None = None, llm: str | None = None,
        sampler: str = "sampling", samples: int = 128, progress: bool = True,
        backend: str = "mpc", executor: Executor | None = None) -> dict:
    """Every task's seeded episodes on each track, in ``executor``'s worker processes (None:
    in this process); the rows come back in order, so the report is the same either way."""
    names = list(tasks or TASKS)
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        raise Lang2PolicyError(f"unknown tasks {unknown}; valid tasks: {list(TASKS)}")
    make_backend(backend, robot)  # a bad backend is refused before any worker starts
    tracks = ["reference"] + (["llm"] if llm else [])
    server_url = None
    if llm:  # one LLM server, started here, for every worker
        from lang2policy.llm.factory import shared_server_url

        server_url = shared_server_url(llm)
    rows: list[Episode] = []
    began = time.perf_counter()
    cases = [(n, s, t) for n in names for s in range(first_seed, first_seed + episodes)
             for t in tracks]
    setup_args = (robot, backend, sampler, samples, llm, server_url)
    done = run_ordered(executor or Executor("local", 0), _worker_state, setup_args,
                       _work, cases, _label)
    bar = tqdm(total=len(cases), desc="bench l2r", unit="ep", disable=not progress)
    for row in done:
        rows.append(row)
        bar.update()
        bar.set_postfix(task=row.task, ok=f"{sum(r.success for r in rows)}/{len(rows)}")
    bar.close()
    report = _report(robot, names, tracks, rows, episodes, first_seed, llm,
                     time.perf_counter() - began)
    report |= {"sampler": sampler, "samples": samples, "backend": backend}
    return report


def _worker_state(robot: str, backend: str, sampler: str, samples: int, llm: str | None,
                  server_url: str | None) -> dict:
    """A worker's own world, controller and (``llm``) reward planner, made once."""
    return {"world": World(robot), "backend": make_backend(backend, robot),
            "planner": _make_reward_planner(llm, server_url) if llm else None,
            "sampler": sampler, "samples": samples}


def _work(state: dict, case: tuple[str, int, str]) -> Episode:
    """One episode (task, seed, track) in a worker, seeded by its seed alone."""
    name, seed, track = case
    config = MPCConfig(sampler=state["sampler"], samples=state["samples"], seed=seed)
    return _episode(state["world"], name, seed, track, state["planner"], config,
                    state["backend"])


def _label(case: tuple[str, int, str]) -> str:
    return f"{case[0]} seed {case[1]} ({case[2]})"


def _episode(world: World, name: str, seed: int, track: str, reward_planner,
             config: MPCConfig, backend: Backend) -> Episode:
    world.reset(seed)
    task = TASKS[name](world, np.random.default_rng(seed))
    try:
        spec = (validate_spec(task.reference, world.present).spec if track == "reference"
                else _llm_spec(reward_planner, world, task))
        result = _run_one(world, task, spec, config, backend)
        return Episode(name, track, seed, **result)
    except Lang2PolicyError as exc:
        return Episode(name, track, seed, False, "error", 0.0, 0.0,
                       f"{type(exc).__name__}: {exc}")


def _make_reward_planner(llm: str, server_url: str | None = None):
    from lang2policy.l2r.planner import RewardPlanner
    from lang2policy.llm.factory import make_client

    world = World("so101")
    return RewardPlanner(make_client(llm, server_url=server_url), world.present)


def _report(robot, names, tracks, rows, episodes, first_seed, llm, wall) -> dict:
    per_task = {}
    for name in names:
        per_task[name] = {}
        for track in tracks:
            mine = [r for r in rows if r.task == name and r.track == track]
            wins = sum(r.success for r in mine)
            per_task[name][track] = {"successes": wins, "episodes": len(mine),
                                     "rate": round(wins / max(1, len(mine)), 2),
                                     "backends": sorted({r.backend for r in mine if r.backend})}
    solved = {t: sum(per_task[n][t]["rate"] >= 0.8 for n in names) for t in tracks}
    return {"benchmark": "l2r", "robot": robot, "episodes_per_task": episodes,
            "first_seed": first_seed, "llm": llm, "tasks": per_task,
            "tasks_at_80_percent": solved, "wall_seconds": round(wall, 1),
            "episodes": [asdict(r) for r in rows]}


def format_text(report: dict) -> str:
    tracks = list(report["tasks_at_80_percent"])
    header = f"  {'task':<15}" + "".join(f"{t:>14}" for t in tracks)
    lines = [f"Language to Rewards tasks on {report['robot']}, "
             f"{report['episodes_per_task']} seeded episodes each, {report['sampler']} "
             f"sampler with {report['samples']} samples, backend {report['backend']} "
             f"(llm: {report['llm'] or 'not run'})", header + "  ran"]
    for name, row in report["tasks"].items():
        cells = "".join(f"{row[t]['successes']:>7}/{row[t]['episodes']:<2} "
                        f"{row[t]['rate']:>4.0%}" for t in tracks)
        ran = sorted({b for t in tracks for b in row[t]["backends"]})
        lines.append(f"  {name:<15}{cells}  {', '.join(ran) or '-'}")
    lines.append("  tasks at >= 80%: " + ", ".join(
        f"{t} {n}/{len(report['tasks'])}" for t, n in report["tasks_at_80_percent"].items()))
    errors = [e for e in report["episodes"] if e["error"]]
    lines += [f"  error {e['task']} seed {e['seed']} ({e['track']}): {e['error']}"
              for e in errors[:10]]
    lines.append(f"  wall {report['wall_seconds']:.0f} s")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", help=cli_types.LLM_HELP + "; omit for the reference track only")
    parser.add_argument("--episodes", type=int, default=5, help="seeded episodes per task")
    cli_types.add_seed(parser, "first episode seed")
    parser.add_argument("--tasks", help="comma-separated tasks (default: all 8)")
    parser.add_argument("--sampler", default="sampling", choices=["sampling", "cem"],
                        help="the MPC's sampling optimiser (predictive sampling or CEM)")
    parser.add_argument("--samples", type=int, default=128, help="MPC samples per iteration")
    parser.add_argument("--backend", default="mpc", choices=BACKENDS,
                        help="low-level controller: mpc, or rl (the shipped policies for "
                             "tasks a family serves, the MPC for the rest)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (default 0 with --executor local: in this "
                        "process, as the README's figure was measured; the episodes are the "
                        "same on any number; 2 with ray: the local cluster's CPUs)")
    add_executor_arguments(parser)


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench l2r``."""
    if args.episodes < 1:
        raise Lang2PolicyError("--episodes must be at least 1")
    return run(episodes=args.episodes, first_seed=args.seed, tasks=cli_types.names(args.tasks),
               llm=args.llm, sampler=args.sampler, samples=args.samples,
               progress=not args.json, backend=args.backend,
               executor=executor_from_args(args, workers=_workers(args)))


def _workers(args: argparse.Namespace) -> int:
    """``--workers``, or its default: 0 (this process) locally, 2 on Ray."""
    default = 2 if getattr(args, "executor", "local") == "ray" else 0
    return default if getattr(args, "workers", None) is None else args.workers
