"""``lang2policy bench intents``: what the sandbox costs per skill call.

Three ways of making the same query (``get_ee_pos``) on the same simulated robot, in one run:
  direct    - the backend call in-process, no checks (what Code as Policies' exec() did);
  gated     - in-process with the host's checks: schema binding, targets, policy decision;
  sandboxed - from a program in the sandbox child: JSON intent out, checks, JSON result back.
Per-call times are measured on the host: for the sandbox, the interval between consecutive
intents of a tight loop, i.e. one full round trip as the program experiences it. Child
start-up (spawn, numpy import, confinement) is reported separately.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.sandbox.policy import PolicyRequest, PrivilegePolicy, workspace_box
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS

_SKILL = "get_ee_pos"
_STARTUPS = 10


def _policy(session: SimSession, calls: int) -> PrivilegePolicy:
    rules = {
        "version": 1,
        "budgets": {"max_skill_calls": calls + 10, "max_motion_seconds": 1},
        "rules": [{"id": "bench", "skill": _SKILL, "effect": "allow", "priority": 1}],
    }
    return PrivilegePolicy.from_dict(rules, workspace_box(session.world.description), "bench")


def _stats(seconds: list[float]) -> dict:
    micro = np.array(seconds) * 1e6
    return {
        "calls": len(seconds),
        "median_us": round(float(np.median(micro)), 2),
        "p99_us": round(float(np.percentile(micro, 99)), 2),
        "mean_us": round(float(micro.mean()), 2),
    }


def _time_calls(function, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return times


def _gated(backend: SimSkillBackend, policy: PrivilegePolicy):
    skill = SKILLS[_SKILL]

    def call():
        bound = skill.bind({})
        request = PolicyRequest(
            _SKILL,
            skill.category,
            bound,
            tuple(backend.targets(_SKILL, bound)),
            tuple(skill.object_args(bound)),
            tuple(backend.object_names()),
        )
        if policy.decide(request).allowed:
            backend.execute(_SKILL, bound)

    return call


def _sandboxed(backend: SimSkillBackend, policy: PrivilegePolicy, calls: int) -> list[float]:
    stamps: list[float] = []
    runner = SandboxRunner(
        backend, policy, on_intent=lambda record: stamps.append(time.perf_counter())
    )
    outcome = runner.run(f"for _ in range({calls + 1}):\n    {_SKILL}()\n")
    if not outcome.ok:
        raise RuntimeError(f"benchmark program failed: {outcome.headline()}")
    return list(np.diff(stamps))


def run(robot: str, calls: int, progress: bool = True) -> dict:
    session = SimSession(robot)
    session.reset(0)
    backend = SimSkillBackend(session)
    policy = _policy(session, calls)
    steps = tqdm(total=3 + _STARTUPS, desc="bench intents", disable=not progress)
    direct = _time_calls(lambda: backend.execute(_SKILL, {}), calls)
    steps.update()
    gated = _time_calls(_gated(backend, policy), calls)
    steps.update()
    sandboxed = _sandboxed(backend, policy, calls)
    steps.update()
    startups = []
    runner = SandboxRunner(backend, policy)
    for _ in range(_STARTUPS):
        startups.append(runner.run("pass\n").wall_seconds)
        steps.update()
    steps.close()
    return {
        "robot": robot,
        "skill": _SKILL,
        "direct": _stats(direct),
        "gated": _stats(gated),
        "sandboxed": _stats(sandboxed),
        "startup_ms": {
            "runs": _STARTUPS,
            "median": round(statistics.median(startups) * 1000, 1),
            "max": round(max(startups) * 1000, 1),
        },
    }


def format_text(report: dict) -> str:
    lines = [
        f"intent round trip, {report['skill']}() on {report['robot']} "
        f"({report['sandboxed']['calls']} calls each)",
        f"{'path':<10} {'median':>10} {'p99':>10} {'mean':>10}",
    ]
    for path in ("direct", "gated", "sandboxed"):
        s = report[path]
        lines.append(
            f"{path:<10} {s['median_us']:>8.1f}us {s['p99_us']:>8.1f}us {s['mean_us']:>8.1f}us"
        )
    overhead = report["sandboxed"]["median_us"] - report["direct"]["median_us"]
    lines.append(f"sandbox overhead per call (median): {overhead:.1f} us")
    startup = report["startup_ms"]
    lines.append(
        f"child start-up (spawn, numpy, confinement): median {startup['median']} ms, "
        f"max {startup['max']} ms over {startup['runs']} runs"
    )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--calls", type=int, default=2000, help="skill calls per measurement")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench intents``."""
    if args.calls < 10:
        raise Lang2PolicyError("--calls must be at least 10")
    return run(args.robot, args.calls)
