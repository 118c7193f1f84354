"""The limits a skill plan runs under (issue 18), and the check of every joint target against
them before the VLA node sends it.

A skill plan has a time budget, a joint speed cap and a workspace, like any other plan.
``resolve_limits`` combines what a start message asks for with the node's defaults (the speed
and box of config/safety.yaml, or the node's parameters): a plan's limits only ever narrow the
defaults. The time budget is the smaller of the family's and the plan's; a speed above the
default is cut to it; the workspace is the part of the plan's box inside the default box (a
plan box that does not overlap it is refused).

``TargetLimiter.limit`` then makes each policy target safe to send, in two steps:

1. the speed cap: each arm joint moves at most ``max_joint_speed * speed_scale / rate`` rad
   from the previous target (the last one sent, or the measured joints for the first target
   and after a hold). The gripper (an opening 0..1, not an angle) is not capped here; the
   safety node limits it.
2. the workspace: the tool centre point (forward kinematics of the robot model,
   ``ToolKinematics``) must not end outside the box. A step whose tool point leaves the box is
   *scaled back* along the step toward the previous target, to the largest fraction (found by
   bisection, within 1/64 of the step) whose tool point stays in; when no fraction does, the
   previous target is sent again, which holds the arm where it is. Scaling rather than holding
   outright keeps the arm sliding along a face of the box instead of freezing a few
   centimetres short of it. When the previous target itself is outside (the arm started out
   of a plan's box), a step may not take the tool point further out: only steps toward the
   box pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.errors import ConfigError
from lang2policy.scene.arm import arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.robot_description import load_robot_description
from lang2policy.vla.skill.message import Box, LimitsRequest, SkillMessageError

BISECTIONS = 6  # a scaled-back step is within 1/64 of the largest fraction in the box


@dataclass(frozen=True)
class SkillLimits:
    """The limits of one skill run: joint speed (rad/s), tool workspace, time budget (s)."""

    max_joint_speed: float
    workspace: Box
    time_budget_s: float | None = None  # None: the family's budget

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_joint_speed) and self.max_joint_speed > 0):
            raise ConfigError(f"max_joint_speed must be > 0 rad/s, got {self.max_joint_speed}")

    def to_dict(self) -> dict:
        """The limits as JSON data, for the status line that says a skill runs."""
        data = {"max_joint_speed": self.max_joint_speed, "workspace": self.workspace.to_dict()}
        if self.time_budget_s is not None:
            data["time_budget_s"] = self.time_budget_s
        return data


def resolve_limits(request: LimitsRequest, defaults: SkillLimits) -> SkillLimits:
    """The limits of a run: ``request`` narrowing ``defaults`` (see the module docstring);
    ``SkillMessageError`` for a workspace that does not overlap the default one."""
    speed = defaults.max_joint_speed
    if request.max_joint_speed is not None:
        speed = min(speed, request.max_joint_speed)
    workspace = defaults.workspace
    if request.workspace is not None:
        inside = request.workspace.intersection(defaults.workspace)
        if inside is None:
            raise SkillMessageError(
                f"limits.workspace {request.workspace.to_dict()} does not overlap the node's "
                f"workspace {defaults.workspace.to_dict()}: the tool could go nowhere"
            )
        workspace = inside
    budget = request.time_budget_s
    if defaults.time_budget_s is not None:
        budget = defaults.time_budget_s if budget is None else min(budget, defaults.time_budget_s)
    return SkillLimits(speed, workspace, budget)


class ToolKinematics:
    """Tool centre point (between the jaws) of the arm joints and its Jacobian, on a scratch
    copy of the robot model: the point the safety node keeps in its workspace."""

    def __init__(self, kinematics: Kinematics, joint_names: tuple[str, ...]) -> None:
        arm = kinematics.arm
        if tuple(joint_names) != tuple(arm.joint_names):
            raise ConfigError(f"joints {joint_names} are not the model's {arm.joint_names}")
        self.kinematics = kinematics
        self.lower, self.upper = arm.lower.copy(), arm.upper.copy()
        self._offset = np.asarray(kinematics.center_offset, float)
        self._jacp = np.zeros((3, kinematics.model.nv))

    @property
    def dof(self) -> int:
        return len(self.lower)

    def point(self, q: np.ndarray) -> np.ndarray:
        """The tool centre point (world frame, m) at arm joints ``q`` (rad)."""
        kinematics = self.kinematics
        kinematics.forward(np.asarray(q, float))
        site = kinematics.arm.ee_site_id
        data = kinematics.scratch
        return data.site_xpos[site] + data.site_xmat[site].reshape(3, 3) @ self._offset

    def jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the tool point, d point / d q: 3 x dof) at arm joints ``q``."""
        kinematics = self.kinematics
        point = self.point(q)
        mujoco.mj_comPos(kinematics.model, kinematics.scratch)
        body = kinematics.model.site_bodyid[kinematics.arm.ee_site_id]
        mujoco.mj_jac(kinematics.model, kinematics.scratch, self._jacp, None, point, body)
        return point, self._jacp[:, kinematics.arm.dof_adr].copy()


def tool_kinematics(robot: str, joint_names: tuple[str, ...]) -> ToolKinematics:
    """``ToolKinematics`` of ``robot`` on the tabletop scene without objects (as the safety
    node builds it), so tool points are in the frame of config/safety.yaml."""
    description = load_robot_description(robot)
    model = compile_scene(build_scene(description, []))
    kinematics = Kinematics(model, description, arm_layout(model, description))
    return ToolKinematics(kinematics, joint_names)


@dataclass(frozen=True)
class LimitedTarget:
    """A target after the limits: ``speed_capped`` / ``workspace_limited`` say what changed."""

    target: np.ndarray
    speed_capped: bool
    workspace_limited: bool


class TargetLimiter:
    """The speed cap and the workspace box on each target (see the module docstring)."""

    def __init__(self, tool: ToolKinematics, limits: SkillLimits, rate: float) -> None:
        self.tool, self.limits, self.rate = tool, limits, rate

    def max_step(self, speed_scale: float = 1.0) -> float:
        """The most (rad) an arm joint may move from one target to the next."""
        return self.limits.max_joint_speed * speed_scale / self.rate

    def limit(
        self, target: np.ndarray, previous: np.ndarray, speed_scale: float = 1.0
    ) -> LimitedTarget:
        """``target`` (arm joints then the gripper) within the limits, from ``previous``."""
        dof = self.tool.dof
        target = np.asarray(target, np.float32).copy()
        previous = np.asarray(previous, np.float32)
        step = self.max_step(speed_scale)
        delta = target[:dof] - previous[:dof]
        capped = bool(np.any(np.abs(delta) > step + 1e-7))
        delta = np.clip(delta, -step, step)
        fraction = self._in_box_fraction(previous[:dof], delta)
        target[:dof] = previous[:dof] + fraction * delta
        return LimitedTarget(target, capped, fraction < 1.0)

    def _in_box_fraction(self, start: np.ndarray, delta: np.ndarray) -> float:
        """The largest fraction of ``delta`` from ``start`` whose tool point is no further
        outside the workspace than ``start``'s (1.0 when the whole step is)."""
        box = self.limits.workspace
        allowed = box.outside(self.tool.point(start)) + 1e-6
        if box.outside(self.tool.point(start + delta)) <= allowed:
            return 1.0
        good, bad = 0.0, 1.0
        for _ in range(BISECTIONS):
            middle = (good + bad) / 2
            if box.outside(self.tool.point(start + middle * delta)) <= allowed:
                good = middle
            else:
                bad = middle
        return good
