"""Named quantities along rollouts: what reward terms read instead of raw ``sensordata``.

The planning model carries MuJoCo sensors (tool site pose and velocity, each object's pose and
velocity, arm joint positions, gripper, a few arm points for table clearance). ``Features``
slices a ``sensordata`` block of shape ``[K, T, nsensordata]`` into named arrays, so every term
works on ``K`` candidate trajectories of ``T`` steps at once (a single state is ``K = T = 1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def quat_to_zaxis(quat: np.ndarray) -> np.ndarray:
    """World z-axis of a body frame from its quaternion (w, x, y, z); works on ``[..., 4]``."""
    w, x, y, z = (quat[..., i] for i in range(4))
    return np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], axis=-1)


def quat_to_yaw(quat: np.ndarray) -> np.ndarray:
    """Heading (rad) of a frame's x-axis projected on the table; works on ``[..., 4]``."""
    w, x, y, z = (quat[..., i] for i in range(4))
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def rotate(quat: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Rotate a fixed body-frame ``vector`` (3,) by quaternions ``[..., 4]`` into the world."""
    w = quat[..., :1]
    xyz = quat[..., 1:]
    t = 2 * np.cross(xyz, vector)
    return vector + w * t + np.cross(xyz, t)


@dataclass
class Features:
    """Arrays over ``[K, T]`` (plus a trailing axis for vectors) for one batch of rollouts.

    ``tool`` is the point between the jaws (the tool centre), ``tool_vel`` its velocity,
    ``tool_axis`` the approach direction and ``closing_axis`` the direction the jaws close along;
    ``objects[name]`` holds ``pos`` (3), ``quat`` (4) and ``vel`` (3); ``gripper`` is the
    normalised opening (0 closed, 1 open); ``clearance_points`` are arm points ``[K, T, P, 3]``
    that must stay above the table; ``ctrl`` the controls applied (``[K, T, nu]``, normalised
    to 0..1 per actuator range) and ``dt`` the step of the rollout in seconds.
    """

    tool: np.ndarray
    tool_vel: np.ndarray
    tool_axis: np.ndarray
    closing_axis: np.ndarray
    objects: dict[str, dict[str, np.ndarray]]
    gripper: np.ndarray
    arm_q: np.ndarray
    home_q: np.ndarray
    clearance_points: np.ndarray
    ctrl: np.ndarray
    dt: float
    table_z: float = 0.0
