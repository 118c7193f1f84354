"""Arm kinematics with the robot's grasping conventions, on top of ``solve_ik``.

It knows the tool centre point, the top-down grasp orientation, the tilts to try when top-down
is out of reach, and where an object sits between the jaws.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mujoco
import numpy as np

from lang2policy.control.ik import IKOptions, IKResult, solve_ik, top_down_rotation
from lang2policy.errors import UnreachableError
from lang2policy.scene.arm import ArmLayout
from lang2policy.scene.pose import Pose
from lang2policy.scene.robot_description import RobotDescription

REACH_SAMPLES = 4096  # joint configurations sampled once to measure the arm's reach
REACH_MARGIN = 0.03  # m added to the sampled reach: sampling misses the very farthest pose


class Kinematics:
    def __init__(self, model: mujoco.MjModel, description: RobotDescription, arm: ArmLayout):
        self.model, self.description, self.arm = model, description, arm
        self.scratch = mujoco.MjData(model)
        self.options = IKOptions()
        self.approach_axis = np.array(description.approach_axis, float)
        self.center_offset = np.array(description.grasp.center_offset, float)
        self._natural_yaw_offset = self._measure_natural_yaw_offset()
        # Called between IK starts; raises to abandon planning (a stop on a live arm).
        self.check_interrupt: Callable[[], None] | None = None
        self._reach: tuple[np.ndarray, float] | None = None

    def forward(self, q: np.ndarray) -> Pose:
        self.scratch.qpos[self.arm.qpos_adr] = q
        mujoco.mj_kinematics(self.model, self.scratch)
        site = self.arm.ee_site_id
        return Pose.from_matrix(
            self.scratch.site_xpos[site].copy(), self.scratch.site_xmat[site].reshape(3, 3)
        )

    def solve(self, position, rotation, q_start) -> IKResult:
        return solve_ik(
            self.model,
            self.scratch,
            self.arm,
            position,
            rotation,
            q_start,
            self.options,
            check=self.check_interrupt,
        )

    def check_reach(self, position, what: str) -> None:
        """Raise ``UnreachableError`` at once for a point no posture reaches (farther from the
        first joint than any tool or ee-site point sampled over the joint ranges, plus a
        margin): IK restarts for such a target would only burn host time."""
        anchor, reach = self.reach()
        distance = float(np.linalg.norm(np.asarray(position, float) - anchor))
        if distance > reach + REACH_MARGIN:
            raise UnreachableError(
                f"{what}: target {np.round(position, 3).tolist()} is out of reach "
                f"({distance:.2f} m from the arm's base, which reaches about {reach:.2f} m); "
                "the arm did not move"
            )

    def reach(self) -> tuple[np.ndarray, float]:
        """(the first joint's anchor, the farthest the tool or ee site gets from it), sampled
        once over the joint ranges (deterministic)."""
        if self._reach is None:
            samples = np.random.default_rng(0).uniform(
                self.arm.lower, self.arm.upper, (REACH_SAMPLES, self.arm.dof)
            )
            self.forward(self.arm.home)
            anchor = self.scratch.xanchor[self.arm.joint_ids[0]].copy()
            far = 0.0
            for q in samples:
                pose = self.forward(q)
                tool = pose.position + pose.rotation() @ self.center_offset
                far = max(
                    far, np.linalg.norm(pose.position - anchor), np.linalg.norm(tool - anchor)
                )
            self._reach = (anchor, float(far))
        return self._reach

    def solve_or_raise(self, position, rotation, q_start, what: str) -> np.ndarray:
        self.check_reach(position, what)
        result = self.solve(position, rotation, q_start)
        if not result.ok(self.options.position_tol, self.options.rotation_tol):
            raise UnreachableError(
                f"{what}: target {np.round(position, 3).tolist()} is out of reach "
                f"(best IK misses by {result.position_error * 1000:.1f} mm, "
                f"{math.degrees(result.rotation_error):.1f} deg); the arm did not move"
            )
        return result.q

    # ------------------------------------------------------------ grasp conventions
    def natural_yaw(self, position: np.ndarray) -> float:
        """Gripper yaw the arm reaches without winding its wrist, at ``position``."""
        return math.atan2(position[1], position[0]) + self._natural_yaw_offset

    def grasp_yaw(self, position: np.ndarray, object_yaw: float, symmetry: float) -> float:
        """Yaw aligning the jaws with the object's faces, closest to the preferred grasp yaw
        (radial direction + ``grasp.yaw_offset``); jaws closing across the tilt plane keep
        both fingertips at the same height when the gripper leans."""
        preferred = math.atan2(position[1], position[0]) + self.description.grasp.yaw_offset
        turns = round((preferred - object_yaw) / symmetry)
        return object_yaw + turns * symmetry

    def tool_rotation(self, position: np.ndarray, yaw: float, tilt: float) -> np.ndarray:
        """Top-down orientation at ``yaw``, leaned ``tilt`` rad away from the robot base."""
        radial = math.atan2(position[1], position[0])
        axis = np.array([-math.sin(radial), math.cos(radial), 0.0])
        lean = np.empty(9)
        quat = np.empty(4)
        mujoco.mju_axisAngle2Quat(quat, axis, -tilt)
        mujoco.mju_quat2Mat(lean, quat)
        return lean.reshape(3, 3) @ top_down_rotation(self.approach_axis, yaw)

    def site_target(self, object_center: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """Where the ee site must be so that ``object_center`` sits between the jaws."""
        return object_center - rotation @ self.center_offset

    def _measure_natural_yaw_offset(self) -> float:
        home = self.forward(self.arm.home)
        side = home.rotation() @ np.roll(self.approach_axis, 1)
        return math.atan2(side[1], side[0]) - math.atan2(home.position[1], home.position[0])
