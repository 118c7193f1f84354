"""The ``lang2policy`` command: demo, running policy code in the sandbox, benchmarks.

``lang2policy bench <name>`` is built from the benchmark table (``lang2policy.bench.registry``).
``lang2policy sim`` and ``lang2policy calibrate ...`` hand the rest of the command line to the
owning module's own parser (``graph.launcher``, ``robots.so101.guided``,
``perception.calibrate_camera``, ``perception.board_images``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

from lang2policy import cli_types
from lang2policy.bench.registry import BENCHES
from lang2policy.errors import Lang2PolicyError

# Commands whose module (lang2policy.commands.<name>) adds its parser and runs it.
MODULE_COMMANDS = ("record", "dataset", "train", "teleop", "refine_reward", "vla_serve")
_OBJECTS_HELP = 'comma-separated objects, e.g. "red block,blue bowl"'


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lang2policy", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    _add_demo(commands)
    _add_run(commands)
    _add_exec_policy(commands)
    _add_bench(commands)
    _add_forwarded(commands)
    for name in MODULE_COMMANDS:
        importlib.import_module(f"lang2policy.commands.{name}").add_parser(commands)
    return parser


def _add_demo(commands) -> None:
    demo = commands.add_parser(
        "demo", help="language-driven demo in simulation (local LLM), recorded to an MP4"
    )
    cli_types.add_robot(demo)
    cli_types.add_seed(demo)
    demo.add_argument("--out", type=Path, default=Path("out/demo.mp4"))
    demo.add_argument("--camera", default="front", help="front, top or wrist")
    demo.add_argument("--llm", default="local", help=cli_types.LLM_HELP)
    demo.add_argument(
        "--scripted", action="store_true", help="no LLM: call the motion primitives directly"
    )


def _add_run(commands) -> None:
    runp = commands.add_parser(
        "run", help="plan an instruction (and follow-ups) with an LLM and run it in sim"
    )
    runp.add_argument(
        "instructions",
        nargs="+",
        metavar="INSTRUCTION",
        type=cli_types.text,
        help='e.g. "put the red block in the blue bowl"; more instructions are follow-ups '
        "handled in turn in the same session: with --route reward each is planned with the "
        'running spec as context and swapped into the running MPC ("lift the red block 10 cm" '
        '"higher")',
    )
    cli_types.add_robot(runp)
    runp.add_argument(
        "--route",
        default="code",
        choices=["code", "reward", "auto"],
        help="code: Code as Policies (default); reward: Language to Rewards with the MPC; "
        "auto: chosen from the first instruction (lang2policy.planning.route)",
    )
    runp.add_argument(
        "--grounding",
        default="on",
        choices=["on", "off"],
        help="code plans: on (grammar from the scene and skills, scored candidates, retrieved "
        "examples, a dry run before moving; default) | off (free decoding). The goal is "
        "checked either way",
    )
    runp.add_argument(
        "--duration",
        type=float,
        help="reward route: at most this many simulated seconds per instruction",
    )
    runp.add_argument("--objects", type=cli_types.text, help=_OBJECTS_HELP)
    runp.add_argument("--llm", default="local", help=cli_types.LLM_HELP)
    cli_types.add_seed(runp)
    runp.add_argument("--video", type=Path, help="record the run to this MP4")
    runp.add_argument(
        "--vla",
        action="store_true",
        help="policy code may call vla_skill(...): the shipped VLA policy on the simulated arm",
    )
    runp.add_argument("--json", action="store_true", help="print JSON only")


def _add_exec_policy(commands) -> None:
    execp = commands.add_parser(
        "exec-policy", help="run a policy program in the sandbox against the simulation"
    )
    execp.add_argument("file", type=Path, help="Python policy program (Code-as-Policies style)")
    cli_types.add_robot(execp)
    execp.add_argument("--policy", type=Path, help="privilege policy YAML (default: built-in)")
    execp.add_argument("--narrow", type=Path, help="plan policy YAML that narrows --policy")
    cli_types.add_seed(execp)
    execp.add_argument("--objects", type=cli_types.text, help=_OBJECTS_HELP)
    execp.add_argument("--json", action="store_true", help="print JSON only")
    execp.add_argument("--no-ast-check", action="store_true", help="skip the static pre-check")
    execp.add_argument("--ask", action="store_true", help="ask on the terminal for 'ask' rules")


def _add_bench(commands) -> None:
    """``lang2policy bench <name>``, one per entry of ``BENCHES``, each with ``--json``."""
    benches = commands.add_parser("bench", help="benchmarks").add_subparsers(
        dest="bench", required=True
    )
    for bench in BENCHES.values():
        parser = benches.add_parser(bench.name, help=bench.help)
        bench.configure(parser)
        # bench/ imports no ROS: the parity bench's probe node is handed in from here
        if bench.name == "parity":
            parser.set_defaults(open_probe=_open_parity_probe)


def _open_parity_probe(domain_id: int):
    from lang2policy.ros.parity_probe import ParityProbe

    return ParityProbe(domain_id)


def _add_forwarded(commands) -> None:
    """Commands whose own parser reads the rest of the command line."""
    sim = commands.add_parser(
        "sim",
        add_help=False,
        help="start the whole ROS graph in simulation with a terminal (see `lang2policy sim "
        "--help`)",
    )
    sim.set_defaults(forward=_sim, words=1)
    calibrate = commands.add_parser(
        "calibrate",
        help="calibration: `calibrate so101 --port PORT` (the arm's servos), `calibrate camera "
        "--device D` (camera pose from ArUco markers), `calibrate colors --objects ...` (the "
        "palette), `calibrate board-images --out DIR`",
    ).add_subparsers(dest="what", required=True)
    for name, forward, help_text in (
        ("so101", _calibrate_so101, "guided calibration of a physical SO-101's servos"),
        ("camera", _calibrate_camera, "a real camera's pose from ArUco markers on the table"),
        ("colors", _calibrate_colors, "the colour palette fitted to your camera and objects"),
        ("board-images", _board_images, "printable marker images for the camera calibration"),
    ):
        parser = calibrate.add_parser(name, add_help=False, help=help_text)
        parser.set_defaults(forward=forward, words=2)


def _sim(argv: list[str]) -> int:
    from lang2policy.graph import launcher

    return launcher.main(argv)


def _calibrate_so101(argv: list[str]) -> int:
    from lang2policy.robots.so101 import guided

    return guided.main(argv)


def _calibrate_camera(argv: list[str]) -> int:
    from lang2policy.perception import calibrate_camera

    return calibrate_camera.main(argv)


def _calibrate_colors(argv: list[str]) -> int:
    from lang2policy.perception import calibrate_colors

    return calibrate_colors.main(argv)


def _board_images(argv: list[str]) -> int:
    from lang2policy.perception import board_images

    return board_images.main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    forward = getattr(args, "forward", None)
    if forward is not None:  # its own parser reads everything after the command's words
        return forward(argv[args.words :])
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return _dispatch(args)
    except Lang2PolicyError as exc:
        print(f"lang2policy: error: {exc}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        return _demo(args)
    if args.command == "exec-policy":
        return _exec_policy(args)
    if args.command == "run":
        return _run(args)
    module = args.command.replace("-", "_")  # "refine-reward" is commands/refine_reward.py
    if module in MODULE_COMMANDS:
        return importlib.import_module(f"lang2policy.commands.{module}").run(args)
    return _bench(args)


def _bench(args: argparse.Namespace) -> int:
    bench = BENCHES[args.bench]
    try:
        report = bench.run(args)
    except KeyboardInterrupt:
        print(f"lang2policy bench {bench.name}: interrupted", file=sys.stderr)
        return 130
    _print(report, args.json, bench.format_text)
    return bench.exit_code(report)


def _demo(args: argparse.Namespace) -> int:
    from lang2policy.commands.demo import run_demo, run_language_demo

    if args.scripted:
        report = run_demo(args.robot, args.out, args.seed, args.camera)
        return 0 if all(o["success"] for o in report["outcomes"]) else 1
    report = run_language_demo(args.robot, args.out, args.seed, args.llm, args.camera)
    return 0 if all(o["outcome"] == "ok" for o in report["outcomes"]) else 1


def _objects(text: str | None) -> tuple[str, ...] | None:
    """``--objects`` as a tuple of names (None: the command's default scene)."""
    if text is None:
        return None
    objects = tuple(cli_types.names(text) or ())
    if not objects:
        raise Lang2PolicyError("--objects needs at least one object name")
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
        route=args.route,
        grounding=args.grounding,
        duration=args.duration,
        vla=args.vla,
    )
    say = (lambda line: None) if args.json else print
    report = run_instruction.run(request, say=say)
    _print(report, args.json, run_instruction.format_text)
    return run_instruction.main_exit_code(report)


def _exec_policy(args: argparse.Namespace) -> int:
    from lang2policy.commands.exec_policy import ExecRequest, run_program

    request = ExecRequest(
        program=args.file,
        robot=args.robot,
        policy=args.policy,
        plan_policy=args.narrow,
        seed=args.seed,
        objects=_objects(args.objects),
        ast_check=not args.no_ast_check,
        ask=args.ask,
    )
    result = run_program(request)
    _print(result.as_dict(), args.json, lambda report: result.format_text())
    return 0 if result.outcome.ok else 1


def _print(report: dict, as_json: bool, formatter: Callable[[dict], str]) -> None:
    print(json.dumps(report, indent=2) if as_json else formatter(report))


if __name__ == "__main__":
    sys.exit(main())
