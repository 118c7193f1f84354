"""``lang2policy bench executor``: the same scripted demonstrations (``record demos``' episodes,
not written) on the local process pool and on Ray with 1 and with 2 workers, side by side.

Per setup: the wall time from the first submit to the last episode (Ray's cluster start and
each worker's simulation and renderer included), the episodes per second over that, and the
rate after the first episode came back (the throughput, start-up left out). Every setup makes
the same episodes: a digest of their frames, states and actions is compared across setups.
The target: 2 Ray workers' throughput at least ``TARGET`` times 1 worker's; the ratio of the
wall times (start-up included, which a short run cannot amortise) is printed beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

from lang2policy.errors import ConfigError

TARGET = 1.7  # 2 Ray workers' throughput over 1 worker's
SETUPS = (("local", 2), ("ray", 1), ("ray", 2))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--episodes", type=int, default=6, help="episodes per task family")
    parser.add_argument("--families", default="lift,push",
                        help="comma-separated task families (record demos')")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw")
    parser.add_argument("--setups", default="local:2,ray:1,ray:2",
                        help="EXECUTOR:WORKERS, comma-separated, in the order run")  # fmt: skip


def setups(text: str) -> list[tuple[str, int]]:
    chosen = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        kind, _, count = part.partition(":")
        if kind not in ("local", "ray") or not count.isdigit() or int(count) < 1:
            raise ConfigError(f"--setups: EXECUTOR:WORKERS (local or ray, workers >= 1), "
                              f"comma-separated; got {part!r}")  # fmt: skip
        chosen.append((kind, int(count)))
    if not chosen:
        raise ConfigError("--setups names no setup")
    return chosen


def run_args(args: argparse.Namespace) -> dict:
    from lang2policy.parallel.executor import Executor
    from lang2policy.vla.sim.demos import generate, training_specs

    families = [f for f in args.families.split(",") if f]
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {args.episodes}")
    specs = training_specs(families, args.episodes, args.seed)
    rows = []
    for kind, workers in setups(args.setups):
        started, first, digest = time.monotonic(), None, hashlib.sha256()
        for episode in generate(specs, executor=Executor(kind, workers)):
            first = first or time.monotonic()
            for array in (episode.state, episode.action, *episode.images.values()):
                digest.update(array.tobytes())
        ended = time.monotonic()
        rows.append(_row(kind, workers, len(specs), started, first, ended, digest.hexdigest()))
        if not args.json:
            print(f"[executor] {kind} x{workers}: {rows[-1]['seconds']} s", file=sys.stderr)
    return _report(args, families, specs, rows)


def _row(kind, workers, count, started, first, ended, digest) -> dict:
    seconds = ended - started
    after_first = ended - first
    return {
        "executor": kind, "workers": workers, "episodes": count, "seconds": round(seconds, 1),
        "episodes_per_s": round(count / seconds, 3),
        "steady_episodes_per_s": round((count - 1) / after_first, 3) if count > 1 else None,
        "digest": digest[:16],
    }  # fmt: skip


def _report(args, families, specs, rows) -> dict:
    by = {(r["executor"], r["workers"]): r for r in rows}
    one, two = by.get(("ray", 1)), by.get(("ray", 2))
    speedup = wall = None
    if one and two and one["steady_episodes_per_s"] and two["steady_episodes_per_s"]:
        speedup = round(two["steady_episodes_per_s"] / one["steady_episodes_per_s"], 2)
        wall = round(one["seconds"] / two["seconds"], 2)
    return {
        "benchmark": "executor", "families": families, "episodes": len(specs),
        "seed": args.seed, "cpu_count": os.cpu_count(), "rows": rows,
        "same_episodes": len({r["digest"] for r in rows}) == 1,
        "ray_speedup_2_over_1": speedup, "ray_wall_ratio_2_over_1": wall, "target": TARGET,
        "passed": speedup is not None and speedup >= TARGET,
        "load_average": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def format_text(report: dict) -> str:
    lines = [f"lang2policy bench executor: {report['episodes']} demonstrations "
             f"({', '.join(report['families'])}), seed {report['seed']}, "
             f"{report['cpu_count']} cores"]  # fmt: skip
    for row in report["rows"]:
        steady = row["steady_episodes_per_s"]
        lines.append(
            f"  {row['executor']:<5} x{row['workers']}: {row['seconds']:6.1f} s, "
            f"{row['episodes_per_s']:.2f} episodes/s"
            + (f" ({steady:.2f} after the first)" if steady is not None else "")
            + f"; episodes {row['digest']}"
        )
    lines.append(f"  same episodes in every setup: {'yes' if report['same_episodes'] else 'NO'}")
    if report["ray_speedup_2_over_1"] is not None:
        verdict = "PASS" if report["passed"] else "FAIL"
        lines.append(f"  Ray, 2 workers over 1: {report['ray_speedup_2_over_1']}x the throughput "
                     f"(target >= {report['target']}x) {verdict}; wall time, start-up "
                     f"included: {report['ray_wall_ratio_2_over_1']}x")  # fmt: skip
    return "\n".join(lines)


def exit_code(report: dict) -> int:
    return 0 if report["same_episodes"] else 1
