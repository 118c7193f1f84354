"""``vla_skill(...)`` of policy code in this process (issue 18): the shipped VLA policy acting on
the session's own simulated arm, as a closed-loop rollout (``rollout``) does on its scenes.

``LocalSkillRunner`` is the skill backend's ``VLARunner`` for ``lang2policy run`` (a
``SimCodeExecutor`` with ``vla``). The privilege gate has allowed the call before it runs; the
runner keeps the limits the call carries while the policy acts: the time budget (simulated
seconds), the joint speed cap (every arm joint's step is cut to ``max_joint_speed`` per
second) and the workspace box of the robot (the default policy's zone ``workspace``): a tool
leaving it ends the skill as failed. Every ``1 / FPS`` s the policy sees the cameras and the
measured state; the skill succeeds once the task's success check (``judge``) has held for
``SUCCESS_HOLD`` s. The arm is held where it is when the skill ends. The policy (and its
instruction encoder) loads at the first call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lang2policy.errors import UnknownObjectError
from lang2policy.sandbox.policy_zones import workspace_box
from lang2policy.session.sim import SimSession
from lang2policy.vla.judge import judge, start_positions
from lang2policy.vla.rollout import SUCCESS_HOLD
from lang2policy.vla.schema import CAMERAS, FPS, STATE_NAMES
from lang2policy.vla.skill_parse import parse_skill

GRIPPER = STATE_NAMES.index("gripper")


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
        """``VLARunner``: run ``vla_skill(**args)`` (bound arguments); True on success."""
        result = self.run(
            str(args["instruction"]), float(args["time_budget_s"]), float(args["max_joint_speed"])
        )
        self.results.append(result)
        return result.success

    def run(self, instruction: str, budget: float, max_joint_speed: float) -> LocalSkillResult:
        """The skill ``instruction`` names, for at most ``budget`` s of simulated time."""
        skill = parse_skill(instruction)
        world, robot = self.session.world, self.session.robot
        present = world.object_names()
        missing = [name for name in skill.task.objects() if name not in present]
        if missing:
            raise UnknownObjectError(
                f"vla_skill({skill.instruction!r}): {', '.join(missing)} not on the table; "
                f"objects present: {present}"
            )
        policy, renderer = self._loaded()
        policy.reset()
        try:
            return self._loop(policy, renderer, skill, budget, max_joint_speed)
        finally:
            robot.forget_last_command()
            self.session.primitives.hold_position()

    def _loaded(self):
        """The policy and the renderer, loaded once (the policy's encoder takes seconds)."""
        if self._policy is None:
            from lang2policy.vla.backends.local import default_model_dir
            from lang2policy.vla.frames import frame_renderer
            from lang2policy.vla.policy import VLAPolicy

            directory = self.model_dir or default_model_dir()
            self._policy = VLAPolicy.load(directory)
            self._renderer = frame_renderer(self.session.world)
        self._renderer.sync_look()
        return self._policy, self._renderer

    def _loop(self, policy, renderer, skill, budget: float, speed: float) -> LocalSkillResult:
        world, robot = self.session.world, self.session.robot
        box = workspace_box(world.description)
        start, began = start_positions(world, skill.task), world.time
        substeps = max(1, round(1.0 / (FPS * robot.control_period)))
        done_since, steps, why = None, 0, "not judged yet"
        while world.time - began < budget:
            images = {c: renderer.render(world.data, c) for c in CAMERAS}
            state = robot.get_observation().position
            target = np.asarray(policy.act(images, state, skill.instruction), float)
            self._move_towards(target, substeps, speed)
            steps += 1
            tool = self.session.primitives.tool_point()
            if not box.contains(tuple(float(v) for v in tool)):
                return self._result(False, f"the tool left the workspace at {tool}", began, steps)
            done, why = judge(world, skill.task, start)
            done_since = (done_since if done_since is not None else world.time) if done else None
            if done_since is not None and world.time - done_since >= SUCCESS_HOLD:
                return self._result(True, why, began, steps)
        return self._result(False, f"time budget of {budget:g} s spent ({why})", began, steps)

    def _move_towards(self, target: np.ndarray, substeps: int, speed: float) -> None:
        """Towards ``target`` in equal steps over the control periods until the next frame
        (as a rollout moves), each arm joint's step cut to ``speed`` rad/s."""
        robot = self.session.robot
        last = robot.last_command
        command = robot.get_observation().position if last is None else last
        origin, cap = command.copy(), speed * robot.control_period
        for fraction in np.arange(1, substeps + 1) / substeps:
            step = origin + fraction * (target - origin) - command
            step[:GRIPPER] = np.clip(step[:GRIPPER], -cap, cap)
            command = command + step
            robot.send_action(command)
            robot.sleep(robot.control_period)

    def _result(self, success: bool, detail: str, began: float, steps: int) -> LocalSkillResult:
        return LocalSkillResult(success, detail, self.session.world.time - began, steps)
