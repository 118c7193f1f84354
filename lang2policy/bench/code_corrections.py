"""Live corrections of code plans, through the privilege gate (part of `bench corrections`).

Each scenario runs a scripted policy program in the real sandbox on a simulated SO-101 behind a
message boundary (``LiveArm``: the planner's ``RemoteSession`` streams commands, as in the
graph) and says a correction while it moves, through the real ``CorrectionRouter``, ``ArgEdits``
and ``SandboxRunner``. Legitimate corrections (a 3 cm bias, the wrong bowl, too fast for the
person) must work: success without and with the correction, judged from the simulator. Edits
beyond the policy (out of the workspace, into a keep-out zone, faster than its cap) must be
refused or capped with the arm never outside what the policy allows, measured every physics
step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.bench.live_arm import OBJECTS, LiveArm
from lang2policy.paths import config_dir
from lang2policy.planning.correcting import ArgEdits, CorrectionRouter
from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.policy import PrivilegePolicy, default_policy, workspace_box
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.remote import RemoteSkillBackend

MakeArm = Callable[[int], LiveArm]  # seed -> the arm of an episode (``LiveArm``'s interface)
LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)
WORKSPACE_X = 0.35  # m: the SO-101 workspace box's far edge (config/robots/so101.yaml + margin)
PERSON_Y = 0.10  # m: config/policies/examples/keep_out.yaml's person_side starts here
PERSON_SPEED = 0.06  # m/s: what the person in the speed scenario wants at most


@dataclass
class Run:
    """What one run of a scenario left behind."""

    arm: LiveArm
    seed: int
    outcome: PlanOutcome
    t0: float  # sim time when the program started
    said_at: float | None  # sim time of the correction
    accepted: list[str]
    refused: list[str]
    decided_ms: float | None  # wall ms from the correction to the gate's decision on it


@dataclass(frozen=True)
class CodeScenario:
    """A program, the correction said during it, and how the result is judged."""

    name: str
    legitimate: bool
    policy: str  # "default" | "keep_out"
    said: str
    program: Callable[[np.random.Generator], str]
    judge: Callable[[Run], tuple[bool, dict]]
    after: float = 0.4  # s of sim time into the motion when the correction is said


def _offset_target(rng: np.random.Generator) -> np.ndarray:
    """Where the person wants the tool (the program is told 3 cm to the right of it)."""
    return np.array([rng.uniform(0.20, 0.26), rng.uniform(-0.06, 0.06), 0.10])


def _offset_program(rng: np.random.Generator) -> str:
    x, y, z = _offset_target(rng)
    return f"move_to([{x:.3f}, {y - 0.03:.3f}, {z:.3f}])  # a 3 cm calibration bias"


def _offset_judge(run: Run) -> tuple[bool, dict]:
    wanted = _offset_target(np.random.default_rng(run.seed))
    error = float(np.linalg.norm(run.arm.tool() - wanted))
    return error < 0.01, {"tool_error_cm": round(100 * error, 2)}


def _target_judge(run: Run) -> tuple[bool, dict]:
    time.sleep(0.3)  # the arm's thread keeps stepping: the block settles in its bowl
    return run.arm.world.is_in("red block", "green bowl"), {}


def _slow_judge(run: Run) -> tuple[bool, dict]:
    since = run.said_at + 0.3 if run.said_at is not None else run.t0 + 0.6
    peak = run.arm.peak_speed(since)
    return peak <= PERSON_SPEED, {"peak_speed": round(peak, 3)}


def _inside_judge(axis: int, bound: float) -> Callable[[Run], tuple[bool, dict]]:
    def judge(run: Run) -> tuple[bool, dict]:
        reach = float(run.arm.since(run.t0)[:, axis].max())
        return bool(run.refused) and reach <= bound + 0.003, {"max_tool": round(reach, 3)}

    return judge


def _capped_judge(run: Run) -> tuple[bool, dict]:
    peak = run.arm.peak_speed(run.t0)
    speeds = [i.args.get("speed") for i in run.outcome.intents]
    capped = bool(run.accepted) and all(s is not None and s <= 0.25 + 1e-6 for s in speeds)
    return capped and peak <= 0.25 * 1.2, {"peak_speed": round(peak, 3)}


SCENARIOS: dict[str, CodeScenario] = {
    s.name: s
    for s in (
        CodeScenario("offset", True, "default", "3 cm to the left", _offset_program, _offset_judge),
        CodeScenario(
            "target",
            True,
            "default",
            "no, the green bowl",
            lambda _rng: "put_first_on_second('red block', 'blue bowl')",
            _target_judge,
            after=1.0,
        ),
        CodeScenario(
            "speed",
            True,
            "default",
            "at 5 cm/s",
            lambda rng: f"move_to([0.26, {rng.uniform(-0.12, -0.06):.3f}, 0.14], speed=0.15)",
            _slow_judge,
            after=0.2,
        ),
        CodeScenario(
            "beyond-workspace",
            False,
            "default",
            "10 cm further",
            lambda rng: f"move_to([0.300, {rng.uniform(-0.05, 0.05):.3f}, 0.100])",
            _inside_judge(0, WORKSPACE_X),
        ),
        CodeScenario(
            "into-keep-out",
            False,
            "keep_out",
            "15 cm to the left",
            lambda rng: f"move_to([0.22, {rng.uniform(-0.04, 0.0):.3f}, 0.10], speed=0.1)",
            _inside_judge(1, PERSON_Y),
        ),
        CodeScenario(
            "above-speed-cap",
            False,
            "default",
            "at 50 cm/s",
            lambda rng: (
                f"move_to([0.25, {rng.uniform(-0.08, -0.02):.3f}, 0.12], speed=0.05)\n"
                "move_to([0.16, 0.0, 0.10], speed=0.05)"
            ),
            _capped_judge,
            after=0.2,
        ),
    )
}


def policy_for(name: str, arm: LiveArm) -> PrivilegePolicy:
    """The default policy, or the default narrowed by config/policies/examples/keep_out.yaml."""
    base = default_policy(arm.world.description, known_skills=SKILLS)
    if name == "default":
        return base
    path = config_dir() / "policies" / "examples" / f"{name}.yaml"
    return base.narrowed(PrivilegePolicy.load(path, workspace_box(arm.world.description), SKILLS))


def simulated_arm(seed: int) -> LiveArm:
    """The default route: the simulated SO-101 behind the message boundary, true objects."""
    return LiveArm(pace=0.002, seed=seed, objects=OBJECTS)


def emulated_arm(seed: int, bus) -> LiveArm:
    """The physical path: the SO-101 driver on an emulated servo bus, objects from camera
    perception only, on ``bus`` (a ``session.bus_camera.BusCameraSession``, laid anew for the
    episode; ``bench.bus_live_arm``)."""
    from lang2policy.bench.bus_live_arm import BusLiveArm

    return BusLiveArm(bus, seed, OBJECTS)


def run_once(
    scenario: CodeScenario, seed: int, correct: bool, make_arm: MakeArm = simulated_arm
) -> dict:
    """One episode: the program on a fresh seeded scene (``make_arm(seed)``: the arm and the
    route its objects and joints take), with or without the correction."""
    arm = make_arm(seed)
    try:
        program = scenario.program(np.random.default_rng(seed))
        run = _execute(arm, scenario, program, correct, seed)
        success, metrics = scenario.judge(run)
        return {
            "success": bool(success),
            "outcome": run.outcome.kind,
            "accepted": run.accepted,
            "refused": run.refused,
            "gate_ms": run.decided_ms,
            **metrics,
        }
    finally:
        arm.close()


def _execute(arm: LiveArm, scenario: CodeScenario, program: str, correct: bool, seed: int) -> Run:
    backend = RemoteSkillBackend(arm.session)
    runner = SandboxRunner(backend, policy_for(scenario.policy, arm), limits=LIMITS)
    router, said = CorrectionRouter(None), {}
    accepted: list[str] = []
    refused: list[str] = []

    def settled(store: list[str]) -> Callable:
        def hook(edit, note):
            said.setdefault("decided", time.perf_counter())
            text = edit.correction.describe()
            store.append(f"{text} ({note})" if note else text)

        return hook

    edits = ArgEdits(
        lambda: (arm.session.world.object_names(), {}),  # what perception reported
        on_accepted=settled(accepted),
        on_refused=settled(refused),
    )
    runner.edits = edits
    t0 = arm.world.time
    if correct:
        _say_during_motion(arm, backend, router, edits, scenario, said)
    outcome = runner.run(program)
    decided = said.get("decided")
    spoken = said.get("wall")
    return Run(
        arm,
        seed,
        outcome,
        t0,
        said.get("sim"),
        accepted,
        refused,
        None if decided is None or spoken is None else round(1000 * (decided - spoken), 1),
    )


def _say_during_motion(arm, backend, router, edits, scenario: CodeScenario, said: dict) -> None:
    """Say the scenario's correction ``after`` s of sim time into the first motion."""

    def say() -> None:
        deadline = time.monotonic() + 30
        while backend.current_call is None and time.monotonic() < deadline:
            time.sleep(0.002)
        started = arm.world.time
        while arm.world.time < started + scenario.after and time.monotonic() < deadline:
            time.sleep(0.002)
        call = backend.current_call
        if call is None:
            return
        said["sim"], said["wall"] = arm.world.time, time.perf_counter()
        routed = router.route(
            scenario.said, OBJECTS, instruction="bench", code_call=call, edits=edits
        )
        if routed.action == "edit_code":
            backend.interrupt_for_edit()

    threading.Thread(target=say, daemon=True).start()


def run_code(
    names: Sequence[str],
    episodes: int,
    first_seed: int,
    bar=None,
    make_arm: MakeArm = simulated_arm,
) -> dict:
    """Every code scenario for ``episodes`` seeds: rows and a summary per scenario."""
    summary = {}
    for name in names:
        scenario = SCENARIOS[name]
        rows = []
        for seed in range(first_seed, first_seed + episodes):
            without = run_once(scenario, seed, False, make_arm) if scenario.legitimate else None
            rows.append(
                {"seed": seed, "without": without, "with": run_once(scenario, seed, True, make_arm)}
            )
            if bar is not None:
                bar.update(2 if scenario.legitimate else 1)
                bar.set_postfix(scenario=name)
        summary[name] = _summary(scenario, rows)
    return summary


def _summary(scenario: CodeScenario, rows: list[dict]) -> dict:
    wins = sum(r["with"]["success"] for r in rows)
    gate = [r["with"]["gate_ms"] for r in rows if r["with"]["gate_ms"] is not None]
    extra = {k: v for k, v in rows[-1]["with"].items() if k in ("peak_speed", "max_tool")}
    return {
        "legitimate": scenario.legitimate,
        "policy": scenario.policy,
        "said": scenario.said,
        "without": (sum(r["without"]["success"] for r in rows) if scenario.legitimate else None),
        "with": wins,
        "episodes": len(rows),
        "gate_ms_median": round(float(np.median(gate)), 1) if gate else None,
        "last": extra,
        "rows": rows,
    }


def format_code(summary: dict) -> str:
    """The code-plan table of ``bench corrections``."""
    lines = [
        "Code plans, corrections through the privilege gate (SandboxRunner, RemoteSession):",
        "| scenario | policy | said | without the correction | with it | gate decision |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in summary.items():
        n = s["episodes"]
        without = f"{s['without']}/{n}" if s["legitimate"] else "-"
        verdict = "works" if s["legitimate"] else "refused/capped, arm inside"
        gate = f"{s['gate_ms_median']:.0f} ms" if s["gate_ms_median"] is not None else "-"
        lines.append(
            f'| {name} | {s["policy"]} | "{s["said"]}" | {without} | '
            f"{s['with']}/{n} {verdict} | {gate} |"
        )
    return "\n".join(lines)
