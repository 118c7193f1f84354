"""``lang2policy run "INSTRUCTION" [FOLLOW-UP ...]``: plan instructions with an LLM and execute
them in simulation.

Builds a seeded tabletop scene (or the objects given) and the LLM client (local Gemma by
default, any OpenAI-compatible endpoint, or a replay file). ``planner`` picks the planner:
"code" (Code as Policies: plans, runs in the sandbox with one repair attempt, reports the
program and outcome), "reward" (Language to Rewards: plans a reward spec that the MPC
optimises on the world; follow-ups edit the running spec, ``lang2policy.l2r.run``) or "auto"
(``choose_planner`` on the first instruction; the follow-ups go to the same planner). On the
reward path without given objects, objects the instructions name join the seeded layout. The
report ends with the final scene read from the simulator. ``--video`` records the run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lang2policy.errors import Lang2PolicyError
from lang2policy.planning.route import MAX_INSTRUCTION, check_instruction, choose_planner
from lang2policy.sandbox.outcome import printable
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.session.readout import scene_readout
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS
from lang2policy.text_quote import one_line

__all__ = [
    "MAX_INSTRUCTION",
    "RunRequest",
    "build_planning",
    "build_session",
    "check_instruction",
    "run",
]
VIDEO_FPS = 10  # the reward path captures one frame per MPC step (0.1 s simulated)


@dataclass(frozen=True)
class RunRequest:
    instruction: str
    robot: str = "so101"
    objects: tuple[str, ...] | None = None
    llm: str = "local"
    seed: int = 0
    video: Path | None = None
    camera: str = "front"
    follow_ups: tuple[str, ...] = ()  # later instructions, planned with what runs as context
    planner: str = "code"  # "code", "reward" or "auto"
    duration: float | None = None  # reward path: cap of each step, simulated seconds

    @property
    def instructions(self) -> list[str]:
        return [self.instruction, *self.follow_ups]


def build_session(request: RunRequest):
    """(sim session, objects on the table, planning session) for one run."""
    session = SimSession(request.robot)
    objects = session.reset(request.seed, list(request.objects) if request.objects else None)
    return session, objects, build_planning(SimSkillBackend(session), request.llm)


def build_planning(backend: SimSkillBackend, llm: str):
    """Code-as-Policies planning over ``backend``: the LLM client, the default privilege
    policy of the backend's robot, the sandbox runner."""
    from lang2policy.llm import make_client
    from lang2policy.planning import CodeAsPoliciesPlanner, PlanLoop

    policy = default_policy(backend.description, known_skills=SKILLS)
    planner = CodeAsPoliciesPlanner(make_client(llm))
    return PlanLoop(planner, SandboxRunner(backend, policy), backend)


def run(request: RunRequest, say: Callable[[str], None] = print) -> dict:
    """Plan and execute the instructions; returns a JSON-able report."""
    instructions = [check_instruction(text) for text in request.instructions]
    if request.duration is not None and not request.duration > 0:
        raise Lang2PolicyError(
            f"the duration must be a positive number of seconds, got {request.duration}"
        )
    planner = choose_planner(instructions[0], request.planner)
    if planner == "reward":
        return _run_reward(request, instructions, say)
    return _run_code(request, instructions, say)


def _run_code(request: RunRequest, instructions: list[str], say: Callable[[str], None]) -> dict:
    session, objects, planning = build_session(request)
    say(
        f"[run] {request.robot}, seed {request.seed}, llm {request.llm}: "
        f"{one_line(', '.join(objects))}"
    )
    recorder = session.record(request.camera) if request.video else None
    results = []
    for instruction in instructions:
        results.append(planning.handle(instruction, on_status=lambda line: say(f"[run] {line}")))
    session.world.step_seconds(0.5)  # let objects settle before reading the scene
    report = {
        "instruction": instructions[0],
        "planner": "code",
        "robot": request.robot,
        "seed": request.seed,
        "llm": request.llm,
        "objects": objects,
        "result": results[0].as_dict(),
        "scene": scene_readout(session),
    }
    if len(results) > 1:
        report["steps"] = [r.as_dict() for r in results]
    if recorder is not None:
        report["video"] = str(recorder.save(request.video))
        recorder.renderer.close()
    return report


def _run_reward(request: RunRequest, instructions: list[str], say: Callable[[str], None]) -> dict:
    from lang2policy.l2r.planner import RewardPlanner
    from lang2policy.l2r.run import run_instructions, scene_state
    from lang2policy.llm import make_client

    session = SimSession(request.robot)
    objects = session.reset(request.seed, list(request.objects) if request.objects else None)
    if not request.objects:
        objects = _with_named_objects(session, request.seed, objects, instructions)
    positions, _ = scene_state(session.world)
    planner = RewardPlanner(make_client(request.llm), positions)
    say(
        f"[run] {request.robot}, seed {request.seed}, llm {request.llm}, reward planner: "
        f"{one_line(', '.join(objects))}"
    )
    recorder = _recorder(session, request.camera) if request.video else None
    capture = None if recorder is None else (lambda mpc: recorder.maybe_capture(mpc.world.data))
    steps = run_instructions(
        session,
        planner,
        instructions,
        seed=request.seed,
        duration=request.duration,
        say=lambda line: say(f"[run] {line}"),
        on_step=capture,
    )
    report = {
        "instruction": instructions[0],
        "instructions": instructions,
        "planner": "reward",
        "robot": request.robot,
        "seed": request.seed,
        "llm": request.llm,
        "objects": objects,
        "ok": len(steps) == len(instructions) and all(step["ok"] for step in steps),
        "steps": steps,
        "scene": scene_readout(session),
    }
    if recorder is not None:
        report["video"] = str(recorder.save(request.video))
        recorder.renderer.close()
    return report


def _with_named_objects(
    session: SimSession, seed: int, objects: list[str], instructions: list[str]
) -> list[str]:
    """The seeded layout, with the pool objects the instructions name put on the table in
    place of others ("lift the red block" always finds one); unchanged when all are there."""
    text = " ".join(instructions).lower()
    named = [n for n in session.world.objects if re.search(rf"\b{re.escape(n)}\b", text)]
    if all(n in objects for n in named):
        return objects
    others = [o for o in objects if o not in named]
    return session.reset(seed, [*named, *others][: max(len(objects), len(named))])


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
    if report.get("planner") == "reward":
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
    return lines


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
    return lines


def main_exit_code(report: dict) -> int:
    """0 when everything succeeded, 1 when a plan or its execution did not."""
    if report.get("planner") == "reward":
        return 0 if report["ok"] else 1
    results = report.get("steps") or [report["result"]]
    return 0 if all(r["outcome"]["ok"] for r in results) else 1
