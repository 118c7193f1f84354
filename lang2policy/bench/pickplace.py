"""``lang2policy bench pickplace``: scripted pick-and-place success over seeded layouts.

``--perception camera`` (``bench.pickplace_camera``) runs the episodes from camera perception
of a world under ``--realism``, beside the ground-truth run of the same episodes."""

from __future__ import annotations

import argparse
import time

import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.bench.pickplace_episode import EpisodeResult, put_block_in_bowl
from lang2policy.errors import Lang2PolicyError
from lang2policy.graph.launcher import HARDWARE_SO101
from lang2policy.session.sim import SimSession

PERCEPTION = ("ground_truth", "camera")


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
    parser.add_argument(
        "--perception",
        choices=PERCEPTION,
        default="ground_truth",
        help="where object poses come from (camera: beside ground truth)",
    )
    parser.add_argument(
        "--realism", default="off", help="off | mild | hard | FILE: the world a camera sees"
    )
    parser.add_argument(
        "--emulate",
        action="store_true",
        help=f"with --robot {HARDWARE_SO101} --perception camera: the SO-101 driver on an "
        "emulated servo bus (the profile's servo imperfections), in wall time",
    )


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench pickplace``."""
    if not 1 <= args.episodes <= 1000:
        raise Lang2PolicyError("--episodes must be at least 1 and at most 1000")
    bus = _emulated_bus(args)
    if args.perception == "camera":
        from lang2policy.bench import pickplace_camera

        return pickplace_camera.run(
            "so101" if bus else args.robot,
            args.episodes,
            args.seed,
            args.realism,
            progress=not args.json,
            bus=bus,
        )
    if args.realism != "off":
        raise Lang2PolicyError("--realism changes what a camera sees: use --perception camera")
    return run(args.robot, args.episodes, args.seed, progress=not args.json)


def _emulated_bus(args: argparse.Namespace) -> bool:
    """Whether the episodes run on the SO-101 driver over the emulated bus (checked flags)."""
    hardware = args.robot == HARDWARE_SO101
    if hardware != args.emulate:
        raise Lang2PolicyError(
            f"--robot {HARDWARE_SO101} and --emulate go together: a benchmark judges success "
            "from the simulated table, so the arm it drives is the emulated one"
        )
    if hardware and args.perception != "camera":
        raise Lang2PolicyError(
            f"--robot {HARDWARE_SO101} --emulate needs --perception camera: a physical arm has "
            "no ground truth to read objects from"
        )
    return hardware
