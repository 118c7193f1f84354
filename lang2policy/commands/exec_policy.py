"""``lang2policy exec-policy``: run a policy file in the sandbox against the simulation.

Builds a seeded tabletop scene, the default (or a given) privilege policy, optionally a
narrower plan policy, runs the file through the sandbox and reports the outcome, every intent
with its decision, and what the simulator says happened (object positions, in/on relations).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.policy import (
    Decision,
    PolicyRequest,
    PrivilegePolicy,
    default_policy,
    workspace_box,
)
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.readout import scene_readout
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS
from lang2policy.text_quote import one_line


@dataclass(frozen=True)
class ExecRequest:
    program: Path
    robot: str = "so101"
    policy: Path | None = None
    plan_policy: Path | None = None
    seed: int = 0
    objects: tuple[str, ...] | None = None
    ast_check: bool = True
    ask: bool = False  # ask on the terminal for rules whose fallback is "ask"


def load_policy(path: Path | None, session: SimSession) -> PrivilegePolicy:
    description = session.world.description
    if path is None:
        return default_policy(description)
    return PrivilegePolicy.load(path, workspace_box(description), known_skills=SKILLS)


def terminal_approval(request: PolicyRequest, decision: Decision) -> bool:
    """Ask the person at the terminal; anything but 'y'/'yes' is a no."""
    args = ", ".join(f"{k}={v!r}" for k, v in request.args.items())
    prompt = f"Policy rule '{decision.rule}' asks: allow {request.skill}({args})? [y/N] "
    try:
        answer = input(prompt)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


@dataclass
class ExecResult:
    request: ExecRequest
    objects: list[str]
    outcome: PlanOutcome
    scene: dict

    def as_dict(self) -> dict:
        return {
            "program": str(self.request.program),
            "robot": self.request.robot,
            "seed": self.request.seed,
            "objects": self.objects,
            "outcome": self.outcome.as_dict(),
            "scene": self.scene,
        }

    def format_text(self) -> str:
        """The result for a person: one line per field. Said text comes from the policy
        program and object names from the scene, so each is quoted with ``one_line``: a line
        break inside them cannot start a line that reads like the host's own (``outcome : ok``)."""
        request, outcome = self.request, self.outcome
        layers = ", ".join(f"{k} {v}" for k, v in outcome.layers.items()) or "not started"
        program = one_line(str(request.program))
        lines = [
            f"program : {program}  (robot {request.robot}, seed {request.seed})",
            f"sandbox : {layers}",
            f"outcome : {outcome.summary()}",
        ]
        if outcome.said:
            lines.append("said    : " + one_line(" | ".join(outcome.said)))
        lines.append("scene   :")
        for name, position in self.scene["positions"].items():
            lines.append(f"  {one_line(name):<16} at {position}")
        relations = self.scene["relations"]
        lines.append("  relations: " + (one_line(", ".join(relations)) if relations else "none"))
        return "\n".join(lines)


def run_program(request: ExecRequest) -> ExecResult:
    """Run the program once in a fresh seeded scene."""
    try:
        source = request.program.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Lang2PolicyError(f"cannot read policy file {request.program}: {exc}") from exc
    session = SimSession(request.robot)
    objects = session.reset(request.seed, list(request.objects) if request.objects else None)
    policy = load_policy(request.policy, session)
    plan_policy = None
    if request.plan_policy is not None:
        plan_policy = PrivilegePolicy.load(
            request.plan_policy, workspace_box(session.world.description), known_skills=SKILLS
        )
    ask = terminal_approval if request.ask and sys.stdin.isatty() else None
    runner = SandboxRunner(
        SimSkillBackend(session),
        policy,
        limits=SandboxLimits(),
        ast_check=request.ast_check,
        ask_user=ask,
    )
    outcome = runner.run(source, plan_policy)
    session.world.step_seconds(0.5)  # let objects settle before reading the scene
    return ExecResult(request, objects, outcome, scene_readout(session))


def add_parser(commands) -> None:
    execp = commands.add_parser(
        "exec-policy", help="run a policy program in the sandbox against the simulation"
    )
    execp.add_argument("file", type=Path, help="Python policy program (Code-as-Policies style)")
    cli_types.add_robot(execp)
    execp.add_argument("--policy", type=Path, help="privilege policy YAML (default: built-in)")
    execp.add_argument("--narrow", type=Path, help="plan policy YAML that narrows --policy")
    cli_types.add_seed(execp)
    execp.add_argument("--objects", type=cli_types.text, help=cli_types.OBJECTS_HELP)
    execp.add_argument("--json", action="store_true", help="print JSON only")
    execp.add_argument("--no-ast-check", action="store_true", help="skip the static pre-check")
    execp.add_argument("--ask", action="store_true", help="ask on the terminal for 'ask' rules")


def run(args: argparse.Namespace) -> int:
    request = ExecRequest(
        program=args.file,
        robot=args.robot,
        policy=args.policy,
        plan_policy=args.narrow,
        seed=args.seed,
        objects=cli_types.objects(args.objects),
        ast_check=not args.no_ast_check,
        ask=args.ask,
    )
    result = run_program(request)
    cli_types.print_report(result.as_dict(), args.json, lambda report: result.format_text())
    return 0 if result.outcome.ok else 1
