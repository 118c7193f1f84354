"""``lang2policy run "INSTRUCTION" [FOLLOW-UP ...]``: plan instructions with an LLM and execute
them in simulation, through the same conductor as the planner node.

Builds a seeded tabletop scene (or the objects given) and the LLM client (local Gemma by
default, any OpenAI-compatible endpoint, or a replay file), and hands the instructions to a
``Conductor`` (``lang2policy.conductor``) over the simulated arm: "code" (Code as Policies:
plans, runs in the sandbox with one repair attempt, reports the program and outcome) or
"reward" (Language to Rewards: plans a reward spec that an in-process MPC optimises on the
world; follow-ups edit the running spec). ``route`` "auto" chooses from the first instruction
(``choose_planner``) for the whole run. On the reward route without given objects, objects the
instructions name join the seeded layout. The report ends with the final scene read from the
simulator. ``--video`` records the run.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.graph.parameters import default
from lang2policy.graph.topics import StatusEvent
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.route import check_instruction, choose_planner
from lang2policy.sandbox.outcome import printable
from lang2policy.session.readout import scene_readout
from lang2policy.session.sim import SimSession
from lang2policy.text_quote import one_line

if TYPE_CHECKING:  # the conductor (torch, the LLM client) is imported when a run starts
    from lang2policy.conductor import PlanResult

VIDEO_FPS = 10  # the reward route captures one frame per MPC step (0.1 s simulated)
SHOWN_STATES = ("running", "remembered", "correction", "stopped")  # progress lines for a person


@dataclass(frozen=True)
class RunRequest:
    instruction: str
    robot: str = "so101"
    objects: tuple[str, ...] | None = None
    llm: str = default("planner_node", "llm")
    seed: int = 0
    video: Path | None = None
    camera: str = "front"
    follow_ups: tuple[str, ...] = ()  # later instructions, planned with what runs as context
    route: str = default("planner_node", "route")  # "code", "reward" or "auto"
    grounding: str = default("planner_node", "grounding")  # code plans: "on" | "off"
    duration: float | None = None  # reward route: cap of each step, simulated seconds
    vla: bool = False  # code plans may call vla_skill(...): the shipped VLA on this arm

    @property
    def instructions(self) -> list[str]:
        return [self.instruction, *self.follow_ups]


class PrintedOutlet:
    """The conductor's outlet on a terminal: progress lines through ``say``; the reward spec
    is run in-process, so there is nothing to send and no safety node to call."""

    def __init__(self, say: Callable[[str], None], prefix: str = "[run] ") -> None:
        self.say, self.prefix = say, prefix

    def status(self, event: StatusEvent) -> None:
        if event.state in SHOWN_STATES and event.detail:
            detail = event.detail if isinstance(event.detail, str) else str(event.detail)
            self.say(self.prefix + one_line(detail))

    def send_spec(self, spec) -> None:
        """Specs run in-process (``InProcessMPC``)."""

    def request_stop(self) -> bool:
        return False


@dataclass
class SimRun:
    """A conductor over a simulated arm, with what a report needs."""

    session: SimSession
    objects: list[str]
    conductor: object
    recorder: object = None


def sim_conductor(request: RunRequest, route: str, say: Callable[[str], None],
                  prefix: str = "[run] ") -> SimRun:
    """A seeded scene, its code and reward executors and a conductor on ``route``; with
    ``request.video`` a recorder (20 fps on the code route, one frame per MPC step on the
    reward route)."""
    from lang2policy.conductor import (
        ConductorSettings,
        InProcessMPC,
        SimCodeExecutor,
        build_conductor,
    )

    session = SimSession(request.robot)
    code = SimCodeExecutor(session, vla=request.vla)
    objects = code.reset(request.seed, list(request.objects) if request.objects else None)
    if route == "reward" and not request.objects:
        objects = code.reset(request.seed, _named_objects(session, objects, request))
    recorder, capture = None, None
    if request.video is not None and route == "reward":
        recorder = _recorder(session, request.camera)
        capture = lambda mpc: recorder.maybe_capture(mpc.world.data)  # noqa: E731
    elif request.video is not None:
        recorder = session.record(request.camera)
    reward = InProcessMPC(session, seed=request.seed, duration=request.duration, on_step=capture)
    grounding = GroundingSettings.named(request.grounding)
    settings = ConductorSettings(llm=request.llm, route=route, grounding=grounding)
    conductor = build_conductor(settings, PrintedOutlet(say, prefix), code, reward)
    return SimRun(session, objects, conductor, recorder)


def run_instructions(request: RunRequest, say: Callable[[str], None] = print) -> dict:
    """Plan and execute the instructions; returns a JSON-able report."""
    instructions = [check_instruction(text) for text in request.instructions]
    if request.duration is not None and not request.duration > 0:
        raise Lang2PolicyError(
            f"the duration must be a positive number of seconds, got {request.duration}"
        )
    route = choose_planner(instructions[0], request.route)
    sim = sim_conductor(request, route, say)
    what = ", reward route" if route == "reward" else ""
    say(
        f"[run] {request.robot}, seed {request.seed}, llm {request.llm}{what}: "
        f"{one_line(', '.join(sim.objects))}"
    )
    try:
        results = _handle_all(sim, instructions, route)
    finally:
        sim.conductor.close()
    report = {
        "instruction": instructions[0],
        "route": route,
        "robot": request.robot,
        "seed": request.seed,
        "llm": request.llm,
        "objects": sim.objects,
        **(_reward_report(results, instructions) if route == "reward" else _code_report(results)),
        "scene": scene_readout(sim.session),
    }
    if sim.recorder is not None:
        report["video"] = str(sim.recorder.save(request.video))
        sim.recorder.renderer.close()
    return report


def _handle_all(sim: SimRun, instructions: list[str], route: str) -> list[PlanResult]:
    """Each instruction in turn; on the reward route a planning failure ends the run."""
    from lang2policy.session.readout import scene_state

    results = []
    for instruction in instructions:
        if route == "reward":
            sim.conductor.update_objects(*scene_state(sim.session.world))
        results.append(sim.conductor.handle(instruction))
        if route == "reward" and results[-1].reward_plan is None:
            break
    if route == "code":
        sim.session.world.step_seconds(0.5)  # let objects settle before reading the scene
    return results


def _code_report(results: list[PlanResult]) -> dict:
    steps = [r.code.as_dict() for r in results]
    return {"result": steps[0], **({"steps": steps} if len(steps) > 1 else {})}


def _reward_report(results: list[PlanResult], instructions: list[str]) -> dict:
    steps = [_reward_step(r) for r in results]
    ok = len(steps) == len(instructions) and all(step["ok"] for step in steps)
    return {"instructions": instructions, "ok": ok, "steps": steps}


def _reward_step(result: PlanResult) -> dict:
    if result.reward_plan is None:
        return {"instruction": result.instruction, "ok": False, "plan": None, "outcome": None,
                "error": str(result.detail)}
    plan = result.reward_plan.as_dict()
    plan["notes"] = list(result.detail["notes"])  # with the remembered corrections' notes
    plan["spec"] = result.detail["spec"]  # as run: remembered edits applied
    detail = result.reward_run.detail  # the controller's verdict: the outcome contract's
    return {"instruction": result.instruction, "ok": result.ok, "plan": plan,
            "outcome": detail["outcome"], "verdict": detail.get("verdict", "failed"),
            "goal": detail.get("goal", ""), "reason": detail.get("message", ""), "error": ""}


def _named_objects(session: SimSession, objects: list[str], request: RunRequest) -> list[str]:
    """The seeded layout, with the pool objects the instructions name put on the table in
    place of others ("lift the red block" always finds one); unchanged when all are there."""
    text = " ".join(request.instructions).lower()
    named = [n for n in session.world.objects if re.search(rf"\b{re.escape(n)}\b", text)]
    if all(n in objects for n in named):
        return objects
    others = [o for o in objects if o not in named]
    return [*named, *others][: max(len(objects), len(named))]


def _recorder(session: SimSession, camera: str):
    from lang2policy.scene.render import CameraRenderer, VideoRecorder

    recorder = VideoRecorder(CameraRenderer(session.world.model, 480, 360), camera, VIDEO_FPS)
    recorder.maybe_capture(session.world.data)
    return recorder


def format_text(report: dict) -> str:
    """The report for a person. Said text, error messages, notes and object names come from
    the LLM, its program or the scene: each single field goes through ``one_line`` and each
    line of multi-line code or description is printed behind an indent, so nothing they hold
    can start a line that reads like the host's own (a forged ``outcome: ok``)."""
    if report.get("route") == "reward":
        lines = _reward_lines(report)
    else:
        lines = _code_lines(report)
    lines.append("scene:")
    for name, position in report["scene"]["positions"].items():
        lines.append(f"  {one_line(name):<16} at {position}")
    relations = report["scene"]["relations"]
    lines.append("  relations: " + (one_line(", ".join(relations)) if relations else "none"))
    if "video" in report:
        lines.append(f"video: {one_line(report['video'])}")
    return "\n".join(lines)


def _indented(text: str, indent: str) -> list[str]:
    """Multi-line untrusted text as lines behind ``indent``: control characters and the
    Unicode line separators escaped (``printable``), so only ``\\n`` breaks a line."""
    return [indent + line for line in printable(text).split("\n")]


def _code_lines(report: dict) -> list[str]:
    lines = []
    for result in report.get("steps") or [report["result"]]:
        outcome = result["outcome"]
        program = (result.get("program") or {}).get("code") or "(no program)"
        lines += [
            f"instruction: {one_line(result['instruction'])}",
            "program:",
            *_indented(program, "    "),
            f"attempts: {result['attempts']}",
            f"outcome: {one_line(str(outcome['kind']))}"
            + ("" if outcome["ok"] else f" - {one_line(str(outcome['message']))}"),
        ]
        if outcome.get("said"):
            lines.append("said: " + one_line(" | ".join(outcome["said"])))
        lines.append(_verdict_line(result))
    return lines


def _verdict_line(result: dict) -> str:
    """The honest outcome: judged by the plan's goal in the simulator, not by the program
    having finished."""
    verdict = str(result.get("verdict", "failed")).replace("_", " ")
    goal = f" ({one_line(str(result['goal']))})" if result.get("goal") else ""
    why = "" if result.get("ok") else f" - {one_line(str(result.get('reason', '')))}"
    return f"verdict: {one_line(verdict)}{goal}{why}"


def _reward_lines(report: dict) -> list[str]:
    lines = []
    for step in report["steps"]:
        lines.append(f"instruction: {one_line(step['instruction'])}")
        plan, outcome = step["plan"], step["outcome"]
        if plan is None:
            lines.append(f"  not planned: {one_line(str(step['error']))}")
            continue
        lines.append(
            f"  {'new task' if plan['new_task'] else 'edits the running spec'} "
            f"(planned in {plan['plan_ms'] / 1000:.1f} s)"
        )
        lines += ["  description:", *_indented(plan["description"], "    ")]
        lines += ["  code:", *_indented(plan["code"], "    ")]
        lines += [f"  note: {one_line(str(note))}" for note in plan["notes"]]
        goals = {c["term"] for c in plan["spec"].get("success", {}).get("all", [])}
        final = ", ".join(
            f"{one_line(str(k))} {v:g}" for k, v in outcome["final"].items() if k in goals
        )
        lines.append(
            f"  outcome: {one_line(str(outcome['status']))} after "
            f"{outcome['sim_seconds']:.1f} s simulated ({outcome['iterations']} MPC "
            f"iterations, {outcome['mpc_plan_ms']:.0f} ms each)" + (f"; {final}" if final else "")
        )
        lines.append("  " + _verdict_line(step))
    return lines


def main_exit_code(report: dict) -> int:
    """0 when everything succeeded, 1 when a plan or its execution did not."""
    if report.get("route") == "reward":
        return 0 if report["ok"] else 1
    results = report.get("steps") or [report["result"]]
    return 0 if all(r["ok"] for r in results) else 1


def add_parser(commands) -> None:
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
        default=RunRequest.route,
        choices=["code", "reward", "auto"],
        help="code: Code as Policies; reward: Language to Rewards with the MPC; auto: chosen "
        "from the first instruction (lang2policy.planning.route; default, as in the graph)",
    )
    runp.add_argument(
        "--grounding",
        default=RunRequest.grounding,
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
    runp.add_argument("--objects", type=cli_types.text, help=cli_types.OBJECTS_HELP)
    runp.add_argument("--llm", default=RunRequest.llm, help=cli_types.LLM_HELP)
    cli_types.add_seed(runp)
    runp.add_argument("--video", type=Path, help="record the run to this MP4")
    runp.add_argument(
        "--vla",
        action="store_true",
        help="policy code may call vla_skill(...): the shipped VLA policy on the simulated arm",
    )
    runp.add_argument("--json", action="store_true", help="print JSON only")


def run(args: argparse.Namespace) -> int:
    request = RunRequest(
        instruction=args.instructions[0],
        robot=args.robot,
        objects=cli_types.objects(args.objects),
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
    report = run_instructions(request, say=say)
    cli_types.print_report(report, args.json, format_text)
    return main_exit_code(report)
