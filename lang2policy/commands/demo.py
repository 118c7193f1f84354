"""The simulation demos, recorded to an MP4.

``run_language_demo``: a person's instructions, planned by an LLM (the local Gemma model by
default) into Code-as-Policies programs that run in the sandbox, one session with history.
``run_demo``: the scripted version (primitives called directly), blocks into matching bowls.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.graph.parameters import default
from lang2policy.session.sim import SimSession

# Two blocks with matching bowls, and a distractor block that must stay where it is.
DEMO_OBJECTS = ["red block", "green block", "yellow block", "red bowl", "green bowl"]


def run_demo(
    robot: str,
    out: Path,
    seed: int,
    camera: str = "front",
    fps: int = 20,
    size: tuple[int, int] = (480, 360),
    say=print,
) -> dict:
    session = SimSession(robot)
    names = session.reset(seed, DEMO_OBJECTS)
    tasks = [
        (n, n.replace("block", "bowl"))
        for n in names
        if n.replace("block", "bowl") in names and n.endswith("block")
    ]
    say(f"[demo] {robot} on the tabletop, seed {seed}: {', '.join(names)}")
    recorder = session.record(camera, size, fps)
    started = time.perf_counter()
    outcomes = []
    for block, bowl in tasks:
        say(f"[demo] put the {block} in the {bowl} ...")
        try:
            session.primitives.put_first_on_second(block, bowl)
            ok = session.world.is_in(block, bowl)
        except Lang2PolicyError as exc:
            say(f"[demo]   failed: {exc}")
            ok = False
        outcomes.append({"block": block, "bowl": bowl, "success": ok})
        say(f"[demo]   {'done' if ok else 'not in the bowl'} (sim time {session.world.time:.1f} s)")
    session.primitives.go_home()
    path = recorder.save(out)
    recorder.renderer.close()
    say(
        f"[demo] wrote {path} ({len(recorder.frames)} frames, {camera} camera) "
        f"in {time.perf_counter() - started:.0f} s"
    )
    say(f"[demo] final relations: {session.world.relations()}")
    return {"video": str(path), "outcomes": outcomes, "relations": session.world.relations()}


# Instructions the local model handles; the second refers back to the first (history).
LANGUAGE_DEMO_OBJECTS = ["red block", "purple block", "blue bowl", "orange bowl"]
LANGUAGE_DEMO_INSTRUCTIONS = [
    "put the red block in the blue bowl",
    "now put it back",
    "put the purple block on the orange bowl",
]


def run_language_demo(
    robot: str, out: Path, seed: int, llm: str = "local", camera: str = "front", say=print
) -> dict:
    """Plan and run each demo instruction in one session; returns outcomes and the video."""
    from lang2policy.commands.run import RunRequest, sim_conductor
    from lang2policy.sandbox.outcome import printable
    from lang2policy.session.readout import scene_readout
    from lang2policy.text_quote import one_line

    request = RunRequest("", robot, tuple(LANGUAGE_DEMO_OBJECTS), llm, seed, camera=camera)
    sim = sim_conductor(request, "code", say, prefix="[demo]   ")
    session = sim.session
    say(f"[demo] {robot}, seed {seed}, llm {llm}: {one_line(', '.join(sim.objects))}")
    recorder = session.record(camera)
    outcomes = []
    for instruction in LANGUAGE_DEMO_INSTRUCTIONS:
        say(f'[demo] > "{instruction}"')
        planned = sim.conductor.handle(instruction)
        if planned.code is None:  # the conductor caught an error outside the plan loop
            raise Lang2PolicyError(f"{instruction!r} failed: {planned.detail}")
        result = planned.code
        if result.program is not None:
            for line in printable(result.program.code).splitlines():
                say(f"[demo]   | {line}")
        verdict = planned.detail["verdict"]
        why = "" if planned.ok else f": {one_line(str(planned.detail['message']))}"
        say(f"[demo]   {verdict.replace('_', ' ')}{why}")
        outcomes.append({"instruction": instruction, "outcome": result.outcome.kind,
                         "verdict": verdict})
    session.world.step_seconds(0.5)
    path = recorder.save(out)
    recorder.renderer.close()
    relations = scene_readout(session)["relations"]
    shown = one_line(", ".join(relations)) if relations else "none"
    say(f"[demo] wrote {path} ({len(recorder.frames)} frames); final relations: {shown}")
    return {"video": str(path), "outcomes": outcomes, "relations": relations}


def add_parser(commands) -> None:
    demo = commands.add_parser(
        "demo", help="language-driven demo in simulation (local LLM), recorded to an MP4"
    )
    cli_types.add_robot(demo)
    cli_types.add_seed(demo)
    demo.add_argument("--out", type=Path, default=Path("out/demo.mp4"))
    demo.add_argument("--camera", default="front", help="front, top or wrist")
    demo.add_argument("--llm", default=default("planner_node", "llm"), help=cli_types.LLM_HELP)
    demo.add_argument(
        "--scripted", action="store_true", help="no LLM: call the motion primitives directly"
    )


def run(args: argparse.Namespace) -> int:
    if args.scripted:
        report = run_demo(args.robot, args.out, args.seed, args.camera)
        return 0 if all(o["success"] for o in report["outcomes"]) else 1
    report = run_language_demo(args.robot, args.out, args.seed, args.llm, args.camera)
    return 0 if all(o["outcome"] == "ok" for o in report["outcomes"]) else 1
