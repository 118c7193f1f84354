"""Run a reward spec on a simulated ``World`` with the MPC in lockstep with simulated time.

Lockstep (plan, then simulate ``replan_period`` while the plan's spline drives the joints at the
control rate) makes episodes reproducible under a seed and independent of machine load, which
is what benchmarks and tests need. The real-time loop for a live robot is ``realtime.py``.
A ``sampler_factory`` (as ``RealtimeMPC`` takes it) plans instead of the MPC ``Sampler``: the RL
backend runs here unchanged, its policy queried every ``replan_period``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lang2policy.mpc.cost import SuccessTracker, measures
from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.sampler import MPCConfig, Sampler
from lang2policy.rewards.spec import RewardSpec


@dataclass
class EpisodeOutcome:
    status: str  # "success", "failed" (an always-condition broke) or "timeout"
    sim_seconds: float
    iterations: int
    plan_ms: float  # mean wall time of one planning iteration
    final: dict[str, float] = field(default_factory=dict)  # each term's measure at the end
    reason: str = ""
    backend: str = "mpc"  # what planned the last step: "mpc" or "rl:<family>"

    @property
    def success(self) -> bool:
        return self.status == "success"


def build_sampler(pm: PlanningModel, config: MPCConfig, factory: str = "",
                  options: Mapping | None = None):
    """The MPC ``Sampler``, or what ``factory`` ("module:function", called as
    ``function(pm, config, **options)``) builds with the same interface."""
    if not factory:
        return Sampler(pm, config)
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)(pm, config, **dict(options or {}))


class LockstepMPC:
    """MPC driving a simulated world; ``set_spec`` may be called between any two steps."""

    def __init__(self, world, spec: RewardSpec, config: MPCConfig | None = None,
                 replan_period: float = 0.1, control_period: float = 0.02,
                 judge: RewardSpec | None = None, sampler_factory: str = "",
                 sampler_options: Mapping | None = None) -> None:
        """``judge``: a spec whose success conditions decide the episode instead of
        ``spec``'s (benchmarks judge LLM specs by the task's own rule). ``sampler_factory``
        and ``sampler_options``: see ``build_sampler`` (the RL backend:
        ``lang2policy.rl.planner:policy_sampler``)."""
        self.world = world
        self.config = config or MPCConfig()
        self.pm = PlanningModel(world.description, world.present, self.config.timestep)
        self.sampler = build_sampler(self.pm, self.config, sampler_factory, sampler_options)
        self.replan_period = replan_period
        self.control_period = control_period
        self.iterations = 0
        self._plan_seconds = 0.0
        self.judge = judge
        self.set_spec(spec)
        self.pm.load_world(world)
        self.sampler.reset(start=world.time)

    def set_spec(self, spec: RewardSpec) -> None:
        """Swap the objective; the warm-started plan carries over (no stall, no reset)."""
        self.spec = spec
        self.tracker = SuccessTracker(self.judge or spec)

    @property
    def backend(self) -> str:
        """What planned the last step: "mpc", or "rl:<family>" for a policy."""
        return getattr(self.sampler, "backend", "mpc")

    def close(self) -> None:
        self.sampler.close()

    def step(self) -> str:
        """Plan once, then simulate one re-planning period; returns the tracker's status."""
        self.pm.load_world(self.world)
        plan = self.sampler.improve(self.spec)
        self.iterations += 1
        self._plan_seconds += plan.seconds
        status = "running"
        end = self.world.time + self.replan_period
        while self.world.time < end - 1e-9 and status == "running":
            ctrl = plan.control(self.world.time, self.config)
            self.world.data.ctrl[: self.pm.model.nu] = ctrl
            self.world.step_seconds(self.control_period)
            status = self.tracker.update(self.world.time, self.measure_now())
        return status

    def measure_now(self):
        self.pm.load_world(self.world)
        return self.pm.features_now()

    def final_measures(self) -> dict[str, float]:
        judged = self.judge or self.spec
        return {k: float(np.ravel(v)[0]) for k, v in measures(judged, self.measure_now()).items()}

    def run(self, on_step: Callable[[LockstepMPC], None] | None = None) -> EpisodeOutcome:
        start = self.world.time
        status = "running"
        while status == "running" and self.world.time - start < self.spec.duration - 1e-9:
            status = self.step()
            if on_step is not None:
                on_step(self)
        return EpisodeOutcome(
            status=status if status != "running" else "timeout",
            sim_seconds=self.world.time - start,
            iterations=self.iterations,
            plan_ms=1000 * self._plan_seconds / max(1, self.iterations),
            final=self.final_measures(),
            reason=self.tracker.broken,
            backend=self.backend,
        )

