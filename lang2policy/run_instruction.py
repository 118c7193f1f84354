"""``lang2policy run "INSTRUCTION"``: plan one instruction with an LLM and execute it in simulation.

Builds a seeded tabletop scene (or the objects given), the LLM client (local Gemma by default,
any OpenAI-compatible endpoint, or a replay file), the Code-as-Policies planner and the sandbox,
then plans, runs (with one repair attempt) and reports the program, the outcome and the final
scene read from the simulator. ``--video`` records the run from a scene camera.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lang2policy.errors import Lang2PolicyError
from lang2policy.exec_policy import scene_readout
from lang2policy.sandbox.outcome import printable
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS
from lang2policy.tasks import Session

MAX_INSTRUCTION = 500


@dataclass(frozen=True)
class RunRequest:
    instruction: str
    robot: str = "so101"
    objects: tuple[str, ...] | None = None
    llm: str = "local"
    seed: int = 0
    video: Path | None = None
    camera: str = "front"


def check_instruction(text: str) -> str:
    """The instruction, stripped; a clear error when it is empty, too long or not text."""
    text = (text or "").strip()
    if not text:
        raise Lang2PolicyError("the instruction is empty; say what the robot should do")
    if len(text) > MAX_INSTRUCTION:
        raise Lang2PolicyError(
            f"the instruction has {len(text)} characters; at most {MAX_INSTRUCTION} are allowed"
        )
    if any(ord(c) < 32 and c not in "\t" for c in text):
        raise Lang2PolicyError("the instruction contains control characters; use plain text")
    return text


def build_session(request: RunRequest):
    """(sim session, objects on the table, planning session) for one run."""
    from lang2policy.llm import make_client
    from lang2policy.planning import CodeAsPoliciesPlanner, PlanningSession

    session = Session(request.robot)
    objects = session.reset(request.seed, list(request.objects) if request.objects else None)
    backend = SimSkillBackend(session)
    policy = default_policy(session.world.description, known_skills=SKILLS)
    planner = CodeAsPoliciesPlanner(make_client(request.llm))
    return session, objects, PlanningSession(planner, SandboxRunner(backend, policy), backend)


def run(request: RunRequest, say: Callable[[str], None] = print) -> dict:
    """Plan and execute one instruction; returns a JSON-able report."""
    instruction = check_instruction(request.instruction)
    session, objects, planning = build_session(request)
    say(f"[run] {request.robot}, seed {request.seed}, llm {request.llm}: {', '.join(objects)}")
    recorder = session.record(request.camera) if request.video else None
    result = planning.handle(instruction, on_status=lambda line: say(f"[run] {line}"))
    session.world.step_seconds(0.5)  # let objects settle before reading the scene
    report = {
        "instruction": instruction,
        "robot": request.robot,
        "seed": request.seed,
        "llm": request.llm,
        "objects": objects,
        "result": result.as_dict(),
        "scene": scene_readout(session),
    }
    if recorder is not None:
        report["video"] = str(recorder.save(request.video))
        recorder.renderer.close()
    return report


def format_text(report: dict) -> str:
    result = report["result"]
    outcome = result["outcome"]
    program = (result.get("program") or {}).get("code") or "(no program)"
    lines = [
        f"instruction: {report['instruction']}",
        "program:",
        *("    " + line for line in printable(program).splitlines()),
        f"attempts: {result['attempts']}",
        f"outcome: {outcome['kind']}"
        + ("" if outcome["ok"] else f" - {printable(outcome['message'])}"),
    ]
    if outcome.get("said"):
        lines.append("said: " + printable(" | ".join(outcome["said"])))
    lines.append("scene:")
    for name, position in report["scene"]["positions"].items():
        lines.append(f"  {name:<16} at {position}")
    relations = report["scene"]["relations"]
    lines.append("  relations: " + (", ".join(relations) if relations else "none"))
    if "video" in report:
        lines.append(f"video: {report['video']}")
    return "\n".join(lines)


def main_exit_code(report: dict) -> int:
    return 0 if report["result"]["outcome"]["ok"] else 1
