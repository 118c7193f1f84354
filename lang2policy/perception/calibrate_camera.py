"""``lang2policy calibrate camera``: the pose of a fixed camera from ArUco markers on the table.

Captures a few frames from the camera (or reads image files), finds the board's markers, solves
for the camera's pose in the robot's base frame and writes it where the perception node reads
it (``camera_pose:=<file>``). Prints the pose, the reprojection error and the markers used;
refuses to write a pose whose RMS reprojection error exceeds ``--max-error`` px.

``lang2policy calibrate board-images`` writes the board's markers as printable PNG files.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.perception.aruco_board import PRINT_DPI, Board, load_board, write_marker_images
from lang2policy.perception.aruco_calibration import (
    DEFAULT_MIN_MARKERS,
    BoardCalibration,
    CalibrationError,
    calibrate_camera_pose,
    detect_markers,
)
from lang2policy.perception.camera import PinholeCamera
from lang2policy.perception.camera_pose import resolve_pose_path, save_camera_pose
from lang2policy.perception.intrinsics_file import (
    CameraCalibration,
    default_calibration,
    load_calibration,
)
from lang2policy.perception.video_source import CameraError, FrameSource, parse_device

DEFAULT_BOARD = "hardware/aruco_board.yaml"
WARMUP_FRAMES = 10  # dropped first: auto exposure and white balance settle


def capture_frames(device: str, frames: int, width: int, height: int) -> list[np.ndarray]:
    """``frames`` RGB frames from a camera (after a warm-up) or the frames of a video file."""
    source = FrameSource(parse_device(device), width, height)
    try:
        if not source.device.is_file:
            for _ in range(WARMUP_FRAMES):
                source.read()
        images, failures = [], 0
        while len(images) < frames and failures < 3 * frames and not source.ended:
            frame = source.read()
            if frame is None:
                failures += 1
                time.sleep(0.05)
            else:
                images.append(frame)
    finally:
        source.close()
    if not images:
        raise CameraError(f"no frame could be read from '{device}'")
    return images


def read_images(paths: list[Path]) -> list[np.ndarray]:
    """RGB images from files."""
    images = []
    for path in paths:
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise CameraError(f"cannot read image '{path}'")
        images.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    return images


def lens(intrinsics: str, fov_deg: float, width: int, height: int) -> CameraCalibration:
    """The intrinsics file scaled to the frames (same aspect ratio), else a default pinhole."""
    if not intrinsics:
        print(
            f"[calibrate] WARNING: no --intrinsics; assuming an undistorted pinhole camera with "
            f"a {fov_deg:g} deg horizontal field of view. The pose will be approximate: "
            "calibrate the lens (ros2 run camera_calibration cameracalibrator) and pass its YAML.",
            file=sys.stderr,
        )
        return default_calibration(width, height, fov_deg)
    calibration = load_calibration(resolve_pose_path(intrinsics))
    scaled = calibration.scaled(width, height)
    if scaled is not calibration:
        intr = calibration.intrinsics
        print(f"[calibrate] intrinsics scaled from {intr.width}x{intr.height} to {width}x{height}")
    return scaled


def annotate(image: np.ndarray, board: Board, camera: PinholeCamera, path: Path) -> Path:
    """Write ``image`` with the detected markers (green) and the board's corners projected
    through the calibrated camera (red circles): they coincide when the calibration is good."""
    bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    found = detect_markers(image, board)
    if found.corners:
        ids = np.array(sorted(found.corners), np.int32).reshape(-1, 1)
        corners = [found.corners[i].reshape(1, 4, 2).astype(np.float32) for i in ids.ravel()]
        cv2.aruco.drawDetectedMarkers(bgr, corners, ids)
    for marker_id in board.ids():
        for u, v in camera.project(board.corners(marker_id)):
            if np.isfinite(u) and np.isfinite(v):
                cv2.circle(bgr, (round(u), round(v)), 6, (0, 0, 255), 1, cv2.LINE_AA)
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), bgr)
    return path


def run(args: argparse.Namespace) -> BoardCalibration:
    """Calibrate and (when the error is acceptable) save; returns the calibration."""
    board = load_board(resolve_pose_path(args.board))
    if args.image:
        images = read_images(args.image)
    else:
        images = capture_frames(args.device, args.frames, args.width, args.height)
    height, width = images[0].shape[:2]
    calibration = lens(args.intrinsics, args.fov_deg, width, height)
    result = calibrate_camera_pose(images, board, calibration.intrinsics, args.min_markers)
    print(f"[calibrate] camera '{args.camera}', board {args.board}, {width}x{height} frames")
    print(result.summary())
    if args.debug_image:
        camera = PinholeCamera(calibration.intrinsics, result.pose)
        print(
            f"[calibrate] annotated image: {annotate(images[0], board, camera, args.debug_image)}"
        )
    if result.rms_error_px > args.max_error:
        worst = max(result.marker_errors_px, key=result.marker_errors_px.get)
        raise CalibrationError(
            f"RMS reprojection error {result.rms_error_px:.2f} px exceeds --max-error "
            f"{args.max_error:g} px (worst: marker {worst}); check the marker positions and "
            "yaw in the board file, that the paper lies flat, and the intrinsics"
        )
    out = save_camera_pose(
        args.out or f"hardware/camera_{args.camera}.yaml", result.pose, args.camera
    )
    print(
        f"[calibrate] wrote {out}; use it with: perception_node --ros-args -p source:=camera "
        f"-p camera:={args.camera} -p camera_pose:={out}"
    )
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lang2policy calibrate camera", description=__doc__.split("\n\n")[1]
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--device", default="0", help="camera index, /dev/videoN or a video file")
    source.add_argument("--image", type=Path, nargs="+", help="image file(s) instead of a camera")
    parser.add_argument("--board", default=DEFAULT_BOARD, help="board YAML (marker placements)")
    parser.add_argument("--intrinsics", default="", help="ROS camera calibration YAML of the lens")
    parser.add_argument("--fov-deg", type=float, default=60.0, help="without --intrinsics: HFOV")
    parser.add_argument("--camera", default="front", help="camera name (as the camera node's)")
    parser.add_argument(
        "--out", default="", help="pose YAML to write (default hardware/camera_<camera>.yaml)"
    )
    parser.add_argument("--frames", type=int, default=10, help="frames to capture and pool")
    parser.add_argument("--width", type=int, default=0, help="capture width (0: the default)")
    parser.add_argument("--height", type=int, default=0, help="capture height (0: the default)")
    parser.add_argument("--min-markers", type=int, default=DEFAULT_MIN_MARKERS)
    parser.add_argument("--max-error", type=float, default=2.0, help="max RMS error (px)")
    parser.add_argument("--debug-image", type=Path, help="write an annotated image here")
    return parser


def main(argv: list[str]) -> int:
    """``lang2policy calibrate camera ...``: 0 on success, 1 with a message on failure."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.frames < 1 or args.min_markers < 1 or not args.max_error > 0:
        parser.error("--frames and --min-markers must be >= 1, --max-error > 0")
    try:
        run(args)
    except (Lang2PolicyError, KeyboardInterrupt) as exc:
        print(
            f"lang2policy calibrate camera: {exc or 'cancelled'}; nothing was written",
            file=sys.stderr,
        )
        return 1
    return 0


def board_images_main(argv: list[str]) -> int:
    """``lang2policy calibrate board-images --out DIR [--board B] [--dpi N]``."""
    parser = argparse.ArgumentParser(
        prog="lang2policy calibrate board-images",
        description="Write the board's ArUco markers as PNG files to print at 100 %% scale.",
    )
    parser.add_argument("--board", default=DEFAULT_BOARD, help="board YAML")
    parser.add_argument("--out", type=Path, required=True, help="directory for marker_<id>.png")
    parser.add_argument("--dpi", type=int, default=PRINT_DPI, help="print resolution")
    args = parser.parse_args(argv)
    try:
        board = load_board(resolve_pose_path(args.board))
        paths = write_marker_images(board, args.out, args.dpi)
    except Lang2PolicyError as exc:
        print(f"lang2policy calibrate board-images: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    print(
        f"print at {args.dpi} dpi, 100 % scale; the black squares must measure "
        f"{board.marker_size * 1000:g} mm; place them as {args.board} says"
    )
    return 0
