"""A calibrated pinhole camera: intrinsics, its pose in the world, and rays onto a plane.

Pixel coordinates follow OpenCV and ROS ``CameraInfo``: the centre of the top-left pixel is
(0, 0), u grows to the right, v downwards. The camera frame is the optical frame (x right, y down,
z forward, looking along +z); ``CameraPose`` is the rotation and position of that frame in the
world frame (z up, the table top is a plane of constant z).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.scene.pose import Pose

# Distortion coefficient counts OpenCV accepts (plumb_bob has 5, rational_polynomial 8).
_DISTORTION_LENGTHS = (0, 4, 5, 8, 12, 14)
DISTORTION_MODELS = ("", "none", "plumb_bob", "rational_polynomial")


@dataclass(frozen=True)
class Intrinsics:
    """3x3 matrix K, image size and lens distortion (OpenCV order; empty: none)."""

    k: np.ndarray
    width: int
    height: int
    distortion: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        k = np.asarray(self.k, dtype=float)
        object.__setattr__(self, "k", k)
        if k.shape != (3, 3) or not np.isfinite(k).all():
            raise ConfigError(f"K must be a finite 3x3 matrix, got {np.asarray(self.k).tolist()}")
        if not k.any():
            raise ConfigError(
                "K is all zeros: the camera is not calibrated; calibrate it "
                "(ros2 run camera_calibration cameracalibrator) so camera_info carries K"
            )
        if not (k[0, 0] > 0 and k[1, 1] > 0 and np.allclose(k[2], (0, 0, 1))):
            raise ConfigError(f"K must have fx, fy > 0 and last row [0, 0, 1], got {k.tolist()}")
        if self.width <= 0 or self.height <= 0:
            raise ConfigError(f"image size must be positive, got {self.width}x{self.height}")
        if not (0 <= k[0, 2] <= self.width and 0 <= k[1, 2] <= self.height):
            raise ConfigError(
                f"principal point ({k[0, 2]:g}, {k[1, 2]:g}) lies outside the "
                f"{self.width}x{self.height} image"
            )
        if len(self.distortion) not in _DISTORTION_LENGTHS or not all(
            map(math.isfinite, self.distortion)
        ):
            raise ConfigError(
                f"distortion must be {_DISTORTION_LENGTHS} finite coefficients (OpenCV order), "
                f"got {list(self.distortion)}"
            )


def intrinsics_from_camera_info(
    k: Sequence[float],
    width: int,
    height: int,
    d: Sequence[float] = (),
    distortion_model: str = "plumb_bob",
) -> Intrinsics:
    """Intrinsics from the fields of a sensor_msgs/CameraInfo (``k`` row-major, 9 numbers)."""
    if len(k) != 9:
        raise ConfigError(f"camera_info K must have 9 numbers (row-major 3x3), got {len(k)}")
    if distortion_model not in DISTORTION_MODELS:
        raise ConfigError(
            f"unsupported distortion model '{distortion_model}'; supported: "
            f"{list(DISTORTION_MODELS)} (rectify the image first, e.g. with image_proc)"
        )
    coefficients = tuple(float(c) for c in d) if any(d) else ()
    return Intrinsics(
        np.reshape(np.asarray(k, float), (3, 3)), int(width), int(height), coefficients
    )


@dataclass(frozen=True)
class CameraPose:
    """Pose of the optical frame in the world: ``p_world = rotation @ p_camera + position``."""

    position: np.ndarray
    rotation: np.ndarray

    def __post_init__(self) -> None:
        position = np.asarray(self.position, dtype=float)
        rotation = np.asarray(self.rotation, dtype=float)
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "rotation", rotation)
        if position.shape != (3,) or not np.isfinite(position).all():
            raise ConfigError(f"camera position must be 3 finite numbers, got {position.tolist()}")
        if rotation.shape != (3, 3) or not np.isfinite(rotation).all():
            raise ConfigError("camera rotation must be a finite 3x3 matrix")
        orthonormal = np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-5)
        if not orthonormal or np.linalg.det(rotation) < 0:
            raise ConfigError(f"camera rotation is not a proper rotation: {rotation.tolist()}")

    @staticmethod
    def from_quat(position: Sequence[float], quat: Sequence[float]) -> CameraPose:
        """From a position and a quaternion (w, x, y, z) of the optical frame; normalises it."""
        q = np.asarray(quat, dtype=float)
        if q.shape != (4,) or not np.isfinite(q).all() or np.linalg.norm(q) < 1e-6:
            raise ConfigError(
                f"camera quat must be 4 finite numbers (w, x, y, z), got {q.tolist()}"
            )
        return CameraPose(
            np.asarray(position, float), Pose(np.zeros(3), q / np.linalg.norm(q)).rotation()
        )

    @staticmethod
    def from_rvec_tvec(rvec: Sequence[float], tvec: Sequence[float]) -> CameraPose:
        """From OpenCV's world-to-camera extrinsics (what ``cv2.solvePnP`` returns)."""
        rotation_cw, _ = cv2.Rodrigues(np.asarray(rvec, float).reshape(3, 1))
        rotation_wc = rotation_cw.T
        return CameraPose(-rotation_wc @ np.asarray(tvec, float).reshape(3), rotation_wc)

    def quat(self) -> np.ndarray:
        """The rotation as a unit quaternion (w, x, y, z), w >= 0."""
        q = Pose.from_matrix(self.position, self.rotation).quat
        return q if q[0] >= 0 else -q


@dataclass(frozen=True)
class PinholeCamera:
    """Intrinsics + pose: projects world points to pixels and pixels back onto planes z = c."""

    intrinsics: Intrinsics
    pose: CameraPose

    def rays(self, pixels: np.ndarray) -> np.ndarray:
        """Unit directions in the world of the rays through ``pixels`` (N x 2, u v)."""
        pts = np.asarray(pixels, dtype=np.float64).reshape(-1, 1, 2)
        k, dist = self.intrinsics.k, np.asarray(self.intrinsics.distortion, float)
        normalised = cv2.undistortPoints(pts, k, dist if dist.size else None).reshape(-1, 2)
        directions = np.column_stack([normalised, np.ones(len(normalised))])
        world = directions @ self.pose.rotation.T
        return world / np.linalg.norm(world, axis=1, keepdims=True)

    def to_plane(self, pixels: np.ndarray, z: float) -> np.ndarray:
        """World points (N x 3) where the rays through ``pixels`` meet the plane at height z.

        Rays parallel to the plane or meeting it behind the camera give NaN rows.
        """
        rays = self.rays(pixels)
        origin = self.pose.position
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (z - origin[2]) / rays[:, 2]
        t = np.where(np.isfinite(t) & (t > 0), t, np.nan)
        return origin + rays * t[:, None]

    def project(self, points: np.ndarray) -> np.ndarray:
        """Pixels (N x 2) of world points (N x 3) in front of the camera."""
        cam = (np.asarray(points, float).reshape(-1, 3) - self.pose.position) @ self.pose.rotation
        k = self.intrinsics.k
        if not self.intrinsics.distortion:  # the common case, without OpenCV's overhead
            return (cam[:, :2] / cam[:, 2:3]) @ k[:2, :2].T + k[:2, 2]
        zero = np.zeros(3)
        dist = np.asarray(self.intrinsics.distortion, float)
        pixels, _ = cv2.projectPoints(cam, zero, zero, k, dist)
        return pixels.reshape(-1, 2)
