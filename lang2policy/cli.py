"""The ``lang2policy`` command: demo and benchmarks (more commands arrive with later layers)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lang2policy.errors import Lang2PolicyError


def _add_robot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", default="so101", help="robot description (so101, panda)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lang2policy", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="scripted pick-and-place in simulation, to an MP4")
    _add_robot(demo)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", type=Path, default=Path("out/demo.mp4"))
    demo.add_argument("--camera", default="front", help="front, top or wrist")

    bench = commands.add_parser("bench", help="benchmarks").add_subparsers(
        dest="bench", required=True
    )
    pickplace = bench.add_parser("pickplace", help="pick-and-place success rate")
    _add_robot(pickplace)
    pickplace.add_argument("--episodes", type=int, default=50)
    pickplace.add_argument("--seed", type=int, default=0, help="first episode seed")
    pickplace.add_argument("--json", action="store_true", help="print JSON only")
    sim = bench.add_parser("sim", help="physics steps/s, real-time factor, render fps")
    _add_robot(sim)
    sim.add_argument("--seconds", type=float, default=10.0, help="simulated seconds to time")
    sim.add_argument("--json", action="store_true", help="print JSON only")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except Lang2PolicyError as exc:
        print(f"lang2policy: error: {exc}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from lang2policy.demo import run_demo

        report = run_demo(args.robot, args.out, args.seed, args.camera)
        return 0 if all(o["success"] for o in report["outcomes"]) else 1
    if args.bench == "pickplace":
        from lang2policy.bench import pickplace

        if args.episodes < 1:
            raise _usage("--episodes must be at least 1")
        report = pickplace.run(args.robot, args.episodes, args.seed, progress=not args.json)
        _print(report, args.json, pickplace.format_text)
        return 0
    from lang2policy.bench import sim_speed

    if args.seconds <= 0:
        raise _usage("--seconds must be positive")
    _print(sim_speed.run(args.robot, args.seconds), args.json, sim_speed.format_text)
    return 0


def _usage(message: str) -> Lang2PolicyError:
    return Lang2PolicyError(message)


def _print(report: dict, as_json: bool, formatter) -> None:
    print(json.dumps(report, indent=2) if as_json else formatter(report))


if __name__ == "__main__":
    sys.exit(main())
