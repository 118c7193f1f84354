"""The ``lang2policy`` command: demo, running policy code in the sandbox, benchmarks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError

_SEED_RANGE = f" (0 to {cli_types.MAX_SEED})"
_LLM_HELP = (
    "local (Gemma 3 270M on a local llama.cpp server, the default), openai (OPENAI_API_KEY, "
    "OPENAI_BASE_URL, OPENAI_MODEL), replay:FILE, record:FILE or cache:FILE"
)


def _add_robot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", default="so101", help="robot description (so101, panda)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lang2policy", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="language-driven demo in simulation (local LLM), recorded to an MP4"
    )
    _add_robot(demo)
    demo.add_argument("--seed", type=cli_types.seed, default=0, help="scene seed" + _SEED_RANGE)
    demo.add_argument("--out", type=Path, default=Path("out/demo.mp4"))
    demo.add_argument("--camera", default="front", help="front, top or wrist")
    demo.add_argument("--llm", default="local", help=_LLM_HELP)
    demo.add_argument(
        "--scripted", action="store_true", help="no LLM: call the motion primitives directly"
    )

    runp = commands.add_parser(
        "run", help="plan an instruction (and follow-ups) with an LLM and run it in sim"
    )
    runp.add_argument(
        "instructions",
        nargs="+",
        metavar="INSTRUCTION",
        type=cli_types.text,
        help='e.g. "put the red block in the blue bowl"; more instructions are follow-ups '
        "handled in turn in the same session: with --planner reward each is planned with the "
        'running spec as context and swapped into the running MPC ("lift the red block 10 cm" '
        '"higher")',
    )
    _add_robot(runp)
    runp.add_argument(
        "--planner",
        default="code",
        choices=["code", "reward", "auto"],
        help="code: Code as Policies (default); reward: Language to Rewards with the MPC; "
        "auto: chosen from the first instruction (lang2policy.planning.route)",
    )
    runp.add_argument(
        "--duration",
        type=float,
        help="reward planner: at most this many simulated seconds per instruction",
    )
    runp.add_argument(
        "--objects", type=cli_types.text, help='comma-separated objects, e.g. "red block,blue bowl"'
    )
    runp.add_argument("--llm", default="local", help=_LLM_HELP)
    runp.add_argument("--seed", type=cli_types.seed, default=0, help="scene seed" + _SEED_RANGE)
    runp.add_argument("--video", type=Path, help="record the run to this MP4")
    runp.add_argument("--json", action="store_true", help="print JSON only")

    execp = commands.add_parser(
        "exec-policy", help="run a policy program in the sandbox against the simulation"
    )
    execp.add_argument("file", type=Path, help="Python policy program (Code-as-Policies style)")
    _add_robot(execp)
    execp.add_argument("--policy", type=Path, help="privilege policy YAML (default: built-in)")
    execp.add_argument("--narrow", type=Path, help="plan policy YAML that narrows --policy")
    execp.add_argument("--seed", type=cli_types.seed, default=0, help="scene seed" + _SEED_RANGE)
    execp.add_argument(
        "--objects", type=cli_types.text, help='comma-separated objects, e.g. "red block,blue bowl"'
    )
    execp.add_argument("--json", action="store_true", help="print JSON only")
    execp.add_argument("--no-ast-check", action="store_true", help="skip the static pre-check")
    execp.add_argument("--ask", action="store_true", help="ask on the terminal for 'ask' rules")

    bench = commands.add_parser("bench", help="benchmarks").add_subparsers(
        dest="bench", required=True
    )
    pickplace = bench.add_parser("pickplace", help="pick-and-place success rate")
    _add_robot(pickplace)
    pickplace.add_argument("--episodes", type=int, default=50)
    pickplace.add_argument(
        "--seed", type=cli_types.seed, default=0, help="first episode seed" + _SEED_RANGE
    )
    pickplace.add_argument("--json", action="store_true", help="print JSON only")
    sim = bench.add_parser("sim", help="physics steps/s, real-time factor, render fps")
    _add_robot(sim)
    sim.add_argument("--seconds", type=float, default=10.0, help="simulated seconds to time")
    sim.add_argument("--json", action="store_true", help="print JSON only")
    cap = bench.add_parser("cap", help="Code-as-Policies tabletop tasks: oracle and LLM tracks")
    _add_robot(cap)
    cap.add_argument("--llm", help=_LLM_HELP + "; omit for the oracle track only")
    cap.add_argument("--episodes", type=int, default=10, help="episodes per task family")
    cap.add_argument(
        "--seed", type=cli_types.seed, default=0, help="first episode seed" + _SEED_RANGE
    )
    cap.add_argument("--families", help="comma-separated task families (default: all)")
    cap.add_argument("--no-oracle", action="store_true", help="skip the reference programs")
    cap.add_argument("--json", action="store_true", help="print JSON only")
    intents = bench.add_parser("intents", help="sandbox intent round trip vs in-process calls")
    _add_robot(intents)
    intents.add_argument("--calls", type=int, default=2000, help="skill calls per measurement")
    intents.add_argument("--json", action="store_true", help="print JSON only")
    _add_bench_l2r(bench)
    bench.add_parser(
        "corrections",
        help="scripted corrections (offset, target swap, speed): success with and without, "
        "latency, memory (see `lang2policy bench corrections --help`)",
    )
    bench.add_parser(
        "parity",
        help="the same scenario on the sim node and on the SO-101 driver + emulated arm: "
        "topics, types, rates, joint names, tracking difference [--json]",
    )
    commands.add_parser(
        "calibrate",
        help="calibration: `calibrate so101 --port PORT` (the arm's servos), `calibrate camera "
        "--device D` (camera pose from ArUco markers), `calibrate board-images --out DIR`",
    )
    commands.add_parser(
        "sim",
        help="start the whole ROS graph in simulation with a terminal (see `lang2policy sim "
        "--help`)",
    )
    return parser


def _add_bench_l2r(bench) -> None:
    """``bench l2r`` (task success for reference and LLM reward specs) and ``bench mpc``."""
    l2r = bench.add_parser("l2r", help="Language-to-Rewards tasks: reference and LLM specs")
    l2r.add_argument("--llm", help=_LLM_HELP + "; omit for the reference track only")
    l2r.add_argument("--episodes", type=int, default=5, help="seeded episodes per task")
    l2r.add_argument(
        "--seed", type=cli_types.seed, default=0, help="first episode seed" + _SEED_RANGE
    )
    l2r.add_argument("--tasks", help="comma-separated tasks (default: all 8)")
    l2r.add_argument("--planner", default="sampling", choices=["sampling", "cem"])
    l2r.add_argument("--samples", type=int, default=128, help="MPC samples per iteration")
    l2r.add_argument("--json", action="store_true", help="print JSON only")
    mpc = bench.add_parser("mpc", help="MPC rollout/planning speed vs a Python mj_step loop")
    mpc.add_argument("--samples", type=int, default=32, help="rollouts per iteration")
    mpc.add_argument("--horizon", type=float, default=0.5, help="planning horizon (s)")
    mpc.add_argument("--threads", type=int, default=2, help="rollout threads")
    mpc.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    mpc.add_argument("--json", action="store_true", help="print JSON only")


# Commands with parsers of their own: ``lang2policy <words> ...`` hands the rest to ``main``.
_DELEGATED = {
    ("sim",): "lang2policy.graph.launcher",
    ("bench", "corrections"): "lang2policy.bench.corrections",
    ("calibrate", "so101"): "lang2policy.robots.so101.guided",
    ("calibrate", "camera"): "lang2policy.perception.calibrate_camera",
    ("calibrate", "board-images"): "lang2policy.perception.board_images",
    ("bench", "parity"): "lang2policy.bench.parity",
}


def _delegated(argv: list[str]) -> int | None:
    """Run a delegated command's own ``main(rest)``; None if ``argv`` names none."""
    import importlib

    for words, module in _DELEGATED.items():
        if tuple(argv[: len(words)]) == words:
            return importlib.import_module(module).main(argv[len(words) :])
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    delegated = _delegated(argv)
    if delegated is not None:
        return delegated
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except Lang2PolicyError as exc:
        print(f"lang2policy: error: {exc}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from lang2policy.commands.demo import run_demo, run_language_demo

        if args.scripted:
            report = run_demo(args.robot, args.out, args.seed, args.camera)
            return 0 if all(o["success"] for o in report["outcomes"]) else 1
        report = run_language_demo(args.robot, args.out, args.seed, args.llm, args.camera)
        return 0 if all(o["outcome"] == "ok" for o in report["outcomes"]) else 1
    if args.command == "exec-policy":
        return _exec_policy(args)
    if args.command == "run":
        return _run(args)
    if args.bench in ("l2r", "mpc"):
        return _bench_l2r(args)
    if args.bench == "cap":
        from lang2policy.bench import cap

        families = None
        if args.families:
            families = [f.strip() for f in args.families.split(",") if f.strip()]
        report = cap.run(
            args.robot,
            args.llm,
            args.episodes,
            args.seed,
            oracle=not args.no_oracle,
            progress=not args.json,
            families=families,
        )
        _print(report, args.json, cap.format_text)
        return 0
    if args.bench == "intents":
        from lang2policy.bench import intents

        if args.calls < 10:
            raise _usage("--calls must be at least 10")
        _print(intents.run(args.robot, args.calls), args.json, intents.format_text)
        return 0
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


def _bench_l2r(args: argparse.Namespace) -> int:
    if args.bench == "mpc":
        from lang2policy.bench import mpc

        if args.seconds <= 0 or not 2 <= args.samples <= 1024:
            raise _usage("--seconds must be positive and --samples in [2, 1024]")
        report = mpc.run(
            samples=args.samples,
            horizon=args.horizon,
            seconds=args.seconds,
            threads=args.threads,
            progress=not args.json,
        )
        _print(report, args.json, mpc.format_text)
        return 0
    from lang2policy.bench import l2r

    if args.episodes < 1:
        raise _usage("--episodes must be at least 1")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    report = l2r.run(
        episodes=args.episodes,
        first_seed=args.seed,
        tasks=tasks,
        llm=args.llm,
        planner=args.planner,
        samples=args.samples,
        progress=not args.json,
    )
    _print(report, args.json, l2r.format_text)
    return 0


def _objects(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    objects = tuple(o.strip() for o in text.split(",") if o.strip())
    if not objects:
        raise _usage("--objects needs at least one object name")
    return objects


def _run(args: argparse.Namespace) -> int:
    from lang2policy.commands import run as run_instruction

    request = run_instruction.RunRequest(
        instruction=args.instructions[0],
        robot=args.robot,
        objects=_objects(args.objects),
        llm=args.llm,
        seed=args.seed,
        video=args.video,
        follow_ups=tuple(args.instructions[1:]),
        planner=args.planner,
        duration=args.duration,
    )
    say = (lambda line: None) if args.json else print
    report = run_instruction.run(request, say=say)
    _print(report, args.json, run_instruction.format_text)
    return run_instruction.main_exit_code(report)


def _exec_policy(args: argparse.Namespace) -> int:
    from lang2policy.commands.exec_policy import ExecRequest, run_program

    objects = _objects(args.objects)
    request = ExecRequest(
        program=args.file,
        robot=args.robot,
        policy=args.policy,
        plan_policy=args.narrow,
        seed=args.seed,
        objects=objects,
        ast_check=not args.no_ast_check,
        ask=args.ask,
    )
    result = run_program(request)
    print(json.dumps(result.as_dict(), indent=2) if args.json else result.format_text())
    return 0 if result.outcome.ok else 1


def _usage(message: str) -> Lang2PolicyError:
    return Lang2PolicyError(message)


def _print(report: dict, as_json: bool, formatter) -> None:
    print(json.dumps(report, indent=2) if as_json else formatter(report))


if __name__ == "__main__":
    sys.exit(main())
