"""``lang2policy bench ik``: host time that planning a pick-and-place spends in inverse
kinematics, with the descent's stall test (``IKOptions.stall_iterations``) and without it, on
the same seeded scenes in one run.

Each episode resets a seeded scene and runs ``put_first_on_second(<first block>, <first bowl>)``
through the skill backend (the same planning as a program in the sandbox, physics included);
the IK solver is timed around every call. Success is the block resting in the bowl afterwards.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from lang2policy import cli_types
from lang2policy.control.ik import IKOptions
from lang2policy.errors import Lang2PolicyError
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend

MODES = {"stall test": IKOptions(), "baseline (no stall test)": IKOptions(stall_iterations=0)}


def run_episode(session: SimSession, seed: int, options: IKOptions) -> dict:
    """One seeded pick-and-place planned and run with ``options``: IK and wall seconds."""
    names = session.reset(seed)
    session.kinematics.options = replace(options)
    session.reset_primitives()
    block = next(n for n in names if n.endswith("block"))
    bowl = next(n for n in names if n.endswith("bowl"))
    kin, spent = session.kinematics, [0.0, 0]
    solve = kin.solve

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return solve(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started
            spent[1] += 1

    kin.solve = timed
    started = time.perf_counter()
    try:
        SimSkillBackend(session).execute("put_first_on_second", {"obj": block, "target": bowl})
        session.world.step_seconds(0.5)
        error = ""
    except Lang2PolicyError as exc:
        error = str(exc)[:200]
    finally:
        kin.solve = solve
    return {
        "seed": seed,
        "ik_seconds": round(spent[0], 3),
        "ik_solves": spent[1],
        "wall_seconds": round(time.perf_counter() - started, 3),
        "success": not error and session.world.is_in(block, bowl),
        "error": error,
    }


def _summary(records: list[dict]) -> dict:
    ik = np.array([r["ik_seconds"] for r in records])
    wall = np.array([r["wall_seconds"] for r in records])
    return {
        "successes": sum(r["success"] for r in records),
        "episodes": len(records),
        "ik_seconds": {
            "p50": round(float(np.median(ik)), 3),
            "p90": round(float(np.percentile(ik, 90)), 3),
            "mean": round(float(ik.mean()), 3),
        },
        "wall_seconds_mean": round(float(wall.mean()), 3),
        "ik_solves_mean": round(float(np.mean([r["ik_solves"] for r in records])), 1),
    }


def run(robot: str = "so101", episodes: int = 10, seed: int = 0) -> dict:
    if not 1 <= episodes <= 200:
        raise Lang2PolicyError(f"--episodes must be 1 to 200, got {episodes}")
    session = SimSession(robot)
    records = {
        mode: [run_episode(session, seed + i, options) for i in range(episodes)]
        for mode, options in MODES.items()
    }
    return {
        "benchmark": "ik",
        "robot": robot,
        "episodes": episodes,
        "seed": seed,
        "modes": {mode: _summary(rows) for mode, rows in records.items()},
        "records": records,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--episodes", type=int, default=10, help="seeded scenes (1 to 200)")
    cli_types.add_seed(parser, "first episode seed")


def run_args(args: argparse.Namespace) -> dict:
    return run(args.robot, args.episodes, args.seed)


def format_text(report: dict) -> str:
    lines = [
        f"lang2policy bench ik: {report['robot']}, {report['episodes']} seeded pick-and-places "
        f"from seed {report['seed']}"
    ]
    for mode, s in report["modes"].items():
        ik = s["ik_seconds"]
        lines.append(
            f"  {mode:26s} IK s per pick-and-place p50 / p90 / mean {ik['p50']:.3f} / "
            f"{ik['p90']:.3f} / {ik['mean']:.3f} ({s['ik_solves_mean']} solves), "
            f"wall {s['wall_seconds_mean']:.2f} s, success {s['successes']}/{s['episodes']}"
        )
    return "\n".join(lines)
