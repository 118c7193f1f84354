"""``vla_skill(...)`` of policy code in this process (issue 18): the shipped VLA policy acting on
the session's own simulated arm, as a closed-loop rollout (``rollout``) does on its scenes.

``LocalSkillRunner`` is the skill backend's ``VLARunner`` for ``lang2policy run`` (a
``SimCodeExecutor`` with ``vla``). The privilege gate has allowed the call before it runs; the
runner keeps the limits the call carries while the policy acts: the time budget (simulated
seconds), and, on every command before it is sent, the joint speed cap and the workspace box
the gate decided (``args["workspace"]``; the robot's zone ``workspace`` for a call without one)
with the VLA node's limiter (``limits.TargetLimiter``): a step that would take the tool
out of the box is scaled back to its face, so the tool never leaves it. Every ``1 / FPS`` s the
policy sees the cameras and the measured state; the skill succeeds once the task's success
check (``judge``) has held for ``SUCCESS_HOLD`` s. The arm is held where it is when the skill
ends. The policy (and its instruction encoder) loads at the first call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lang2policy.errors import UnknownObjectError
from lang2policy.sandbox.policy_zones import workspace_box
from lang2policy.session.sim import SimSession
from lang2policy.vla.eval.rollout import SUCCESS_HOLD
from lang2policy.vla.sim.judge import judge, start_positions
from lang2policy.vla.skill.limits import SkillLimits, TargetLimiter, ToolKinematics
from lang2policy.vla.skill.message import Box
from lang2policy.vla.skill.parse import parse_skill
from lang2policy.vla.spec.schema import CAMERAS, FPS, JOINT_NAMES


@dataclass
class LocalSkillResult:
    """How one skill ended: success, why, simulated seconds and policy steps."""

    success: bool
    detail: str
    sim_seconds: float
    steps: int


class LocalSkillRunner:
    """The shipped (or ``model_dir``'s) VLA on ``session``'s arm; see the module docstring."""

    def __init__(self, session: SimSession, model_dir: Path | str | None = None) -> None:
        self.session = session
        self.model_dir = model_dir
        self.results: list[LocalSkillResult] = []
        self._policy = None
        self._renderer = None

    def __call__(self, args: dict) -> bool:
        """``VLARunner``: run ``vla_skill(**args)`` (bound arguments, and the gate's
        ``workspace`` box when it decided one); True on success."""
        result = self.run(
            str(args["instruction"]),
            float(args["time_budget_s"]),
            float(args["max_joint_speed"]),
            args.get("workspace"),
        )
        self.results.append(result)
        return result.success

    def run(
        self, instruction: str, budget: float, max_joint_speed: float, workspace=None
    ) -> LocalSkillResult:
        """The skill ``instruction`` names, for at most ``budget`` s of simulated time, the tool
        kept in ``workspace`` (a box with ``min`` and ``max`` corners; None: the robot's)."""
        skill = parse_skill(instruction)
        world, robot = self.session.world, self.session.robot
        present = world.object_names()
        missing = [name for name in skill.task.objects() if name not in present]
        if missing:
            raise UnknownObjectError(
                f"vla_skill({skill.instruction!r}): {', '.join(missing)} not on the table; "
                f"objects present: {present}"
            )
        box = workspace if workspace is not None else workspace_box(world.description)
        limits = SkillLimits(max_joint_speed, Box(tuple(box.min), tuple(box.max)), budget)
        tool = ToolKinematics(self.session.kinematics, JOINT_NAMES)  # as the VLA node's
        limiter = TargetLimiter(tool, limits, 1.0 / robot.control_period)
        policy, renderer = self._loaded()
        policy.reset()
        try:
            return self._loop(policy, renderer, skill, limiter)
        finally:
            self.session.primitives.resume_from_measured()  # not the gripper from before
            self.session.primitives.hold_position()

    def _loaded(self):
        """The policy and the renderer, loaded once (the policy's encoder takes seconds)."""
        if self._policy is None:
            from lang2policy.vla.backends.local import default_model_dir
            from lang2policy.vla.policy.runtime import VLAPolicy
            from lang2policy.vla.sim.frames import frame_renderer

            directory = self.model_dir or default_model_dir()
            self._policy = VLAPolicy.load(directory)
            self._renderer = frame_renderer(self.session.world)
        self._renderer.sync_look()
        return self._policy, self._renderer

    def _loop(self, policy, renderer, skill, limiter: TargetLimiter) -> LocalSkillResult:
        world, robot = self.session.world, self.session.robot
        start, began, budget = start_positions(world, skill.task), world.time, limiter.limits
        substeps = max(1, round(1.0 / (FPS * robot.control_period)))
        done_since, steps, why = None, 0, "not judged yet"
        cameras = getattr(policy, "cameras", CAMERAS)  # only what the policy reads is rendered
        while world.time - began < budget.time_budget_s:
            images = {c: renderer.render(world.data, c) for c in cameras}
            state = robot.get_observation().position
            target = np.asarray(policy.act(images, state, skill.instruction), float)
            self._move_towards(target, substeps, limiter)
            steps += 1
            done, why = judge(world, skill.task, start)
            done_since = (done_since if done_since is not None else world.time) if done else None
            if done_since is not None and world.time - done_since >= SUCCESS_HOLD:
                return self._result(True, why, began, steps)
        spent = f"time budget of {budget.time_budget_s:g} s spent ({why})"
        return self._result(False, spent, began, steps)

    def _move_towards(self, target: np.ndarray, substeps: int, limiter: TargetLimiter) -> None:
        """Towards ``target`` in equal steps over the control periods until the next frame
        (as a rollout moves), each command limited before it is sent: every arm joint's step
        cut to the speed cap, the tool kept in the workspace box (``TargetLimiter``)."""
        robot = self.session.robot
        last = robot.last_command
        command = robot.get_observation().position if last is None else last
        origin = np.asarray(command, float).copy()
        for fraction in np.arange(1, substeps + 1) / substeps:
            wanted = origin + fraction * (target - origin)
            command = limiter.limit(wanted, command).target.astype(float)
            robot.send_action(command)
            robot.sleep(robot.control_period)

    def _result(self, success: bool, detail: str, began: float, steps: int) -> LocalSkillResult:
        return LocalSkillResult(success, detail, self.session.world.time - began, steps)
