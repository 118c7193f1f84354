"""A gymnasium environment from a reward spec: the MuJoCo arm, joint-space actions, and the reward
the MPC optimises, computed by the same reward-term code.

Each episode draws a fresh goal from a task family (``families.py``), validates the drawn spec
exactly as a spec from the planner is validated, and starts the arm from a random pose near
home. The reward of a step is ``-sum(weight * measure)`` of the spec's terms at the new state:
the MPC's cost is the time-mean of the same weighted measures over a rollout
(``mpc.cost.total_cost``), so both controllers optimise one definition. The spec's success
conditions (``SuccessTracker``) end the episode: success with a bonus, failure (an
``always_below`` condition broke) with the cost of the remaining steps, so failing early never
pays.

Actions are ``dof`` numbers in [-1, 1]: joint position targets at ``action_scale`` rad around
the *measured* joint positions, plus the gripper opening (0..1 from -1..1) for families that
grasp (a stateless, Markov action: the same observation asks for the
same targets wherever the arm was sent before); a family with a speed limit in its goal has
the offset shrunk to keep the tool under it (``actions.arm_targets``). Targets then move at
most the robot's ``max_joint_speed`` from the previous ones, as the safety node's retiming
makes them move. The gripper keeps its opening. Physics runs at ``SIM_TIMESTEP`` on a copy
of the scene with only the spec's objects (``PlanningModel``), ``control_period`` seconds per step.
"""

from __future__ import annotations

import gymnasium as gym
import mujoco
import numpy as np

from lang2policy.mpc.cost import SuccessTracker, total_cost
from lang2policy.mpc.model import PlanningModel
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.rl.actions import family_targets
from lang2policy.rl.families import Family, table_point
from lang2policy.rl.observation import observation_size, observe
from lang2policy.scene.objects import body_name
from lang2policy.scene.robot_description import RobotDescription, load_robot_description

CONTROL_PERIOD = 0.05  # s per policy step (20 Hz, as SERL's 10 Hz order of magnitude)
SUCCESS_BONUS = 5.0
# Training (end_on_failure=False): what breaking an always-condition costs once, about a whole
# episode's cost; the broken term's own weighted cost alone did not stop a policy from breaking
# move_slowly's speed limit in its first step
FAILURE_PENALTY = 50.0
START_SPREAD = 0.5  # rad: start poses are home +- this, per joint (half the episodes)
# s: physics step of training. The world steps 0.002 s (sim/scenes/tabletop.xml) and the MPC
# plans on 0.01 s; 0.005 s keeps the arm's servo dynamics (what a policy learns) and trains
# 2.5x faster than 0.002 s (mj_step was 63 % of a step's time)
SIM_TIMESTEP = 0.005
SETTLE_SECONDS = 0.3
OBJECT_SPACING = 0.08  # m: the least distance between two objects' centres at an episode's start


class RewardEnv(gym.Env):
    """One arm, one family of reward specs, a fresh goal every episode."""

    def __init__(self, family: Family, robot: str | RobotDescription = "so101",
                 seed: int | None = None, end_on_failure: bool = True,
                 near_start: float | None = None) -> None:
        """``end_on_failure=False`` (training) lets an episode run on after an
        ``always_below`` condition broke: its status stays "failed", no success can follow,
        and the broken term's weighted cost keeps teaching (ending it at once, with the
        cost of the steps left, made exploration in move_slowly fail at the first step).
        ``near_start`` overrides the family's share of episodes starting above the object
        (0 for evaluation and distillation: the task from the start, as a user gives it)."""
        self.family = family
        self.end_on_failure = end_on_failure
        self.near_start = family.near_start if near_start is None else near_start
        self.description = (robot if isinstance(robot, RobotDescription)
                            else load_robot_description(robot))
        self.pm = PlanningModel(self.description, family.objects, timestep=SIM_TIMESTEP)
        self.arm = self.pm.arm
        self.substeps = round(CONTROL_PERIOD / SIM_TIMESTEP)
        size = observation_size(self.arm.dof, family.goal_size, len(family.objects))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (family.action_size(self.arm.dof),),
                                           np.float32)
        self.max_steps = round(family.episode_seconds / CONTROL_PERIOD)
        self._rng = np.random.default_rng(seed)
        self._dof_adr = np.asarray(self.arm.dof_adr)
        self.spec: RewardSpec | None = None

    # ----------------------------------------------------------------- episodes
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        drawn = (options or {}).get("spec") or self.family.draw(self.description, self._rng)
        self.set_spec(validate_spec(drawn, self.family.objects).spec)
        mujoco.mj_resetData(self.pm.model, self.pm.data)
        self._place_objects()
        self._start_arm()
        if self.family.objects and self._rng.random() < self.near_start:
            self._start_above(self.family.objects[0])
        self._settle()
        self.steps, self._broken = 0, False
        features = self.pm.features_now()
        self.last_cost = self._cost(features)
        return self._observe(features), {"goal": self.goal.copy()}

    def set_spec(self, spec: RewardSpec) -> None:
        """Swap the objective mid-episode (a correction); the goal changes at the next step."""
        goal = self.family.goal(spec)
        if goal is None:
            raise ValueError(f"spec '{spec.task}' is not of the family '{self.family.name}'")
        self.spec, self.goal = spec, goal
        self.tracker = SuccessTracker(spec)

    def _start_arm(self) -> None:
        """A random start pose near home, above the table (resampled until it is)."""
        d, arm = self.pm.data, self.arm
        for _ in range(100):
            spread = START_SPREAD if self._rng.random() < 0.5 else START_SPREAD / 3
            q = arm.home + self._rng.uniform(-spread, spread, arm.dof)
            q = np.clip(q, arm.lower, arm.upper)
            d.qpos[arm.qpos_adr] = q
            d.qpos[arm.gripper_qpos_adr] = arm.gripper_open
            d.ctrl[arm.actuator_ids] = q
            d.ctrl[arm.gripper_actuator_ids] = arm.gripper_open
            features = self.pm.features_now()
            if features.clearance_points[..., 2].min() > 0.02:
                return

    def _start_above(self, name: str) -> None:
        """The tool 2-6 cm above object ``name`` (IK from home), gripper open."""
        from lang2policy.control.ik import solve_ik

        d, arm = self.pm.data, self.arm
        target = d.xpos[self.pm.model.body(body_name(name)).id].copy()
        target += (*self._rng.uniform(-0.01, 0.01, 2), self._rng.uniform(0.02, 0.06))
        scratch = mujoco.MjData(self.pm.model)
        scratch.qpos[:] = d.qpos
        site = d.site_xmat[arm.ee_site_id].reshape(3, 3)
        target -= site @ np.asarray(self.description.grasp.center_offset, float)
        q = solve_ik(self.pm.model, scratch, arm, target, None, arm.home).q
        d.qpos[arm.qpos_adr] = q
        d.ctrl[arm.actuator_ids] = q
        mujoco.mj_forward(self.pm.model, d)

    def _settle(self) -> None:
        """Hold the start targets for ``SETTLE_SECONDS`` so the episode starts at rest (a
        servo holding against gravity sags a little first: without this the first step of
        "move slowly" could already break its speed limit); the clock then starts at 0."""
        mujoco.mj_step(self.pm.model, self.pm.data, round(SETTLE_SECONDS / SIM_TIMESTEP))
        self.pm.data.time = 0.0

    def _place_objects(self) -> None:
        """Each object at rest on a random workspace point, at a random heading, at least
        ``OBJECT_SPACING`` from the others (a block drawn inside a bowl is no task)."""
        placed: list[tuple[float, float]] = []
        for name in self.family.objects:
            for _ in range(100):
                x, y = table_point(self.description, self._rng)
                if all(np.hypot(x - u, y - v) >= OBJECT_SPACING for u, v in placed):
                    break
            placed.append((x, y))
            yaw = self._rng.uniform(-np.pi, np.pi)
            self.pm.set_object_pose(name, (x, y, self.pm.rest_z[name] + 1e-4),
                                    (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)))
        mujoco.mj_forward(self.pm.model, self.pm.data)

    # ----------------------------------------------------------------- stepping
    def step(self, action):
        a = np.clip(np.asarray(action, float).reshape(self.action_space.shape), -1.0, 1.0)
        if self.family.gripper:
            opening = (a[-1] + 1.0) / 2.0
            self.pm.data.ctrl[self.arm.gripper_actuator_ids] = self.arm.gripper_ctrl(opening)
        return self.step_targets(family_targets(self.pm, self.family, self.goal, a,
                                                self.family.action_scale))

    def step_targets(self, targets: np.ndarray):
        """One control period toward absolute arm joint ``targets`` (rad, clipped to the joint
        limits): what ``step`` does after turning its action into targets. Lets another
        controller (the MPC in ``bench rl``) drive the same episode."""
        d, arm = self.pm.data, self.arm
        targets = np.clip(np.asarray(targets, float).reshape(arm.dof), arm.lower, arm.upper)
        # The safety node retimes commands so targets move at most max_joint_speed: train
        # under the same limit the graph enforces, or the policy learns moves it never gets.
        previous = d.ctrl[arm.actuator_ids]
        reach = self.description.max_joint_speed * CONTROL_PERIOD
        d.ctrl[arm.actuator_ids] = np.clip(targets, previous - reach, previous + reach)
        mujoco.mj_step(self.pm.model, d, self.substeps)
        self.steps += 1
        features = self.pm.features_now()
        cost = self._cost(features)
        status = self.tracker.update(d.time, features)
        reward = -cost
        if status == "success":
            reward += SUCCESS_BONUS
        elif status == "failed" and self.end_on_failure:
            reward -= cost * (self.max_steps - self.steps)
        elif status == "failed" and not self._broken:  # the step that broke the condition
            reward -= FAILURE_PENALTY
        self._broken = status == "failed"
        ended = status == "success" or (status == "failed" and self.end_on_failure)
        truncated = not ended and self.steps >= self.max_steps
        info = {"status": "timeout" if truncated and status == "running" else status,
                "cost": cost, "is_success": status == "success"}
        return self._observe(features), float(reward), ended, truncated, info

    def _cost(self, features) -> float:
        total, _ = total_cost(self.spec, features)
        return float(total[0])

    def _observe(self, features) -> np.ndarray:
        return observe(features, self.pm.data.qvel[self._dof_adr], self.goal,
                       self.spec.objects())
