"""Camera-to-robot calibration: where a fixed camera is, from ArUco markers on the table.

The markers lie flat at known places in the world (robot base) frame, as a board YAML says
(``aruco_board``). Each detected marker of the board gives four 2D-3D correspondences (its
corners); ``cv2.solvePnP`` (IPPE for planar points, both of its solutions tried, then
Levenberg-Marquardt refinement) turns them into the pose of the camera's optical frame in the
world, a ``CameraPose`` that ``save_camera_pose`` writes for the perception node
(``camera_pose: hardware/camera_<name>.yaml``).

Several images of a still camera can be pooled (their corners are all used), which averages out
pixel noise. The result carries the reprojection error (RMS and worst, in pixels, overall and
per marker): a marker that was placed or measured wrong stands out with a large error.

Pure: no ROS import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.perception.aruco_board import Board, aruco_dictionary
from lang2policy.perception.camera import CameraPose, Intrinsics

DEFAULT_MIN_MARKERS = 2


class CalibrationError(Lang2PolicyError):
    """The camera pose could not be found (too few markers, wrong image size, bad geometry)."""


@dataclass(frozen=True)
class MarkerDetections:
    """The board's markers found in one image (id -> 4 x 2 corner pixels) and the other ids."""

    corners: dict[int, np.ndarray]
    unknown_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class BoardCalibration:
    """The calibrated camera pose and how well it explains the detected corners."""

    pose: CameraPose
    rms_error_px: float
    max_error_px: float
    marker_errors_px: dict[int, float]  # RMS per marker id
    images_used: int
    unknown_ids: tuple[int, ...] = ()

    @property
    def markers_used(self) -> tuple[int, ...]:
        return tuple(sorted(self.marker_errors_px))

    def summary(self) -> str:
        """A few human-readable lines: pose, errors, markers."""
        x, y, z = self.pose.position
        per_marker = ", ".join(f"{i}: {e:.2f}" for i, e in sorted(self.marker_errors_px.items()))
        lines = [
            f"camera position (world, m): [{x:.4f}, {y:.4f}, {z:.4f}]",
            f"camera quat (w, x, y, z):   {np.round(self.pose.quat(), 5).tolist()}",
            f"reprojection error: RMS {self.rms_error_px:.3f} px, worst {self.max_error_px:.3f} px "
            f"over {self.images_used} image(s)",
            f"markers used: {list(self.markers_used)} (RMS px per marker: {per_marker})",
        ]
        if self.unknown_ids:
            lines.append(f"ignored markers not on the board: {list(self.unknown_ids)}")
        return "\n".join(lines)


def make_detector(board: Board) -> cv2.aruco.ArucoDetector:
    """An ArUco detector for the board's dictionary with sub-pixel corner refinement."""
    parameters = cv2.aruco.DetectorParameters()
    parameters.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    return cv2.aruco.ArucoDetector(aruco_dictionary(board.dictionary), parameters)


def _grey(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim not in (2, 3):
        raise CalibrationError(
            f"expected a uint8 grey or colour image, got {image.dtype} {image.shape}"
        )
    if image.ndim == 2:
        return image
    if image.shape[2] != 3:
        raise CalibrationError(f"expected 3 colour channels, got {image.shape}")
    return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)  # the channel order barely matters here


def detect_markers(
    image: np.ndarray, board: Board, detector: cv2.aruco.ArucoDetector | None = None
) -> MarkerDetections:
    """The board's markers in ``image`` (grey, RGB or BGR uint8)."""
    detector = detector or make_detector(board)
    corners, ids, _rejected = detector.detectMarkers(_grey(image))
    known, unknown = {}, set()
    for marker_corners, marker_id in zip(
        corners, np.ravel(ids) if ids is not None else (), strict=True
    ):
        if board.placement(int(marker_id)) is None:
            unknown.add(int(marker_id))
        else:
            known[int(marker_id)] = np.asarray(marker_corners, float).reshape(4, 2)
    return MarkerDetections(known, tuple(sorted(unknown)))


def _check_markers(found: set[int], board: Board, unknown: set[int], images: int, need: int):
    if len(found) >= need:
        return
    expected = board.ids()
    if not found:
        hint = (
            f"; saw ids {sorted(unknown)} that are not on the board (another board file?)"
            if unknown
            else f"; is the board in view, lit, in focus, printed from {board.dictionary}?"
        )
        raise CalibrationError(
            f"no marker of the board found in {images} image(s): expected ids {expected} "
            f"({board.dictionary}){hint}"
        )
    missing = sorted(set(expected) - found)
    raise CalibrationError(
        f"found markers {sorted(found)} of the board's {expected}, need at least {need}; "
        f"missing {missing} (out of view, covered by the arm, too small in the image?)"
    )


def _solve(object_points, image_points, intrinsics: Intrinsics, plane_z: float):
    """rvec, tvec of the best IPPE solution with the camera above the plane, refined."""
    k = intrinsics.k
    dist = np.asarray(intrinsics.distortion, float) if intrinsics.distortion else None
    count, rvecs, tvecs, errors = cv2.solvePnPGeneric(
        object_points, image_points, k, dist, flags=cv2.SOLVEPNP_IPPE
    )
    candidates = []
    for rvec, tvec, error in zip(rvecs, tvecs, np.ravel(errors), strict=True):
        rvec, tvec = cv2.solvePnPRefineLM(object_points, image_points, k, dist, rvec, tvec)
        if CameraPose.from_rvec_tvec(rvec, tvec).position[2] > plane_z:
            candidates.append((float(error), rvec, tvec))
    if not count or not candidates:
        raise CalibrationError(
            "no camera pose above the table explains the detected corners; check the board "
            "file's marker positions and yaw against where the markers really lie"
        )
    _error, rvec, tvec = min(candidates, key=lambda c: c[0])
    return rvec, tvec


def calibrate_camera_pose(
    images: Sequence[np.ndarray],
    board: Board,
    intrinsics: Intrinsics,
    min_markers: int = DEFAULT_MIN_MARKERS,
) -> BoardCalibration:
    """The camera's pose in the world from one or more images of a still camera and board.

    Raises CalibrationError when an image's size differs from the intrinsics' or fewer than
    ``min_markers`` distinct board markers were found (saying which were found and expected).
    """
    if not images:
        raise CalibrationError("no images to calibrate from")
    detector = make_detector(board)
    rows: list[tuple[int, np.ndarray, np.ndarray]] = []  # (marker id, world 4x3, pixels 4x2)
    unknown: set[int] = set()
    for index, image in enumerate(images):
        height, width = np.asarray(image).shape[:2]
        if (width, height) != (intrinsics.width, intrinsics.height):
            raise CalibrationError(
                f"image {index} is {width}x{height} but the intrinsics are for "
                f"{intrinsics.width}x{intrinsics.height}"
            )
        found = detect_markers(image, board, detector)
        unknown |= set(found.unknown_ids)
        rows += [(i, board.corners(i), c) for i, c in sorted(found.corners.items())]
    _check_markers({r[0] for r in rows}, board, unknown, len(images), max(1, min_markers))
    object_points = np.concatenate([r[1] for r in rows]).astype(np.float64)
    image_points = np.concatenate([r[2] for r in rows]).astype(np.float64)
    rvec, tvec = _solve(object_points, image_points, intrinsics, board.plane_z)
    residuals = _residuals(object_points, image_points, intrinsics, rvec, tvec)
    ids = np.repeat([r[0] for r in rows], 4)
    per_marker = {int(i): float(np.sqrt(np.mean(residuals[ids == i] ** 2))) for i in np.unique(ids)}
    return BoardCalibration(
        CameraPose.from_rvec_tvec(rvec, tvec),
        float(np.sqrt(np.mean(residuals**2))),
        float(residuals.max()),
        per_marker,
        len(images),
        tuple(sorted(unknown)),
    )


def _residuals(object_points, image_points, intrinsics: Intrinsics, rvec, tvec) -> np.ndarray:
    """Pixel distance of each detected corner from the projection of its world point."""
    dist = np.asarray(intrinsics.distortion, float) if intrinsics.distortion else None
    projected, _ = cv2.projectPoints(object_points, rvec, tvec, intrinsics.k, dist)
    return np.linalg.norm(projected.reshape(-1, 2) - image_points, axis=1)
