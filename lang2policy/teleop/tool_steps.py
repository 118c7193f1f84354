"""Cartesian steps of the tool for keyboard teleoperation, through the project's IK.

``IkToolStepper.step(q, delta)`` moves the end-effector site by ``delta`` (m, world frame) from
arm joints ``q``: a position-only ``solve_ik`` started at ``q`` (the wrist keeps its roll; a
5-joint arm cannot hold every orientation while it translates), accepted only when the solution
is within the IK tolerance and no joint jumps more than ``max_joint_jump`` rad (a restart that
found another arm configuration would swing the arm). Otherwise the step is refused with the
reason, and the target stays where it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lang2policy.control.ik import IKOptions
from lang2policy.control.kinematics import Kinematics
from lang2policy.scene.arm import arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.robot_description import load_robot_description

MAX_JOINT_JUMP = 0.6  # rad: a 1 cm step near a singularity may turn a joint this much at most


@dataclass(frozen=True)
class ToolStep:
    """The arm joints after a step, or None with the reason it was refused."""

    q: np.ndarray | None
    reason: str = ""


class IkToolStepper:
    """Tool steps on ``robot``'s model (the tabletop scene without objects, the safety node's
    frame), plus its joint names and limits for joint-space keys."""

    def __init__(self, robot: str = "so101", max_joint_jump: float = MAX_JOINT_JUMP) -> None:
        description = load_robot_description(robot)
        model = compile_scene(build_scene(description, []))
        self.kinematics = Kinematics(model, description, arm_layout(model, description))
        self.kinematics.options = IKOptions(restarts=0)
        self.max_joint_jump = max_joint_jump

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.kinematics.arm.joint_names

    @property
    def lower(self) -> np.ndarray:
        return self.kinematics.arm.lower.copy()

    @property
    def upper(self) -> np.ndarray:
        return self.kinematics.arm.upper.copy()

    def tool_position(self, q: np.ndarray) -> np.ndarray:
        """The end-effector site (world frame, m) at arm joints ``q``."""
        return self.kinematics.forward(np.asarray(q, float)).position.copy()

    def step(self, q: np.ndarray, delta: np.ndarray) -> ToolStep:
        """Arm joints that move the tool by ``delta`` from ``q`` (see the module docstring)."""
        q = np.clip(np.asarray(q, float), self.lower, self.upper)
        goal = self.tool_position(q) + np.asarray(delta, float)
        result = self.kinematics.solve(goal, None, q)
        if result.position_error > self.kinematics.options.position_tol:
            return ToolStep(
                None,
                f"out of reach: the tool cannot get to {np.round(goal, 3).tolist()} "
                f"(misses by {result.position_error * 1000:.0f} mm)",
            )
        jump = float(np.max(np.abs(result.q - q)))
        if jump > self.max_joint_jump:
            return ToolStep(None, f"refused: that step would swing a joint by {jump:.2f} rad")
        return ToolStep(result.q.copy())
