"""The action space of a robot (arm joints by name + a normalised gripper opening) mapped to a
planning model's actuator controls and joints, both ways."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lang2policy.mpc.model import PlanningModel
from lang2policy.scene.arm import GRIPPER


class ArmMap:
    """Action space (arm joints + normalised gripper) <-> the planning model's ctrl vector."""

    def __init__(self, pm: PlanningModel) -> None:
        arm, model = pm.arm, pm.model
        self.names = arm.action_names
        self.joint_names = arm.joint_names
        self.arm_ids = np.asarray(arm.actuator_ids)
        self.gripper_ids = np.asarray(arm.gripper_actuator_ids)
        self.gripper_joints = tuple(pm.gripper_joint_names)
        self.closed, self.span = arm.gripper_closed, arm.gripper_open - arm.gripper_closed
        self.low, self.high = pm.ctrl_low.copy(), pm.ctrl_high.copy()
        self.nu = model.nu

    def ctrl(self, action: Mapping[str, float]) -> np.ndarray:
        """Actuator controls for a named action."""
        ctrl = np.empty(self.nu)
        ctrl[self.arm_ids] = [action[n] for n in self.joint_names]
        ctrl[self.gripper_ids] = self.closed + action[GRIPPER] * self.span
        return np.clip(ctrl, self.low, self.high)

    def action(self, ctrl: np.ndarray) -> dict[str, float]:
        """The named action of actuator controls (gripper opening clipped to 0..1)."""
        named = {n: float(ctrl[a]) for n, a in zip(self.joint_names, self.arm_ids, strict=True)}
        opening = float(np.mean((ctrl[self.gripper_ids] - self.closed) / self.span))
        named[GRIPPER] = min(1.0, max(0.0, opening))
        return named

    def model_joints(self, values: Mapping[str, float], rate: bool = False) -> dict[str, float]:
        """Planning-model joint values (positions, or velocities with ``rate``) by name."""
        out = {n: values.get(n, 0.0) for n in self.joint_names}
        opening = values.get(GRIPPER, 0.0)
        for joint in self.gripper_joints:
            out[joint] = opening * self.span if rate else self.closed + opening * self.span
        return out
