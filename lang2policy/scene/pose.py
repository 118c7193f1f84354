"""A rigid pose (position + unit quaternion w, x, y, z) with the few conversions we need."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class Pose:
    position: np.ndarray
    quat: np.ndarray  # w, x, y, z

    @staticmethod
    def from_matrix(position: np.ndarray, rotation: np.ndarray) -> Pose:
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rotation).reshape(9))
        return Pose(np.array(position, float), quat)

    def rotation(self) -> np.ndarray:
        mat = np.empty(9)
        mujoco.mju_quat2Mat(mat, np.asarray(self.quat, float))
        return mat.reshape(3, 3)

    def yaw(self) -> float:
        w, x, y, z = self.quat
        return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))

    def as_dict(self) -> dict[str, list[float]]:
        return {
            "position": [round(float(v), 4) for v in self.position],
            "quat": [round(float(v), 4) for v in self.quat],
        }
