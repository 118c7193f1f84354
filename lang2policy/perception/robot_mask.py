"""Which pixels the robot covers, from its joint positions: its own paint is no object.

The SO-101 is painted yellow, and its shaded and over-exposed parts look like yellow, orange,
brown and grey blocks. Given the joint positions (``/joint_states``) the robot's model is posed
and each of its geoms drawn into the image as the convex hull of its projected extreme points;
colour blobs under that mask are ignored. This works for a real camera too, given its calibrated
pose: the model of the real arm is the same.
"""

from __future__ import annotations

from collections.abc import Mapping

import cv2
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.perception.camera import PinholeCamera
from lang2policy.perception.holding import Tool

_VISIBLE_GROUPS = 3  # MuJoCo draws geom groups 0..2; 3 holds collision geoms no camera sees
_DIRECTIONS = 96  # extreme points kept per geom: enough for a hull within a pixel or two


class RobotMask:
    """The robot of a MuJoCo scene, posed from joint positions and drawn as an image mask."""

    def __init__(self, robot: str, dilate_px: int = 3) -> None:
        import mujoco

        from lang2policy.perception.scene import scene_model
        from lang2policy.scene.arm import arm_layout
        from lang2policy.scene.robot_description import load_robot_description

        self._mujoco = mujoco
        self.model = scene_model(robot)
        self.data = mujoco.MjData(self.model)
        self.arm = arm_layout(self.model, load_robot_description(robot))
        self.dilate_px = int(dilate_px)
        self.joint_names = self.arm.action_names  # arm joints, then the 0..1 gripper
        root = self.model.body_rootid[self.model.site_bodyid[self.arm.ee_site_id]]
        self._geoms = [
            g
            for g in range(self.model.ngeom)
            if self.model.body_rootid[self.model.geom_bodyid[g]] == root
            and self.model.geom_group[g] < _VISIBLE_GROUPS
        ]
        self._points = {g: _extreme_points(self.model, g) for g in self._geoms}

    def pose(self, joints: Mapping[str, float]) -> None:
        """Set the model's joints (rad; ``gripper`` as the 0..1 opening); all must be given."""
        missing = [n for n in self.joint_names if n not in joints]
        if missing:
            raise ConfigError(
                f"robot mask needs positions of {list(self.joint_names)}; missing {missing}"
            )
        values = np.array([float(joints[n]) for n in self.joint_names])
        if not np.isfinite(values).all():
            raise ConfigError(f"robot joint positions must be finite, got {dict(joints)}")
        self.data.qpos[self.arm.qpos_adr] = values[:-1]
        self.data.qpos[self.arm.gripper_qpos_adr] = self.arm.gripper_ctrl(float(values[-1]))
        self._mujoco.mj_kinematics(self.model, self.data)

    def tool(self, joints: Mapping[str, float]) -> Tool:
        """The tool point and frame as last posed, with the jaws' opening in ``joints``."""
        site = self.arm.ee_site_id
        return Tool(
            self.data.site_xpos[site].copy(),
            self.data.site_xmat[site].reshape(3, 3).copy(),
            float(joints[self.joint_names[-1]]),
        )

    def mask(self, camera: PinholeCamera) -> np.ndarray:
        """(H, W) bool: pixels covered by the robot as last posed, dilated by ``dilate_px``."""
        size = (camera.intrinsics.height, camera.intrinsics.width)
        image = np.zeros(size, np.uint8)
        for geom, local in self._points.items():
            world = self.data.geom_xpos[geom] + local @ self.data.geom_xmat[geom].reshape(3, 3).T
            in_front = (world - camera.pose.position) @ camera.pose.rotation[:, 2] > 1e-3
            if in_front.sum() < 3:
                continue
            pixels = camera.project(world[in_front])
            hull = cv2.convexHull(np.round(pixels).astype(np.int32))
            cv2.fillConvexPoly(image, hull, 1)
        if self.dilate_px > 0:
            side = 2 * self.dilate_px + 1
            image = cv2.dilate(image, np.ones((side, side), np.uint8))
        return image.astype(bool)


def _extreme_points(model, geom: int) -> np.ndarray:
    """Points in the geom's frame whose convex hull is (nearly) the geom's."""
    import mujoco

    if model.geom_type[geom] != mujoco.mjtGeom.mjGEOM_MESH:  # a primitive: its bounding box
        centre, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
        corners = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3)
        return centre + corners * half
    mesh = model.geom_dataid[geom]
    start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
    vertices = model.mesh_vert[start : start + count].astype(float)
    directions = _sphere_directions(_DIRECTIONS)
    chosen = np.unique((vertices @ directions.T).argmax(axis=0))
    return vertices[chosen]


def _sphere_directions(count: int) -> np.ndarray:
    """``count`` unit vectors spread evenly over the sphere (a Fibonacci lattice)."""
    i = np.arange(count) + 0.5
    polar = np.arccos(1 - 2 * i / count)
    azimuth = np.pi * (1 + 5**0.5) * i
    return np.column_stack(
        [np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)]
    )
