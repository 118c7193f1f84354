"""Check before moving: a program runs first on a simulated copy of the scene as it is now.

``DryRun.run(code, world)`` copies the arm's joints and every object's pose from ``world`` (the
simulation itself, or the graph's mirror of the real arm) into a private ``SimSession`` of the
same robot and layout, runs the program there through a sandbox runner with the same privilege
policy, and returns the outcome and the copy's world: a program that fails, or does not reach
its goal there, never moves the real arm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import mujoco

from lang2policy.sandbox.outcome import PlanOutcome
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.process import ChildProcess
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.backend import SimSkillBackend


class DryRun:
    """A private simulated copy of a scene, re-synced before each program it runs."""

    def __init__(
        self,
        policy: PrivilegePolicy,
        limits: SandboxLimits | None = None,
        start_child: Callable[[int], ChildProcess] = ChildProcess,
    ) -> None:
        self.policy, self.limits, self.start_child = policy, limits, start_child
        self._copy: SimSession | None = None
        self._lock = threading.Lock()  # a start-up rehearsal may overlap a first instruction

    def run(self, code: str, world) -> tuple[PlanOutcome, object]:
        """(the outcome of ``code`` on a copy of ``world``, the copy's world afterwards)."""
        with self._lock:
            session = self._synced(world)
            return self._runner(session).run(code), session.world

    def rehearse(self, robot: str, layout: str) -> PlanOutcome:
        """Build the copy for ``robot`` on ``layout`` and run one pick-and-place on it (a seeded
        scene of its own), so that the first instruction does not pay what a first run costs:
        the model compiled, the sandbox started, the motion code's first use (issue 16: 3.2 s
        for the first check on a copy against 0.8 s for the next, in the graph)."""
        with self._lock:
            copy = self._session(robot, layout)
            names = copy.reset(0)
            block = next((n for n in names if n.endswith("block")), None)
            bowl = next((n for n in names if n.endswith("bowl")), None)
            code = f"put_first_on_second({block!r}, {bowl!r})" if block and bowl else "pass"
            return self._runner(copy).run(code)

    def _runner(self, copy: SimSession) -> SandboxRunner:
        runner = SandboxRunner(SimSkillBackend(copy), self.policy, limits=self.limits)
        runner.start_child = self.start_child
        return runner

    def _session(self, robot: str, layout: str) -> SimSession:
        """The copy for ``robot`` on ``layout`` (a new one when either changed)."""
        copy = self._copy
        if copy is None or (copy.world.description.name, copy.world.layout.name) != (robot, layout):
            copy = self._copy = SimSession(robot, layout)
        return copy

    def _synced(self, world) -> SimSession:
        copy = self._session(world.description.name, world.layout.name)
        target = copy.world
        target.data.qpos[:] = world.data.qpos
        target.data.qvel[:] = 0.0
        target.present = list(world.present)
        mujoco.mj_forward(target.model, target.data)
        target.set_arm_targets(target.arm_qpos(), target.gripper_opening())
        copy.robot.forget_last_command()
        copy.reset_primitives()
        return copy
