"""``lang2policy run ... --planner reward``: plan reward specs and run them with the MPC in sim.

The first instruction is planned on a seeded scene and its spec starts a ``LockstepMPC`` on
the world; each follow-up ("higher") is planned with the running spec as context and swapped
into the same controller with ``set_spec``: no restart, the warm-started plan carries over.
Each step runs until its spec succeeds, fails (an always-condition broke) or its duration ends
(``duration`` caps every step, in simulated seconds). A planning failure ends the run there;
the arm is not moved for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.l2r.planner import RewardPlan, RewardPlanner
from lang2policy.mpc.episode import EpisodeOutcome, LockstepMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import RewardSpec
from lang2policy.scene.world import World
from lang2policy.session.sim import SimSession

Say = Callable[[str], None]


def scene_state(world: World) -> tuple[dict[str, tuple[float, ...]], dict[str, float]]:
    """(positions [x, y, z], headings in degrees) of the objects on a ``World``'s table: what
    ``RewardPlanner.plan``/``set_scene`` take."""
    positions = {n: tuple(round(float(v), 4) for v in world.object_pose(n).position)
                 for n in world.present}
    headings = {n: round(float(np.rad2deg(world.object_yaw(n))), 2) for n in world.present}
    return positions, headings


def capped(spec: RewardSpec, duration: float | None) -> RewardSpec:
    """``spec`` with its duration cut to ``duration`` seconds (when given and shorter)."""
    if duration is None or duration >= spec.duration:
        return spec
    return dataclasses.replace(spec, duration=duration)


def step_ok(spec: RewardSpec, outcome: EpisodeOutcome) -> bool:
    """Success, or a spec without goal conditions (it runs for its duration) that ran out."""
    goals = [c for c in spec.conditions if not c.always]
    return outcome.success or (outcome.status == "timeout" and not goals)


def outcome_dict(outcome: EpisodeOutcome) -> dict[str, Any]:
    return {"status": outcome.status, "sim_seconds": round(outcome.sim_seconds, 3),
            "iterations": outcome.iterations,
            "mpc_plan_ms": round(outcome.plan_ms, 1),  # mean per iteration over the run so far
            "final": {k: round(v, 4) for k, v in outcome.final.items()},
            "reason": outcome.reason}


class RewardRun:
    """Plans and runs a sequence of instructions on one session with one controller."""

    def __init__(self, session: SimSession, planner: RewardPlanner, *, seed: int = 0,
                 duration: float | None = None, on_step: Callable[[LockstepMPC], None] | None
                 = None) -> None:
        self.session, self.planner = session, planner
        self.config = MPCConfig(seed=seed, samples=128)
        self.duration, self.on_step = duration, on_step
        self.mpc: LockstepMPC | None = None

    def close(self) -> None:
        if self.mpc is not None:
            self.mpc.close()
            self.mpc = None

    def handle(self, instruction: str, say: Say) -> dict[str, Any]:
        """Plan one instruction, then run its spec; the step's JSON-able report."""
        positions, headings = scene_state(self.session.world)
        current = self.mpc.spec if self.mpc is not None else None
        say(f"planning: {instruction}")
        try:
            plan = self.planner.plan(instruction, current, positions=positions,
                                     headings=headings)
        except Lang2PolicyError as exc:
            say(f"failed to plan: {type(exc).__name__}: {exc}")
            return {"instruction": instruction, "ok": False, "plan": None, "outcome": None,
                    "error": f"{type(exc).__name__}: {exc}"}
        self._show(plan, say)
        spec = capped(plan.spec, self.duration)
        if self.mpc is None:
            self.mpc = LockstepMPC(self.session.world, spec, self.config)
        else:
            self.mpc.set_spec(spec)  # the same controller: no restart
        before = self.mpc.iterations
        outcome = self.mpc.run(on_step=self.on_step)
        outcome.iterations -= before  # this step's
        say(f"{outcome.status} after {outcome.sim_seconds:.1f} s simulated")
        return {"instruction": instruction, "ok": step_ok(spec, outcome),
                "plan": plan.as_dict(), "outcome": outcome_dict(outcome), "error": ""}

    @staticmethod
    def _show(plan: RewardPlan, say: Say) -> None:
        say(f"{'new task' if plan.new_task else 'edits the running task'}, planned in "
            f"{plan.plan_ms / 1000:.1f} s")
        for line in plan.description.splitlines():
            say(f"  | {line}")
        for line in plan.code.strip().splitlines():
            say(f"  > {line}")
        for note in plan.notes:
            say(f"  note: {note}")


def run_instructions(session: SimSession, planner: RewardPlanner, instructions: Sequence[str], *,
                     seed: int = 0, duration: float | None = None, say: Say = print,
                     on_step: Callable[[LockstepMPC], None] | None = None) -> list[dict]:
    """Every instruction in turn on one controller; stops after a planning failure."""
    run = RewardRun(session, planner, seed=seed, duration=duration, on_step=on_step)
    steps: list[dict] = []
    try:
        for instruction in instructions:
            steps.append(run.handle(instruction, say))
            if steps[-1]["plan"] is None:
                break
    finally:
        run.close()
    return steps
