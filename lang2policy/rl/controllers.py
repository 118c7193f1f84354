"""The controllers an RL-family episode can be driven by, and the one episode runner.

A controller steps a ``RewardEnv`` once per control period, so every controller runs the same
physics, the same spec and the same success rule from the same seeded start:

* ``PolicyController``: an ``MLPPolicy`` (PPO or distilled) through ``RewardEnv.step``, as in
  training;
* ``MPCController``: the sampler re-planning every control period, warm-started, on its own
  ``PlanningModel`` (the MPC's timestep) loaded with a copy of the env's physics state; the
  plan's arm controls one control period ahead go to ``RewardEnv.step_targets`` (and its
  gripper control to the gripper, for families that grasp).

``run_episode`` measures every controller in one unit (``evaluate`` for a model card, ``bench
rl`` side by side): control cost is the mean squared (target - measured joints) / the family's
``action_scale``, whatever the action is made of.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import mujoco
import numpy as np

from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.sampler import MPCConfig, Sampler
from lang2policy.rl.env import CONTROL_PERIOD, RewardEnv
from lang2policy.rl.policy_file import MLPPolicy

FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS


@dataclass
class EpisodeResult:
    """One episode of one backend; ``goal`` is the family's goal vector of the seed."""

    seed: int
    status: str
    seconds: float  # time to success, or the episode's length
    smoothness: float  # mean |change of joint targets| per step (rad)
    control_cost: float  # mean squared (target - measured q) / the action scale
    wall_seconds: float
    goal: list[float] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status == "success"


class PolicyController:
    """A numpy policy's action for the observation, stepped as in training."""

    def __init__(self, policy: MLPPolicy) -> None:
        self.policy = policy

    def start(self, env: RewardEnv) -> None:
        """Nothing to reset: the policy is stateless."""

    def step(self, env: RewardEnv, observation: np.ndarray):
        return env.step(self.policy.act(observation))

    def close(self) -> None:
        """Nothing to release."""


class MPCController:
    """The sampler on a planning copy of the env's scene, re-planning every control period."""

    def __init__(self, env: RewardEnv, config: MPCConfig) -> None:
        self.config = config
        self.sampler: Sampler | None = None
        self._build(env)

    def _build(self, env: RewardEnv) -> None:
        """A planning model of the env's robot and objects at the MPC's timestep (the env may
        change its objects between episodes)."""
        if self.sampler is not None:
            self.sampler.close()
        self.pm = PlanningModel(env.description, env.pm.object_names, timestep=self.config.timestep)
        if self.pm.state_size != env.pm.state_size:
            raise ValueError(f"the planning model's state ({self.pm.state_size}) differs from "
                             f"the env's ({env.pm.state_size})")
        self.sampler = Sampler(self.pm, self.config)
        self._state = np.empty(env.pm.state_size)

    def load(self, env: RewardEnv) -> None:
        """Copy the env's physics state and controls into the planning model."""
        mujoco.mj_getState(env.pm.model, env.pm.data, self._state, FULLPHYSICS)
        mujoco.mj_setState(self.pm.model, self.pm.data, self._state, FULLPHYSICS)
        self.pm.data.ctrl[:] = env.pm.data.ctrl

    def start(self, env: RewardEnv) -> None:
        """A fresh plan for a new episode: hold the env's start controls."""
        if self.pm.object_names != env.pm.object_names:
            self._build(env)
        self.load(env)
        self.sampler.rng = np.random.default_rng(self.config.seed)
        self.sampler.reset(ctrl=env.pm.data.ctrl.copy(), start=float(env.pm.data.time))

    def plan_ahead(self, env: RewardEnv) -> np.ndarray:
        """One iteration from the env's state; the plan's controls one control period on."""
        self.load(env)
        plan = self.sampler.improve(env.spec)
        return plan.control(float(env.pm.data.time) + CONTROL_PERIOD, self.config)

    def step(self, env: RewardEnv, observation: np.ndarray):
        ahead = self.plan_ahead(env)
        if env.family.gripper:  # the env holds the gripper otherwise
            ids = env.arm.gripper_actuator_ids
            env.pm.data.ctrl[ids] = ahead[ids]
        return env.step_targets(ahead[env.arm.actuator_ids])

    def close(self) -> None:
        self.sampler.close()


def run_episode(env: RewardEnv, controller, seed: int,
                frame: Callable[[RewardEnv], None] | None = None) -> EpisodeResult:
    """One episode of ``controller`` in ``env`` from ``seed`` (the env's own reset);
    ``frame`` sees the env after every step (a video)."""
    began = time.perf_counter()
    obs, info = env.reset(seed=seed)
    controller.start(env)
    arm = env.arm
    targets, offsets = [], []
    status = "running"
    while status == "running":
        measured = env.pm.data.qpos[arm.qpos_adr].copy()
        obs, _, terminated, truncated, step_info = controller.step(env, obs)
        applied = env.pm.data.ctrl[arm.actuator_ids].copy()
        targets.append(applied)
        offsets.append((applied - measured) / env.family.action_scale)
        status = step_info["status"] if terminated or truncated else "running"
        if frame is not None:
            frame(env)
    steps = np.diff(np.array(targets), axis=0) if len(targets) > 1 else np.zeros((1, 1))
    return EpisodeResult(
        seed, status, round(len(targets) * CONTROL_PERIOD, 2),
        round(float(np.abs(steps).mean()), 5), round(float(np.mean(np.square(offsets))), 4),
        round(time.perf_counter() - began, 3), [round(float(v), 5) for v in info["goal"]])


def summarise(results: list[EpisodeResult]) -> dict:
    """Success k/N and the means of the other figures (time to success over successes only)."""
    wins = [r.seconds for r in results if r.success]
    return {
        "episodes": len(results), "successes": len(wins),
        "success_rate": round(len(wins) / max(1, len(results)), 3),
        "seconds_to_success": round(float(np.mean(wins)), 2) if wins else None,
        "smoothness": round(float(np.mean([r.smoothness for r in results])), 5),
        "control_cost": round(float(np.mean([r.control_cost for r in results])), 4),
        "wall_seconds": round(float(np.mean([r.wall_seconds for r in results])), 3),
        "runs": [asdict(r) for r in results],
    }
