"""Check before moving: a program runs first on a simulated copy of the scene as it is now.

``DryRun.run(code, world)`` copies the arm's joints and every object's pose from ``world`` (the
simulation itself, or the graph's mirror of the real arm) into a private ``SimSession`` of the
same robot and layout, runs the program there through a sandbox runner with the same privilege
policy, and returns the outcome and the copy's world: a program that fails, or does not reach
its goal there, never moves the real arm.
"""

from __future__ import annotations

import mujoco

from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend


class DryRun:
    """A private simulated copy of a scene, re-synced before each program it runs."""

    def __init__(self, policy: PrivilegePolicy, limits: SandboxLimits | None = None) -> None:
        self.policy, self.limits = policy, limits
        self._copy: SimSession | None = None

    def run(self, code: str, world) -> tuple[PlanOutcome, object]:
        """(the outcome of ``code`` on a copy of ``world``, the copy's world afterwards)."""
        session = self._synced(world)
        runner = SandboxRunner(SimSkillBackend(session), self.policy, limits=self.limits)
        return runner.run(code), session.world

    def _synced(self, world) -> SimSession:
        robot, layout = world.description.name, world.layout.name
        copy = self._copy
        if copy is None or (copy.world.description.name, copy.world.layout.name) != (robot, layout):
            copy = self._copy = SimSession(robot, layout)
        target = copy.world
        target.data.qpos[:] = world.data.qpos
        target.data.qvel[:] = 0.0
        target.present = list(world.present)
        mujoco.mj_forward(target.model, target.data)
        target.set_arm_targets(target.arm_qpos(), target.gripper_opening())
        copy.robot.forget_last_command()
        copy.reset_primitives()
        return copy
