"""The arm as the compiled model sees it: joint names, limits, indices, gripper mapping.

Everything here is read from the MjModel plus the robot description, so a new arm needs no
code: its arm joints are the joints driven by actuators that are not gripper actuators.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.scene.robot_description import RobotDescription

GRIPPER = "gripper"


@dataclass(frozen=True)
class ArmLayout:
    joint_names: tuple[str, ...]
    joint_ids: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    actuator_ids: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gripper_actuator_ids: np.ndarray
    gripper_qpos_adr: np.ndarray
    gripper_open: float
    gripper_closed: float
    ee_site_id: int
    home: np.ndarray
    look: np.ndarray  # the arm out of the overhead camera's view of the table

    @property
    def dof(self) -> int:
        return len(self.joint_names)

    @property
    def action_names(self) -> tuple[str, ...]:
        """Names of the action vector: the arm joints, then the normalised gripper."""
        return (*self.joint_names, GRIPPER)

    def gripper_ctrl(self, opening: float) -> float:
        """Actuator control for a normalised opening (0 = closed, 1 = open)."""
        return self.gripper_closed + opening * (self.gripper_open - self.gripper_closed)

    def gripper_opening(self, qpos: np.ndarray) -> float:
        """Normalised opening (0 closed, 1 open) from the gripper joint positions."""
        # plain floats: read at every control step (np.mean/np.clip cost ~10x on two values)
        values = [float(qpos[a]) for a in self.gripper_qpos_adr]
        value = sum(values) / len(values)
        span = self.gripper_open - self.gripper_closed
        return min(1.0, max(0.0, (value - self.gripper_closed) / span))


def arm_layout(model: mujoco.MjModel, description: RobotDescription) -> ArmLayout:
    """Read the arm's joints and gripper from the model, validated against the description."""
    gripper_ids = [_actuator_id(model, name) for name in description.gripper.actuators]
    arm_actuators = [a for a in range(model.nu) if a not in gripper_ids]
    joint_ids = np.array([model.actuator_trnid[a, 0] for a in arm_actuators])
    names = tuple(model.joint(j).name for j in joint_ids)
    _check_pose(description.name, "home", description.home, names)
    look = description.look or description.home
    _check_pose(description.name, "look", look, names)
    gripper_joints = [model.actuator_trnid[a, 0] for a in gripper_ids]
    site_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, description.ee_site)
    if site_id < 0:
        raise ConfigError(f"{description.name}: the model has no site '{description.ee_site}'")
    return ArmLayout(
        joint_names=names,
        joint_ids=joint_ids,
        qpos_adr=model.jnt_qposadr[joint_ids].copy(),
        dof_adr=model.jnt_dofadr[joint_ids].copy(),
        actuator_ids=np.array(arm_actuators),
        lower=model.jnt_range[joint_ids, 0].copy(),
        upper=model.jnt_range[joint_ids, 1].copy(),
        gripper_actuator_ids=np.array(gripper_ids),
        gripper_qpos_adr=model.jnt_qposadr[gripper_joints].copy(),
        gripper_open=description.gripper.open,
        gripper_closed=description.gripper.closed,
        ee_site_id=site_id,
        home=np.array([description.home[n] for n in names]),
        look=np.array([look[n] for n in names]),
    )


def _check_pose(robot: str, what: str, pose: dict[str, float], names: tuple[str, ...]) -> None:
    unknown = sorted(set(pose) - set(names))
    missing = sorted(set(names) - set(pose))
    if unknown or missing:
        raise ConfigError(
            f"{robot}: {what} pose must name exactly the arm joints {list(names)}; "
            f"unknown: {unknown}, missing: {missing}"
        )


def _actuator_id(model: mujoco.MjModel, name: str) -> int:
    actuator_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
    if actuator_id < 0:
        valid = [model.actuator(i).name for i in range(model.nu)]
        raise ConfigError(f"no actuator named '{name}'; the model has {valid}")
    return actuator_id
