"""One episode of ``lang2policy bench corrections``: the same seeded scene run without the
correction, with it (the scripted person corrects the running spec), and again paraphrased with
the correction memory on (see ``bench.corrections``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lang2policy.bench.corrections_scenarios import SCENARIOS, Setup, Trace
from lang2policy.corrections.apply import apply_to_spec, objects_in_spec
from lang2policy.corrections.classify import classify
from lang2policy.corrections.correction import CorrectionError
from lang2policy.corrections.memory import (
    CorrectionMemory,
    Embedder,
    apply_recalled,
    situation_for_spec,
)
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.episode import LockstepMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.scene.world import World

RUNS = ("without", "with", "repeat")


# --------------------------------------------------------------------------- one run
@dataclass
class RunResult:
    success: bool
    status: str
    sim_seconds: float
    corrections: int  # corrections the scripted person made in this run
    measure: float
    classify_apply_ms: float | None = None
    effect_sim_s: float | None = None  # sim s from the correction to a measurable response
    notes: list[str] = field(default_factory=list)
    error: str = ""
    recall: dict | None = None  # repeat runs: what the memory recalled and applied

    def as_dict(self) -> dict:
        data = dict(self.__dict__)
        data["measure"] = round(self.measure, 4) if np.isfinite(self.measure) else None
        data["sim_seconds"] = round(self.sim_seconds, 2)
        if self.classify_apply_ms is not None:
            data["classify_apply_ms"] = round(self.classify_apply_ms, 3)
        if self.effect_sim_s is not None:
            data["effect_sim_s"] = round(self.effect_sim_s, 2)
        return data


@dataclass
class _Person:
    """The scripted person: corrects once, at ``setup.correct_at``, if they see the mistake."""

    setup: Setup
    speaks: bool
    instruction: str
    memory: CorrectionMemory | None
    positions: Callable[[], dict[str, list[float]]]  # where the objects are, as the arm sees
    corrections: int = 0
    corrected_at: float | None = None
    wall_ms: float | None = None
    effect: float | None = None
    notes: list[str] = field(default_factory=list)

    def watch(self, mpc: LockstepMPC, trace: Trace) -> None:
        now = trace.times[-1]  # seconds into the run
        if (
            self.corrected_at is not None
            and self.effect is None
            and self.setup.responded(trace, self.corrected_at, mpc.spec)
        ):
            self.effect = now - self.corrected_at
        due = self.speaks and self.corrections == 0 and now >= self.setup.correct_at - 1e-9
        if due and self.setup.sees_mistake(trace):
            self._correct(mpc, trace)

    def _correct(self, mpc: LockstepMPC, trace: Trace) -> None:
        before = mpc.spec
        positions, speeds = self.positions(), trace.speeds()  # what perception has at hand
        names = list(positions)
        started = time.perf_counter()
        correction = classify(self.setup.correction, names, objects_in_spec(before, positions))
        self.corrections += 1
        try:
            applied = apply_to_spec(
                correction,
                before,
                names,
                positions=positions,
                current_speed=speeds[-1] if speeds else None,
            )
        except CorrectionError as exc:  # refused with its reason, as the planner says it
            self.notes.append(f"at {trace.times[-1]:.1f} s: '{correction.text}' refused: {exc}")
            return
        mpc.set_spec(applied.spec)
        self.wall_ms = 1000 * (time.perf_counter() - started)
        self.corrected_at = trace.said_at = trace.times[-1]
        self.notes += [
            f"at {self.corrected_at:.1f} s: '{correction.text}' -> {correction.describe()}",
            *applied.notes,
        ]
        if self.memory is not None:
            self.memory.remember(
                self.instruction,
                correction,
                situation_for_spec(before, names, self.corrected_at),
            )


def _positions(world: World) -> dict[str, list[float]]:
    return {n: [float(v) for v in world.object_pose(n).position] for n in world.present}


class SimRoute:
    """Where the runs happen by default: ``LockstepMPC`` on the simulated world, which the
    MPC and the person read the objects from (``corrections_bus.BusRoute``: the physical
    path)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def reset(self, seed: int, objects: list[str]) -> None:
        self.world.reset(seed, list(objects))

    def make_mpc(self, world: World, spec: RewardSpec, config: MPCConfig, judge: RewardSpec):
        return LockstepMPC(world, spec, config, judge=judge)

    def positions(self) -> dict[str, list[float]]:
        return _positions(self.world)


def _run(
    route,
    setup: Setup,
    spec: RewardSpec,
    config: MPCConfig,
    person: _Person,
) -> RunResult:
    world = route.world
    judge = validate_spec(setup.judge, world.present, add_defaults=False).spec
    mpc = route.make_mpc(world, spec, config, judge)
    trace = Trace()
    start, status = world.time, "running"  # the trace counts seconds into the run
    trace.add(0.0, _tool(mpc))
    try:
        while status == "running" and world.time - start < spec.duration - 1e-9:
            status = mpc.step()
            trace.add(world.time - start, _tool(mpc))
            person.watch(mpc, trace)
    finally:
        mpc.close()
    status = "timeout" if status == "running" else status
    success = status == "success" and setup.extra_ok(trace)
    return RunResult(
        success,
        status,
        world.time - start,
        person.corrections,
        setup.measure(trace, world),
        person.wall_ms,
        person.effect,
        person.notes,
    )


def _tool(mpc: LockstepMPC) -> np.ndarray:
    return np.asarray(mpc.measure_now().tool).reshape(-1)[:3].copy()


# --------------------------------------------------------------------------- an episode
def run_episode(
    route,
    name: str,
    seed: int,
    config: MPCConfig,
    memory_path: Path,
    embedder: Embedder,
    threshold: float,
) -> dict:
    """The three runs of one seeded scenario on ``route`` (``SimRoute``, or the physical
    path's ``corrections_bus.BusRoute``); the log at ``memory_path`` starts empty."""
    scenario, world = SCENARIOS[name], route.world
    route.reset(seed, list(scenario.objects))
    setup = scenario.make(world, np.random.default_rng(seed))
    plan = validate_spec(setup.plan, world.present).spec
    memory_path.unlink(missing_ok=True)
    CorrectionMemory(memory_path).cache_path.unlink(missing_ok=True)
    runs: dict[str, dict] = {}
    for run in RUNS:
        route.reset(seed, list(scenario.objects))
        memory = CorrectionMemory(memory_path, embedder=embedder)  # re-read: as after a restart
        try:
            if run == "repeat":
                result = _repeat_run(route, setup, plan, config, memory, threshold)
            else:
                person = _Person(
                    setup,
                    speaks=run == "with",
                    instruction=setup.instruction,
                    memory=memory if run == "with" else None,
                    positions=route.positions,
                )
                result = _run(route, setup, plan, config, person)
        except Lang2PolicyError as exc:
            result = RunResult(
                False, "error", 0.0, 0, float("nan"), error=f"{type(exc).__name__}: {exc}"
            )
        runs[run] = result.as_dict()
    return {
        "scenario": name,
        "seed": seed,
        "instruction": setup.instruction,
        "repeat_instruction": setup.repeat_instruction,
        "correction": setup.correction,
        **runs,
    }


def _repeat_run(
    route,
    setup: Setup,
    plan: RewardSpec,
    config: MPCConfig,
    memory: CorrectionMemory,
    threshold: float,
) -> RunResult:
    """The paraphrased instruction, planned with the remembered edits applied."""
    recalled = memory.edits_for(setup.repeat_instruction, threshold)
    recall_ms = memory.last_recall_ms
    positions = route.positions()
    applied, used = apply_recalled(plan, recalled, list(positions), positions=positions)
    person = _Person(
        setup,
        speaks=True,
        instruction=setup.repeat_instruction,
        memory=memory,
        positions=route.positions,
    )
    result = _run(route, setup, applied.spec, config, person)
    result.notes = [*applied.notes, *result.notes]
    result.recall = {
        "recalled": len(recalled),
        "applied": len(used),
        "best_score": max((r.score for r in recalled), default=None),
        "recall_ms": round(recall_ms, 2),
    }
    return result
