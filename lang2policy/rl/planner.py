"""The RL backend of the real-time controller: shipped policies where they serve, the MPC elsewhere.

``PolicyPlanner`` has the sampler's interface (``improve(spec)``, ``reset``, ``close``,
``nominal``), so ``RealtimeMPC`` runs it unchanged: measured states in, task tracking,
timeouts, status and the worker process all stay as they are. For each planning pass it looks
up the spec's family (``families.family_of``); with a policy for that family it builds the
observation from the measured state in the planning model, asks the policy for an action every
``control_period`` of measured time (the rate it was trained at; in between the last targets
are held) and returns a plan that holds those joint targets. The goal is read from the spec on
every pass, so an edit ("higher") acts at the next control cycle. A spec no policy serves is
planned by the MPC ``Sampler``, as without this backend.
"""

from __future__ import annotations

import time as _time
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.sampler import ControlPlan, MPCConfig, Sampler
from lang2policy.paths import share_dir
from lang2policy.rewards.spec import RewardSpec
from lang2policy.rl.actions import family_targets
from lang2policy.rl.families import FAMILIES, family_of
from lang2policy.rl.observation import observe
from lang2policy.rl.policy_file import CONFIG_FILE, MLPPolicy, load_policy

SHIPPED_PREFIX = "rl-"  # models/rl-<family>-<robot>: the policies shipped in the repository
# s from a measured state to its targets acting on the arm in the ROS graph: the control timer,
# the trajectory's first point and the robot's tick (~0.05 s). Policies are trained without such
# a delay; in the graph the arm then circled 1-4 cm around a reach goal. Predicting the state this
# far ahead under the targets being commanded removed it (a simulated 0.02-0.08 s delay: 3-11 mm
# from the goal instead of 18-43 mm); over-predicting costs less than under-predicting.
LEAD = 0.06


def shipped_policies(robot: str) -> list[Path]:
    """The shipped policy directories for ``robot`` (``models/rl-*-<robot>``), sorted."""
    root = share_dir() / "models"
    found = [p for p in root.glob(f"{SHIPPED_PREFIX}*-{robot}") if (p / CONFIG_FILE).is_file()]
    # a distilled policy (rl-<family>-distilled-<robot>) serves only where no RL one does:
    # it comes first, so the RL policy of the same family, loaded later, replaces it
    return sorted(found, key=lambda p: ("-distilled-" not in p.name, p.name))


def load_policies(directories: Sequence[str | Path], robot: str) -> dict[str, MLPPolicy]:
    """Policies by family from model directories (none given: the shipped ones for
    ``robot``); a policy for another robot, or for a family that does not exist, is an error."""
    policies: dict[str, MLPPolicy] = {}
    for directory in directories or shipped_policies(robot):
        policy = load_policy(directory)
        if policy.robot != robot:
            raise ConfigError(f"RL policy {directory} is for the {policy.robot}, not the {robot}")
        if policy.family not in FAMILIES:
            raise ConfigError(f"RL policy {directory} serves an unknown family "
                              f"'{policy.family}'; valid families: {list(FAMILIES)}")
        _check_layout(policy, directory, robot)
        policies[policy.family] = policy
    return policies


def _check_layout(policy: MLPPolicy, directory, robot: str) -> None:
    """The policy's input and output sizes are its family's on ``robot`` today (a policy
    trained before a layout change would read the wrong numbers, or act on the wrong ones)."""
    from lang2policy.rl.observation import observation_size
    from lang2policy.scene.robot_description import load_robot_description

    fam = FAMILIES[policy.family]
    dof = len(load_robot_description(robot).home)
    sizes = (observation_size(dof, fam.goal_size, len(fam.objects)), fam.action_size(dof))
    if (policy.observation_size, policy.action_size) != sizes:
        raise ConfigError(f"RL policy {directory} reads {policy.observation_size} numbers and "
                          f"writes {policy.action_size}; the {fam.name} family on the {robot} "
                          f"has {sizes[0]} and {sizes[1]}: retrain it with 'lang2policy train'")


def policy_sampler(pm: PlanningModel, config: MPCConfig, robot: str,
                   policies: Sequence[str] = (), lead: float = 0.0) -> PolicyPlanner:
    """``RealtimeMPC``'s ``sampler_factory`` for the RL backend (see ``MPCFront``)."""
    return PolicyPlanner(pm, config, load_policies(policies, robot), lead)


class PolicyPlanner:
    """A ``Sampler`` stand-in that runs a family's policy, else the MPC sampler."""

    def __init__(self, model: PlanningModel, config: MPCConfig,
                 policies: dict[str, MLPPolicy], lead: float = 0.0) -> None:
        """``lead``: seconds the policy looks ahead of the measured state (see ``LEAD``)."""
        self.pm, self.config, self.policies = model, config, policies
        self.lead = lead
        self.mpc = Sampler(model, config)
        self.nominal: ControlPlan | None = None
        self.backend = "idle"  # "rl:<family>" or "mpc" for the last pass (status lines)
        self._last: tuple[float, np.ndarray] | None = None  # (slot, targets) of the action
        self._gripper: float | None = None  # the gripper control a grasping policy set
        self._dof_adr = np.asarray(model.arm.dof_adr)

    def close(self) -> None:
        self.mpc.close()

    def reset(self, ctrl: np.ndarray | None = None, start: float = 0.0) -> None:
        """Forget the plan (both backends); the next pass starts from ``ctrl``."""
        self.mpc.reset(ctrl, start)
        self.nominal = self.mpc.nominal
        self._last, self._gripper = None, None

    def end_hold(self, ctrl: np.ndarray) -> np.ndarray:
        """The controls to hold when a task ends: after a policy, the arm joints where they
        were measured last (a policy's last targets can aim a step past the goal, and holding
        them moved the arm up to 3 cm off it), the gripper as commanded; after the MPC,
        ``ctrl`` unchanged."""
        if not self.backend.startswith("rl"):
            return ctrl
        held = np.array(ctrl, float)
        held[self.pm.arm.actuator_ids] = self.pm.data.qpos[self.pm.arm.qpos_adr]
        return held

    def improve(self, spec: RewardSpec) -> ControlPlan:
        """One pass from the state in ``pm.data``: the policy's targets or an MPC iteration."""
        served = family_of(spec)
        policy = self.policies.get(served[0].name) if served else None
        if policy is None:
            if self.backend.startswith("rl"):  # the MPC takes over from where the arm is
                self.mpc.reset(ctrl=self.pm.data.ctrl.copy(), start=float(self.pm.data.time))
            self.backend = "mpc"
            self.nominal = self.mpc.improve(spec)
            return self.nominal
        self.backend = f"rl:{policy.family}"
        self.nominal = self._policy_plan(policy, served[1], spec.objects())
        return self.nominal

    def _policy_plan(self, policy: MLPPolicy, goal: np.ndarray,
                     objects: Sequence[str]) -> ControlPlan:
        began = _time.perf_counter()
        mujoco.mj_forward(self.pm.model, self.pm.data)
        now = float(self.pm.data.time)
        ctrl = self.pm.data.ctrl.copy()
        if self._last is None or now - self._last[0] >= policy.control_period - 1e-6 \
                or now < self._last[0]:
            self._look_ahead()
            features = self.pm.features_now(forward=False)
            action = policy.act(observe(features, self.pm.data.qvel[self._dof_adr], goal,
                                        objects))
            arm, fam = self.pm.arm, FAMILIES[policy.family]
            if fam.gripper:  # a grasping family also sets the gripper, its last number
                self._gripper = arm.gripper_ctrl((float(action[-1]) + 1.0) / 2.0)
            targets = family_targets(self.pm, fam, goal, action, policy.action_scale)
            # as in training (and as the safety node retimes): targets move at most
            # max_joint_speed from the commanded ones
            previous = ctrl[arm.actuator_ids]
            reach = self.pm.description.max_joint_speed * policy.control_period
            self._last = (self._slot(now, policy.control_period),
                          np.clip(targets, previous - reach, previous + reach))
        ctrl[self.pm.arm.actuator_ids] = self._last[1]
        if self._gripper is not None:
            ctrl[self.pm.arm.gripper_actuator_ids] = self._gripper
        knots = np.tile(np.clip(ctrl, self.pm.ctrl_low, self.pm.ctrl_high),
                        (self.config.knots, 1))
        return ControlPlan(start=now, knots=knots, cost=float("nan"),
                           seconds=_time.perf_counter() - began)

    def _slot(self, now: float, period: float) -> float:
        """The time an action taken at ``now`` stands for: one period after the last one's
        while on time, so states every 0.02 s still give actions every 0.05 s on average (not
        every 0.06 s); ``now`` after a gap or a clock jump."""
        if self._last is not None and 0.0 <= now - self._last[0] < 2 * period:
            return self._last[0] + period
        return now

    def _look_ahead(self) -> None:
        """``pm.data`` ``lead`` s on under the commanded targets (its time kept): the state
        the policy's new targets will meet on the arm."""
        if self.lead > 0.0:
            model, data = self.pm.model, self.pm.data
            now = data.time
            mujoco.mj_step(model, data, max(1, round(self.lead / model.opt.timestep)))
            data.time = now
            mujoco.mj_forward(model, data)  # positions of bodies and sites at the new state


BACKENDS = ("mpc", "rl")


def backend_settings(backend: str, robot: str, policies: str = "", lead: float = LEAD) -> dict:
    """``MPCFront`` keyword arguments for a controller backend: ``mpc`` (the sampler alone) or
    ``rl`` (policies where a family is served, the MPC elsewhere). ``policies``: comma-separated
    model directories ("" = the shipped ones); ``lead``: the command path's delay the policies
    look ahead by (0 where targets act at once, as in lockstep episodes). Policies are loaded
    here once, so a bad file or an empty set is a ``ConfigError`` at start-up, not in the
    planning process."""
    if backend not in BACKENDS:
        raise ConfigError(f"controller backend {backend!r} is not one of {list(BACKENDS)}")
    if backend == "mpc":
        return {}
    directories = [p.strip() for p in policies.split(",") if p.strip()]
    loaded = load_policies(directories, robot)
    if not loaded:
        raise ConfigError(f"backend 'rl' found no policy for the {robot}: none given and no "
                          f"shipped models/{SHIPPED_PREFIX}*-{robot}")
    paths = [str(Path(p).resolve()) for p in directories or shipped_policies(robot)]
    return {"sampler_factory": "lang2policy.rl.planner:policy_sampler",
            "sampler_options": {"robot": robot, "policies": paths, "lead": lead},
            "families": sorted(loaded)}
