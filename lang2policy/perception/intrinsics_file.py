"""Camera intrinsics of a real camera: the ROS calibration YAML, a default, and rescaling.

The file format is the one ``camera_calibration`` (``ros2 run camera_calibration
cameracalibrator``) and ``camera_info_manager`` write, so a calibration made with the ROS tools
is used as is::

    image_width: 640
    image_height: 480
    camera_name: front                 # optional
    camera_matrix: {rows: 3, cols: 3, data: [fx, 0, cx, 0, fy, cy, 0, 0, 1]}
    distortion_model: plumb_bob        # or rational_polynomial; "" / none: no distortion
    distortion_coefficients: {rows: 1, cols: 5, data: [k1, k2, p1, p2, k3]}
    rectification_matrix: {rows: 3, cols: 3, data: [1, 0, 0, 0, 1, 0, 0, 0, 1]}   # optional
    projection_matrix: {rows: 3, cols: 4, data: [...]}                            # optional

Only ``camera_matrix`` and the image size are required. Pure: no ROS import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError
from lang2policy.perception.camera import DISTORTION_MODELS, Intrinsics

_KEYS = {
    "image_width",
    "image_height",
    "camera_name",
    "camera_matrix",
    "distortion_model",
    "distortion_coefficients",
    "rectification_matrix",
    "projection_matrix",
}


@dataclass(frozen=True)
class CameraCalibration:
    """Everything a sensor_msgs/CameraInfo carries about the lens: intrinsics + model + P."""

    intrinsics: Intrinsics
    distortion_model: str = "plumb_bob"
    projection: np.ndarray | None = None  # 3x4; None: [K | 0]

    def projection_matrix(self) -> np.ndarray:
        """P of CameraInfo: the file's, else ``[K | 0]`` (a monocular camera)."""
        if self.projection is not None:
            return np.asarray(self.projection, float)
        return np.hstack([self.intrinsics.k, np.zeros((3, 1))])

    def scaled(self, width: int, height: int) -> CameraCalibration:
        """The same lens at another image size of the same aspect ratio (the sensor mode is
        downscaled or upscaled, not cropped); ConfigError for another aspect ratio."""
        intr = self.intrinsics
        if (width, height) == (intr.width, intr.height):
            return self
        sx, sy = width / intr.width, height / intr.height
        if not math.isclose(sx, sy, rel_tol=0.01):
            raise ConfigError(
                f"frames are {width}x{height} but the intrinsics are for {intr.width}x"
                f"{intr.height} (another aspect ratio: the camera crops, so scaling K would be "
                f"wrong); capture at {intr.width}x{intr.height} or calibrate at {width}x{height}"
            )
        scale = np.diag([sx, sy, 1.0])
        k = scale @ intr.k
        projection = None if self.projection is None else scale @ self.projection
        return CameraCalibration(
            Intrinsics(k, width, height, intr.distortion), self.distortion_model, projection
        )


def default_calibration(width: int, height: int, fov_deg: float) -> CameraCalibration:
    """An undistorted pinhole camera of horizontal field of view ``fov_deg``, centred."""
    if not 0.0 < fov_deg < 180.0:
        raise ConfigError(f"field of view must be in (0, 180) degrees, got {fov_deg}")
    f = 0.5 * width / math.tan(math.radians(fov_deg) / 2.0)
    k = np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])
    return CameraCalibration(Intrinsics(k, int(width), int(height)), "plumb_bob")


def _matrix(data: dict, key: str, shape: tuple[int, int], where: str) -> np.ndarray:
    entry = data[key]
    values = entry.get("data") if isinstance(entry, dict) else entry
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: '{key}' must hold numbers, got {values!r}") from exc
    if array.size != shape[0] * shape[1] or not np.isfinite(array).all():
        raise ConfigError(
            f"{where}: '{key}' must be {shape[0]}x{shape[1]} finite numbers "
            f"({{rows: {shape[0]}, cols: {shape[1]}, data: [...]}}), got {np.ravel(array).size}"
        )
    return array.reshape(shape)


def _size(data: dict, where: str) -> tuple[int, int]:
    width, height = data.get("image_width"), data.get("image_height")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (width, height)):
        raise ConfigError(
            f"{where}: image_width and image_height must be positive integers, "
            f"got {width!r} x {height!r}"
        )
    return width, height


def load_calibration(path: str | Path) -> CameraCalibration:
    """Read a ROS camera calibration YAML (format in the module docstring)."""
    where = str(path)
    data = read_yaml(Path(path))
    unknown = sorted(set(data) - _KEYS)
    if unknown or "camera_matrix" not in data:
        missing = "" if "camera_matrix" in data else ", missing camera_matrix"
        raise ConfigError(
            f"{where}: unknown keys {unknown}{missing}; a camera calibration file has "
            f"{sorted(_KEYS)}"
        )
    width, height = _size(data, where)
    model = str(data.get("distortion_model") or "plumb_bob")
    if model not in DISTORTION_MODELS:
        raise ConfigError(
            f"{where}: unsupported distortion_model '{model}'; supported: {list(DISTORTION_MODELS)}"
        )
    coefficients: tuple[float, ...] = ()
    if data.get("distortion_coefficients") is not None:
        entry = data["distortion_coefficients"]
        values = entry.get("data") if isinstance(entry, dict) else entry
        try:
            coefficients = tuple(float(v) for v in values or ())
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: distortion_coefficients must be numbers") from exc
    if not any(coefficients):
        coefficients = ()
    projection = None
    if data.get("projection_matrix") is not None:
        projection = _matrix(data, "projection_matrix", (3, 4), where)
    k = _matrix(data, "camera_matrix", (3, 3), where)
    try:
        return CameraCalibration(Intrinsics(k, width, height, coefficients), model, projection)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def save_calibration(path: str | Path, calibration: CameraCalibration, name: str = "") -> Path:
    """Write ``calibration`` in the format ``load_calibration`` (and ROS) reads."""
    intr = calibration.intrinsics
    distortion = list(intr.distortion) or [0.0] * 5
    body = {
        "image_width": intr.width,
        "image_height": intr.height,
        "camera_name": name,
        "camera_matrix": {"rows": 3, "cols": 3, "data": _floats(intr.k)},
        "distortion_model": calibration.distortion_model or "plumb_bob",
        "distortion_coefficients": {"rows": 1, "cols": len(distortion), "data": distortion},
        "rectification_matrix": {"rows": 3, "cols": 3, "data": _floats(np.eye(3))},
        "projection_matrix": {
            "rows": 3,
            "cols": 4,
            "data": _floats(calibration.projection_matrix()),
        },
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False, default_flow_style=None))
    return path


def _floats(matrix: np.ndarray) -> list[float]:
    return [float(v) for v in np.ravel(matrix)]
