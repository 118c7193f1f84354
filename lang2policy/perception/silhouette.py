"""Fitting an object's 3D shape to the outline of its blob, robustly to partial occlusion.

A block is a cube and a bowl a cylinder of known size standing on the table; their image
outline at (x, y) (and a block's yaw, measured beforehand from its top face) is the convex hull
of their projected corners or rim points. The position is the one whose predicted outline best
matches the blob's boundary, where boundary points well inside the predicted outline do not
count: they are where something in front (the gripper, another object) cuts the blob, not the
object's edge. This handles perspective and oblique views exactly (a blob's centroid does not),
and bowls half hidden by the gripper, whose centroids can be off by a radius.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from lang2policy.perception.camera import PinholeCamera

_RIM_POINTS = 24
_MAX_POINTS = 96  # boundary points used in a fit (evenly subsampled)
_STEP = 1e-3  # metres: finite-difference step of the image Jacobian


@dataclass(frozen=True)
class Shape:
    """A block (``half`` = half its side) or a bowl (``half`` = outer radius), ``height`` tall.

    A bowl's wall may stand on a narrower foot: ``foot`` (radius) up to ``foot_height``.
    """

    kind: str
    half: float
    height: float
    foot: float = 0.0  # 0: as wide as the rest
    foot_height: float = 0.0

    def points(self, x: float, y: float, yaw: float, table_z: float) -> np.ndarray:
        """World points (N, 3) whose convex hull is the object at this pose."""
        if self.kind == "block":
            c, s = math.cos(yaw), math.sin(yaw)
            corners = np.array([(1, 1), (1, -1), (-1, -1), (-1, 1)], float)
            unit = corners @ np.array([[c, s], [-s, c]])
        else:
            angles = np.linspace(0.0, 2 * math.pi, _RIM_POINTS, endpoint=False)
            unit = np.column_stack([np.cos(angles), np.sin(angles)])
        rings = [(self.half, 0.0), (self.half, self.height)]
        if self.foot > 0:
            rings = [(self.foot, 0.0), (self.half, self.foot_height), (self.half, self.height)]
        return np.vstack(
            [
                np.column_stack([unit * radius + (x, y), np.full(len(unit), table_z + z)])
                for radius, z in rings
            ]
        )


@dataclass(frozen=True)
class Fit:
    x: float
    y: float
    support: float  # share of boundary points on the predicted outline (within the tolerance)
    rms: float  # pixels, over the supporting points


def predicted_outline(camera: PinholeCamera, shape: Shape, pose, table_z: float) -> np.ndarray:
    """Convex polygon (M, 2) in the image of the shape at ``pose`` (x, y, yaw)."""
    pixels = camera.project(shape.points(*pose, table_z))
    return cv2.convexHull(pixels.astype(np.float32), clockwise=False).reshape(-1, 2).astype(float)


def fit_shape(
    camera: PinholeCamera,
    shape: Shape,
    boundary: np.ndarray,
    start: tuple[float, float, float],
    table_z: float,
    tolerance: float = 2.0,
) -> Fit:
    """(x, y) of the shape whose outline best matches ``boundary``, from ``start`` (x, y, yaw).

    Two Levenberg-Marquardt runs: plain least squares first (a first guess can be far off, and
    then every boundary point would count as an occlusion edge), then with points deep inside
    the outline cut off at ``tolerance`` pixels (see the module docstring).
    """
    boundary = _subsample(np.asarray(boundary, float), _MAX_POINTS)
    if len(boundary) < 3:
        return Fit(float(start[0]), float(start[1]), 0.0, math.inf)
    local = shape.points(0.0, 0.0, start[2], table_z)  # translated, never rebuilt, in the loop
    jacobian = _centre_jacobian(camera, shape, np.asarray(start[:2], float), table_z)

    def distances(position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Signed distances and their derivatives with respect to the world (x, y)."""
        pixels = camera.project(local + np.array([position[0], position[1], 0.0]))
        outline = cv2.convexHull(pixels.astype(np.float32)).reshape(-1, 2).astype(float)
        distance, image_gradient = signed_distance(boundary, outline)
        return distance, image_gradient @ jacobian

    position = np.array(start[:2], float)
    position = _levenberg_marquardt(distances, position, math.inf)
    position = _levenberg_marquardt(distances, position, tolerance)
    residual, _ = distances(position)
    on = np.abs(residual) <= tolerance
    rms = float(np.sqrt(np.mean(residual[on] ** 2))) if on.any() else math.inf
    return Fit(float(position[0]), float(position[1]), float(on.mean()), rms)


def _centre_jacobian(camera, shape: Shape, position: np.ndarray, table_z: float) -> np.ndarray:
    """2x2: how the image of the object's middle moves per metre of world x and y. The whole
    outline moves (nearly) alike, and (nearly) so anywhere near the start, which is all a
    Gauss-Newton step needs."""
    z = table_z + 0.5 * shape.height
    x, y = position
    pixels = camera.project(np.array([[x, y, z], [x + _STEP, y, z], [x, y + _STEP, z]]))
    return (pixels[1:] - pixels[0]).T / _STEP


def _levenberg_marquardt(distances, position: np.ndarray, cap: float, iterations: int = 10):
    """Minimise the sum of squared ``min(distance, cap)`` over a 2D position."""

    def residuals(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        distance, jacobian = distances(p)
        capped = distance > cap  # an occlusion edge: constant, so it pulls no further
        return np.minimum(distance, cap), np.where(capped[:, None], 0.0, jacobian)

    damping = 1e-3
    residual, jac = residuals(position)
    for _ in range(iterations):
        normal = jac.T @ jac
        regularised = normal + damping * np.diag(np.diag(normal) + 1e-9)
        step = np.linalg.solve(regularised, -jac.T @ residual)
        trial, trial_jac = residuals(position + step)
        if trial @ trial < residual @ residual:
            position, residual, jac, damping = position + step, trial, trial_jac, damping * 0.3
            if np.abs(step).max() < 2e-5:
                break
        else:
            damping *= 10.0
    return position


def signed_distance(points: np.ndarray, polygon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance of each point to a convex polygon (as ``cv2.convexHull`` orders it, not
    clockwise), > 0 inside and < 0 outside, and its (N, 2) derivative with respect to a shift
    of the polygon in the image."""
    a = polygon
    edge = np.roll(polygon, -1, axis=0) - a
    rel = points[:, None, :] - a[None, :, :]
    t = np.clip((rel * edge).sum(-1) / np.maximum((edge * edge).sum(-1), 1e-12), 0.0, 1.0)
    gap = rel - t[..., None] * edge[None]
    squared = (gap * gap).sum(-1)
    closest = squared.argmin(axis=1)
    rows = np.arange(len(points))
    distance = np.sqrt(squared[rows, closest])
    direction = gap[rows, closest] / np.maximum(distance, 1e-9)[:, None]
    cross = edge[None, :, 0] * rel[..., 1] - edge[None, :, 1] * rel[..., 0]
    sign = np.where((cross >= 0).all(axis=1), 1.0, -1.0)
    # Shifting the polygon by d moves the closest point by d: the gap shrinks along itself.
    return sign * distance, -sign[:, None] * direction


def _subsample(points: np.ndarray, count: int) -> np.ndarray:
    if len(points) <= count:
        return points
    return points[np.linspace(0, len(points) - 1, count).round().astype(int)]
