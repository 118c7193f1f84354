"""``lang2policy bench pickplace``: scripted pick-and-place success over seeded layouts.

``--perception camera`` (``bench.pickplace_camera``) runs the episodes from camera perception
of a world under ``--realism``, beside the ground-truth run of the same episodes."""

from __future__ import annotations

import argparse
import time

import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.bench import camera_route
from lang2policy.bench.pickplace_episode import EpisodeResult, put_block_in_bowl
from lang2policy.errors import Lang2PolicyError
from lang2policy.session.sim import SimSession


def pick_and_place(session: SimSession, seed: int) -> EpisodeResult:
    """Reset with ``seed``, put a seeded choice of block into a seeded choice of bowl."""
    names = session.reset(seed)
    rng = np.random.default_rng(seed + 10_000)
    block = str(rng.choice([n for n in names if n.endswith("block")]))
    bowl = str(rng.choice([n for n in names if n.endswith("bowl")]))
    return put_block_in_bowl(session.primitives, session.world, seed, block, bowl)


def run(robot: str, episodes: int, first_seed: int = 0, progress: bool = True) -> dict:
    session = SimSession(robot)
    results = []
    started = time.perf_counter()
    bar = tqdm(
        range(first_seed, first_seed + episodes),
        desc=f"pickplace {robot}",
        unit="ep",
        disable=not progress,
    )
    for seed in bar:
        results.append(pick_and_place(session, seed))
        bar.set_postfix(success=f"{sum(r.success for r in results)}/{len(results)}")
    wall = time.perf_counter() - started
    failures = [r.as_dict() for r in results if not r.success]
    return {
        "benchmark": "pickplace",
        "robot": robot,
        "episodes": episodes,
        "first_seed": first_seed,
        "successes": sum(r.success for r in results),
        "success_rate": sum(r.success for r in results) / max(1, episodes),
        "mean_sim_seconds": sum(r.sim_seconds for r in results) / max(1, episodes),
        "wall_seconds": round(wall, 2),
        "failures": failures,
    }


def format_text(report: dict) -> str:
    if report.get("perception") == "camera":
        from lang2policy.bench import pickplace_camera

        return pickplace_camera.format_text(report)
    lines = [
        f"pick-and-place on {report['robot']}: {report['successes']}/{report['episodes']} "
        f"succeeded (success_rate {report['success_rate']:.2f})",
        f"  mean episode {report['mean_sim_seconds']:.1f} s simulated, "
        f"{report['wall_seconds']:.1f} s wall for all episodes",
    ]
    lines += [
        f"  failed seed {f['seed']}: {f['block']} -> {f['bowl']} {f['error']}"
        for f in report["failures"]
    ]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--episodes", type=int, default=50)
    cli_types.add_seed(parser, "first episode seed")
    camera_route.add_arguments(parser)


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench pickplace``."""
    if not 1 <= args.episodes <= 1000:
        raise Lang2PolicyError("--episodes must be at least 1 and at most 1000")
    bus = camera_route.emulated_bus(args)
    if args.perception == "camera":
        from lang2policy.bench import pickplace_camera

        robot = camera_route.description(args)
        return pickplace_camera.run(
            robot, args.episodes, args.seed, args.realism, progress=not args.json, bus=bus
        )
    return run(args.robot, args.episodes, args.seed, progress=not args.json)
