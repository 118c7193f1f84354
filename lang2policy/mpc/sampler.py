"""Samplers on ``mujoco.rollout``: predictive sampling and the cross-entropy method.

Both search over spline knots of all actuator controls (joint position targets and the
gripper). Each iteration starts from the previous plan shifted to the current time (warm
start), samples candidates around it, rolls them all out in one call of a reused
``mujoco.rollout.Rollout`` (one ``MjData`` per thread, the GIL released) on the planning model,
scores them with the reward spec and keeps the result as the new nominal plan.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from lang2policy.errors import ConfigError
from lang2policy.mpc import spline
from lang2policy.mpc.cost import total_cost
from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.proposals import Proposals
from lang2policy.mpc.workspace import stay_inside_for
from lang2policy.rewards.spec import RewardSpec

SAMPLERS = ("sampling", "cem")
EXPLORATIONS = ("tool", "joint")
BACKENDS = ("rollout", "python")
_NOISE_SCALES = (1.0, 1.0 / 3.0, 0.1)


@dataclass(frozen=True)
class MPCConfig:
    """Sampler settings; the defaults re-plan well above 10 Hz on 2 cores."""

    sampler: str = "sampling"
    samples: int = 64
    knots: int = 4
    horizon: float = 0.5
    timestep: float = 0.01
    noise: float = 0.03  # std of knot noise, as a fraction of each actuator's range
    exploration: str = "tool"  # "tool": most noise moves the tool in space; "joint": raw
    tool_noise: float = 0.02  # std (m) of the tool displacement per knot ("tool" exploration)
    keep_tilt: bool = False  # "tool" exploration: hold the approach axis while moving
    proposals: bool = True  # add IK-guided candidates toward the spec's tool targets
    gripper_noise: float = 0.3  # std of gripper knot noise, as a fraction of its range
    interpolation: str = "linear"
    elites: int = 8  # CEM only
    min_noise: float = 0.01  # CEM only: floor of the refitted std (fraction of range)
    threads: int = 2
    seed: int = 0
    backend: str = "rollout"  # "python": a plain mj_step loop (the benchmark's baseline)

    def __post_init__(self) -> None:
        checks = [
            (self.sampler in SAMPLERS, f"sampler must be one of {list(SAMPLERS)}"),
            (2 <= self.samples <= 1024, "samples must be in [2, 1024]"),
            (1 <= self.knots <= 16, "knots must be in [1, 16]"),
            (0.05 <= self.horizon <= 5.0, "horizon must be in [0.05, 5] s"),
            (0.0005 <= self.timestep <= 0.05, "timestep must be in [0.0005, 0.05] s"),
            (0.0 < self.noise <= 1.0, "noise must be in (0, 1]"),
            (self.exploration in EXPLORATIONS, f"exploration must be one of {EXPLORATIONS}"),
            (0.0 <= self.tool_noise <= 0.2, "tool_noise must be in [0, 0.2] m"),
            (0.0 <= self.gripper_noise <= 1.0, "gripper_noise must be in [0, 1]"),
            (self.interpolation in spline.INTERPOLATIONS,
             f"interpolation must be one of {list(spline.INTERPOLATIONS)}"),
            (1 <= self.elites <= 256, "elites must be in [1, 256]"),
            (1 <= self.threads <= 64, "threads must be in [1, 64]"),
            (self.backend in BACKENDS, f"backend must be one of {list(BACKENDS)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"MPC config: {message}")

    @property
    def steps(self) -> int:
        return max(1, round(self.horizon / self.timestep))


@dataclass
class ControlPlan:
    """The nominal control spline from ``start`` (sim seconds) and what it was judged on."""

    start: float
    knots: np.ndarray  # [P, nu]
    cost: float
    term_costs: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0  # wall time spent planning it

    def control(self, t: float, config: MPCConfig) -> np.ndarray:
        return spline.evaluate(self.knots, config.horizon, t - self.start, config.interpolation)


class Sampler:
    """One sampler over one planning model; ``improve(spec, start_time)`` runs an iteration
    from the state currently in ``model.data``."""

    def __init__(self, model: PlanningModel, config: MPCConfig | None = None) -> None:
        self.pm = model
        self.config = config or MPCConfig()
        c = self.config
        self.rng = np.random.default_rng(c.seed)
        self.width = model.ctrl_high - model.ctrl_low
        self._rollout = mj_rollout.Rollout(nthread=c.threads)
        self._datas = [mujoco.MjData(model.model) for _ in range(c.threads)]
        self._models = [model.model] * c.samples
        times = np.arange(1, c.steps + 1) * c.timestep
        self._basis = spline.basis(times, c.horizon, c.knots, c.interpolation)
        nstate = model.state_size
        self._states = np.empty((c.samples, c.steps, nstate))
        self._sensors = np.empty((c.samples, c.steps, model.nsensordata))
        self._qpos_index = 1 + model.arm_qpos_adr  # FULLPHYSICS = [time, qpos, qvel, ...]
        self.nominal: ControlPlan | None = None
        self.proposals = Proposals(model) if c.proposals else None
        self.stay_inside = stay_inside_for(model.description.name)
        # Samples cycle through noise scales (1, 1/3, 1/10): coarse ones find the way, fine
        # ones converge on it, so the arm neither stalls far off nor jitters near the goal.
        self._scales = np.resize(np.array(_NOISE_SCALES), c.samples)
        self.base_std = np.full(model.model.nu, c.noise)
        self.base_std[model.arm.gripper_actuator_ids] = c.gripper_noise
        self.base_std *= self.width
        self.std = np.tile(self.base_std, (c.knots, 1))

    def close(self) -> None:
        self._rollout.close()

    def reset(self, ctrl: np.ndarray | None = None, start: float = 0.0) -> None:
        """Forget the plan; the next one starts from holding ``ctrl`` (default: current)."""
        hold = self.pm.data.ctrl.copy() if ctrl is None else np.asarray(ctrl, float)
        self.nominal = ControlPlan(start, np.tile(hold, (self.config.knots, 1)), float("inf"))
        self.std = np.tile(self.base_std, (self.config.knots, 1))

    def improve(self, spec: RewardSpec) -> ControlPlan:
        """One planning iteration from the state in ``self.pm.data``; returns the new plan."""
        began = _time.perf_counter()
        # Loading a state sets qpos only: derive positions and frames once, here, so the
        # tool Jacobian (exploration) and the IK proposals see the state being planned from.
        mujoco.mj_forward(self.pm.model, self.pm.data)
        now = float(self.pm.data.time)
        if self.nominal is None:
            self.reset(start=now)
        c = self.config
        mean = spline.shift(self.nominal.knots, c.horizon, now - self.nominal.start,
                            c.interpolation)
        candidates = self._sample(mean)
        if self.proposals is not None:
            guided = self.proposals.knots(spec, mean, c.horizon)
            if guided:
                candidates[-len(guided):] = guided
        costs, per_term = self._evaluate(candidates, spec)
        if c.sampler == "cem":
            order = np.argsort(costs)[: min(c.elites, c.samples - 1)]
            elite = candidates[order]
            knots = elite.mean(axis=0)
            self.std = np.maximum(elite.std(axis=0), c.min_noise * self.width)
        else:
            order = np.argsort(costs)[:1]
            knots = candidates[order[0]]
        best = int(order[0])
        self.nominal = ControlPlan(
            start=now, knots=knots, cost=float(costs[best]),
            term_costs={k: float(v[best]) for k, v in per_term.items()},
            seconds=_time.perf_counter() - began,
        )
        return self.nominal

    def _sample(self, mean: np.ndarray) -> np.ndarray:
        c = self.config
        std = self.std if c.sampler == "cem" else self.base_std
        noise = self.rng.standard_normal((c.samples, c.knots, mean.shape[-1])) * std
        if c.exploration == "tool":
            noise[..., self.pm.arm.actuator_ids] += self._tool_noise()
        noise *= self._scales[:, None, None]
        noise[0] = 0.0  # the warm-started nominal plan is always a candidate
        return np.clip(mean + noise, self.pm.ctrl_low, self.pm.ctrl_high)

    def _tool_noise(self) -> np.ndarray:
        """Joint offsets ``[K, P, dof]`` that move the tool by Gaussian displacements while
        keeping its approach axis where it is: displacements (3) plus zero tilt (2 rows of the
        rotational Jacobian) through a damped least-squares inverse, at the current state.
        Exploring in space rather than in joints finds reaches and grasps far more often."""
        c = self.config
        pos, rot = np.zeros((3, self.pm.model.nv)), np.zeros((3, self.pm.model.nv))
        mujoco.mj_jacSite(self.pm.model, self.pm.data, pos, rot, self.pm.arm.ee_site_id)
        dofs = self.pm.arm.dof_adr
        j = np.vstack([pos[:, dofs], rot[:2, dofs]]) if c.keep_tilt else pos[:, dofs]
        pinv = j.T @ np.linalg.inv(j @ j.T + 1e-4 * np.eye(len(j)))
        target = np.zeros((c.samples, c.knots, len(j)))
        target[..., :3] = self.rng.standard_normal((c.samples, c.knots, 3)) * c.tool_noise
        return target @ pinv.T

    def rollout(self, knots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Roll out candidate knots ``[K, P, nu]`` from the current state; returns controls
        ``[K, T, nu]`` and sensordata ``[K, T, n]`` (states are kept in ``self._states``)."""
        c = self.config
        controls = np.einsum("tp,kpu->ktu", self._basis, knots)
        initial = np.tile(self.pm.state(), (len(knots), 1))
        if c.backend == "python":
            python_rollout(self.pm.model, self._datas[0], initial, controls,
                           self._states[: len(knots)], self._sensors[: len(knots)])
            return controls, self._sensors[: len(knots)]
        # Island sleeping: whether a body sleeps is kept in MjData, not in the state a rollout
        # starts from, so a sample inherits the sleeping bodies of the one run before it on
        # the same MjData. With the pool's small chunks, which thread ran which samples, and so
        # the plan, varied from run to run (a seeded bench l2r episode succeeded or failed).
        # Fresh MjData and one fixed chunk of consecutive samples per thread make each
        # sample's predecessor the same every time.
        for data in self._datas:
            mujoco.mj_resetData(self.pm.model, data)
        self._rollout.rollout(
            self._models[: len(knots)], self._datas, initial, controls, nstep=c.steps,
            skip_checks=True, state=self._states[: len(knots)],
            sensordata=self._sensors[: len(knots)],
            chunk_size=-(-len(knots) // len(self._datas)),
        )
        return controls, self._sensors[: len(knots)]

    def _evaluate(self, knots: np.ndarray, spec: RewardSpec):
        controls, sensors = self.rollout(knots)
        qpos = self._states[: len(knots)][..., self._qpos_index]
        features = self.pm.features(sensors, controls, qpos, self.config.timestep)
        costs, per_term = total_cost(spec, features)
        if self.stay_inside is not None:
            costs = costs + self.stay_inside.cost(features.tool)
        return costs, per_term


def python_rollout(model: mujoco.MjModel, data: mujoco.MjData, initial: np.ndarray,
                   controls: np.ndarray, states: np.ndarray, sensors: np.ndarray) -> None:
    """The same work as ``mujoco.rollout`` in a plain Python loop of ``mj_step`` calls (one
    thread, the GIL held): the baseline ``lang2policy bench mpc`` compares against."""
    for k in range(len(initial)):
        mujoco.mj_setState(model, data, initial[k], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        data.qacc_warmstart[:] = 0.0  # as mujoco.rollout starts each rollout
        for t in range(controls.shape[1]):
            data.ctrl[:] = controls[k, t]
            mujoco.mj_step(model, data)
            mujoco.mj_getState(model, data, states[k, t], mujoco.mjtState.mjSTATE_FULLPHYSICS)
            sensors[k, t] = data.sensordata
