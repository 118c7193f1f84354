"""Camera-to-robot calibration from ArUco markers, on synthetic views of the table.

The views are rendered independently of the calibration's geometry: the printed marker images
are painted onto a top-down texture of the table by mapping every texture pixel into each
marker's own frame, and the texture is warped through a known camera by the table plane's
homography (2x supersampled, then blurred and noised; lens distortion by a remap). The known
cameras are the simulated scene's ``top`` (looking down) and ``front`` (oblique) cameras.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.perception import Intrinsics, load_camera_pose, sim_camera_pose, sim_intrinsics
from lang2policy.perception.aruco_board import (
    Board,
    MarkerPlacement,
    aruco_dictionary,
    load_board,
    marker_image,
    write_marker_images,
)
from lang2policy.perception.aruco_calibration import CalibrationError, calibrate_camera_pose
from lang2policy.perception.calibrate_camera import main as calibrate_main
from lang2policy.perception.camera import CameraPose
from lang2policy.perception.intrinsics_file import (
    CameraCalibration,
    default_calibration,
    load_calibration,
    save_calibration,
)

REPO = Path(__file__).resolve().parents[2]
BOARD = load_board(REPO / "hardware" / "aruco_board.yaml")
RES = 0.0004  # m per texture pixel
X0, Y0, SPAN = -0.1, -0.3, 0.6  # the textured part of the table (m)
TABLE_RGB = (150, 122, 96)


# --------------------------------------------------------------------- synthetic views
def table_texture(board: Board) -> np.ndarray:
    """Top-down RGB texture: pixel (col, row) shows world (X0 + col*RES, Y0 + row*RES)."""
    n = round(SPAN / RES)
    cols, rows = np.meshgrid(np.arange(n), np.arange(n))
    x, y = X0 + cols * RES, Y0 + rows * RES
    texture = np.empty((n, n, 3), np.uint8)
    texture[:] = TABLE_RGB
    dictionary = aruco_dictionary(board.dictionary)
    cells = dictionary.markerSize + 2
    for placement in board.markers:
        printed = cv2.aruco.generateImageMarker(dictionary, placement.marker_id, cells * 100)
        yaw = math.radians(placement.yaw_deg)
        dx, dy = x - placement.xy[0], y - placement.xy[1]
        up = dx * math.cos(yaw) + dy * math.sin(yaw)  # along the printed top direction
        right = dx * math.sin(yaw) - dy * math.cos(yaw)
        half = board.marker_size / 2
        paper = (np.abs(up) < half * 1.6) & (np.abs(right) < half * 1.6)
        texture[paper] = 245
        inside = (np.abs(up) < half) & (np.abs(right) < half)
        side = printed.shape[0]
        u = np.clip(((right / board.marker_size + 0.5) * side).astype(int), 0, side - 1)
        v = np.clip(((0.5 - up / board.marker_size) * side).astype(int), 0, side - 1)
        shade = printed[v[inside], u[inside]].astype(float)
        texture[inside] = (20 + shade * (235 / 255.0)).astype(np.uint8)[:, None]
    return texture


def render(board: Board, intrinsics: Intrinsics, pose: CameraPose, seed: int = 0) -> np.ndarray:
    """The camera's RGB view of the table texture (no distortion unless ``intrinsics`` has)."""
    k, w, h = intrinsics.k, intrinsics.width, intrinsics.height
    pad = 80 if intrinsics.distortion else 0
    s = 2  # supersampling: pixel i covers high-res pixels s*i .. s*i+s-1
    k_hi = np.array(
        [
            [s * k[0, 0], 0, s * (k[0, 2] + pad) + 0.5 * (s - 1)],
            [0, s * k[1, 1], s * (k[1, 2] + pad) + 0.5 * (s - 1)],
            [0, 0, 1],
        ]
    )
    r_cw = pose.rotation.T
    t = -r_cw @ pose.position
    plane = np.column_stack([r_cw[:, 0], r_cw[:, 1], r_cw[:, 2] * board.plane_z + t])
    texture_to_world = np.array([[RES, 0, X0], [0, RES, Y0], [0, 0, 1]])
    homography = k_hi @ plane @ texture_to_world
    size = (s * (w + 2 * pad), s * (h + 2 * pad))
    hi = cv2.warpPerspective(
        table_texture(board), homography, size, flags=cv2.INTER_LINEAR, borderValue=(60, 60, 60)
    )
    ideal = cv2.resize(hi, (w + 2 * pad, h + 2 * pad), interpolation=cv2.INTER_AREA)
    if intrinsics.distortion:  # each distorted pixel samples the ideal image where it came from
        grid = np.stack(np.meshgrid(np.arange(w), np.arange(h)), -1).reshape(-1, 1, 2)
        undistorted = cv2.undistortPoints(
            grid.astype(np.float64), k, np.asarray(intrinsics.distortion), P=k
        )
        maps = (undistorted.reshape(h, w, 2) + pad).astype(np.float32)
        image = cv2.remap(ideal, maps[..., 0], maps[..., 1], cv2.INTER_LINEAR)
    else:
        image = ideal
    image = cv2.GaussianBlur(image, (3, 3), 0.6).astype(float)
    noise = np.random.default_rng(seed).normal(0.0, 3.0, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def errors(found: CameraPose, truth: CameraPose) -> tuple[float, float]:
    """Position error (mm) and rotation error (deg)."""
    delta = found.rotation.T @ truth.rotation
    angle = math.degrees(math.acos(np.clip((np.trace(delta) - 1) / 2, -1, 1)))
    return 1000 * float(np.linalg.norm(found.position - truth.position)), angle


# --------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("camera", ["top", "front"])
def test_recovers_the_sim_camera_pose(camera):
    intrinsics = sim_intrinsics("so101", camera, 640, 480)
    truth = sim_camera_pose("so101", camera)
    result = calibrate_camera_pose([render(BOARD, intrinsics, truth)], BOARD, intrinsics)
    position_mm, angle_deg = errors(result.pose, truth)
    print(f"{camera}: {position_mm:.2f} mm, {angle_deg:.3f} deg, RMS {result.rms_error_px:.3f} px")
    assert result.markers_used == (0, 1, 2, 3)
    assert position_mm < 5.0 and angle_deg < 0.5
    assert result.rms_error_px < 0.5 and result.unknown_ids == ()


def test_distorted_lens_and_pooled_frames():
    base = sim_intrinsics("so101", "top", 640, 480)
    intrinsics = Intrinsics(base.k, 640, 480, (-0.2, 0.05, 0.0, 0.0, 0.0))
    truth = CameraPose.from_quat([0.25, 0.05, 0.55], [0.0, 0.7071068, -0.7071068, 0.0])
    images = [render(BOARD, intrinsics, truth, seed) for seed in range(3)]
    result = calibrate_camera_pose(images, BOARD, intrinsics)
    position_mm, angle_deg = errors(result.pose, truth)
    print(f"distorted x3: {position_mm:.2f} mm, {angle_deg:.3f} deg, {result.rms_error_px:.3f} px")
    assert position_mm < 5.0 and angle_deg < 0.5 and result.images_used == 3
    # Ignoring the distortion leaves a visibly worse fit: the model matters.
    wrong = calibrate_camera_pose(images, BOARD, base)
    assert wrong.rms_error_px > 3 * result.rms_error_px


def test_a_misplaced_marker_stands_out():
    intrinsics = sim_intrinsics("so101", "top", 640, 480)
    truth = sim_camera_pose("so101", "top")
    image = render(BOARD, intrinsics, truth)
    moved = [
        MarkerPlacement(m.marker_id, m.xy, 90.0 if m.marker_id == 2 else 0.0) for m in BOARD.markers
    ]
    wrong_board = Board(BOARD.dictionary, BOARD.marker_size, tuple(moved))
    result = calibrate_camera_pose([image], wrong_board, intrinsics)
    errors_px = result.marker_errors_px
    assert max(errors_px, key=errors_px.get) == 2
    assert errors_px[2] > 5 * max(errors_px[i] for i in (0, 1, 3))


# --------------------------------------------------------------------- failures
def test_no_markers_in_view():
    intrinsics = sim_intrinsics("so101", "top", 640, 480)
    blank = np.full((480, 640, 3), TABLE_RGB, np.uint8)
    with pytest.raises(
        CalibrationError,
        match=r"no marker of the board found in 1 image\(s\): "
        r"expected ids \[0, 1, 2, 3\] \(DICT_4X4_50\)",
    ):
        calibrate_camera_pose([blank], BOARD, intrinsics)


def test_too_few_markers_and_foreign_ids():
    intrinsics = sim_intrinsics("so101", "top", 640, 480)
    truth = sim_camera_pose("so101", "top")
    only_zero = Board(BOARD.dictionary, BOARD.marker_size, BOARD.markers[:1])
    image = render(only_zero, intrinsics, truth)
    with pytest.raises(
        CalibrationError,
        match=r"found markers \[0\] of the board's \[0, 1, 2, 3\]"
        r", need at least 2; missing \[1, 2, 3\]",
    ):
        calibrate_camera_pose([image], BOARD, intrinsics)
    assert calibrate_camera_pose([image], BOARD, intrinsics, min_markers=1).markers_used == (0,)
    foreign = Board(
        BOARD.dictionary,
        BOARD.marker_size,
        tuple(MarkerPlacement(m.marker_id + 10, m.xy) for m in BOARD.markers),
    )
    with pytest.raises(CalibrationError, match=r"saw ids \[10, 11, 12, 13\] that are not on"):
        calibrate_camera_pose([render(foreign, intrinsics, truth)], BOARD, intrinsics)


def test_image_size_must_match_the_intrinsics():
    intrinsics = sim_intrinsics("so101", "top", 640, 480)
    with pytest.raises(
        CalibrationError, match="image 0 is 320x240 but the intrinsics are for 640x480"
    ):
        calibrate_camera_pose([np.zeros((240, 320, 3), np.uint8)], BOARD, intrinsics)


# --------------------------------------------------------------------- board files
def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "board.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("dictionary: DICT_4X4_50\nmarker_size: 0.05\n", "missing keys ['markers']"),
        (
            "dictionary: DICT_9X9\nmarker_size: 0.05\nmarkers: {0: {xy: [0, 0]}}\n",
            "unknown ArUco dictionary 'DICT_9X9'",
        ),
        (
            "dictionary: DICT_4X4_50\nmarker_size: -1\nmarkers: {0: {xy: [0, 0]}}\n",
            "marker_size must be > 0",
        ),
        (
            "dictionary: DICT_4X4_50\nmarker_size: 0.05\nmarkers: {60: {xy: [0, 0]}}\n",
            "DICT_4X4_50 has ids 0..49; got [60]",
        ),
        (
            "dictionary: DICT_4X4_50\nmarker_size: 0.05\nmarkers: {0: {pos: [0, 0]}}\n",
            "marker 0 must be a mapping with 'xy'",
        ),
        (
            "dictionary: DICT_4X4_50\nmarker_size: 0.05\nmarkers: {0: {xy: [0]}}\n",
            "marker 0 needs finite xy",
        ),
        ("dictionary: DICT_4X4_50\nmarker_size: 0.05\nmarkers: {}\n", "at least one marker"),
        (
            "dictionary: DICT_4X4_50\nmarker_size: 0.05\nsize: 1\nmarkers: {0: {xy: [0, 0]}}\n",
            "unknown keys ['size']",
        ),
    ],
)
def test_board_file_errors(tmp_path, text, reason):
    with pytest.raises(ConfigError) as info:
        load_board(write(tmp_path, text))
    assert reason in str(info.value)


def test_default_board_and_printable_markers(tmp_path):
    assert BOARD.ids() == [0, 1, 2, 3] and BOARD.marker_size == 0.05
    paths = write_marker_images(BOARD, tmp_path, dpi=150)
    assert [p.name for p in paths] == [f"marker_{i}.png" for i in range(4)]
    sheet = cv2.imread(str(paths[2]), cv2.IMREAD_GRAYSCALE)
    corners, ids, _ = cv2.aruco.ArucoDetector(aruco_dictionary(BOARD.dictionary)).detectMarkers(
        sheet
    )
    assert ids.ravel().tolist() == [2]
    edge = np.linalg.norm(corners[0][0][1] - corners[0][0][0])
    assert edge == pytest.approx(0.05 / 0.0254 * 150, abs=2)  # true size at the print dpi
    side = round(0.05 / 0.0254 * 300)  # 300 dpi by default; one marker cell of margin
    assert marker_image(BOARD, 0).shape[1] == side + 2 * (side // 6)


# --------------------------------------------------------------------- intrinsics files
ROS_YAML = """image_width: 640
image_height: 480
camera_name: narrow_stereo
camera_matrix:
  rows: 3
  cols: 3
  data: [500.0, 0.0, 319.5, 0.0, 502.0, 239.5, 0.0, 0.0, 1.0]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [-0.1, 0.02, 0.0, 0.0, 0.0]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
projection_matrix:
  rows: 3
  cols: 4
  data: [490.0, 0.0, 319.5, 0.0, 0.0, 495.0, 239.5, 0.0, 0.0, 0.0, 1.0, 0.0]
"""


def test_ros_calibration_yaml_round_trip_and_scaling(tmp_path):
    path = tmp_path / "ost.yaml"
    path.write_text(ROS_YAML)
    calibration = load_calibration(path)
    intr = calibration.intrinsics
    assert (intr.width, intr.height, intr.k[1, 1]) == (640, 480, 502.0)
    assert intr.distortion == (-0.1, 0.02, 0.0, 0.0, 0.0)
    assert calibration.projection_matrix()[0, 0] == 490.0
    half = calibration.scaled(320, 240)
    assert half.intrinsics.k[0, 0] == 250.0 and half.projection_matrix()[1, 1] == 247.5
    with pytest.raises(ConfigError, match="another aspect ratio"):
        calibration.scaled(640, 360)
    again = load_calibration(save_calibration(tmp_path / "copy.yaml", calibration, "front"))
    assert (
        np.allclose(again.intrinsics.k, intr.k) and again.intrinsics.distortion == intr.distortion
    )
    path.write_text(ROS_YAML.replace("plumb_bob", "equidistant"))
    with pytest.raises(ConfigError, match="unsupported distortion_model 'equidistant'"):
        load_calibration(path)
    path.write_text(ROS_YAML.replace("image_width: 640", "image_width: -1"))
    with pytest.raises(ConfigError, match="image_width and image_height must be positive"):
        load_calibration(path)
    default = default_calibration(640, 480, 90.0)
    assert default.intrinsics.k[0, 0] == pytest.approx(320.0)
    assert isinstance(default, CameraCalibration)


# --------------------------------------------------------------------- the CLI
def test_calibrate_camera_cli_writes_a_pose(tmp_path, capsys):
    intrinsics = sim_intrinsics("so101", "front", 640, 480)
    truth = sim_camera_pose("so101", "front")
    image = tmp_path / "view.png"
    cv2.imwrite(str(image), cv2.cvtColor(render(BOARD, intrinsics, truth), cv2.COLOR_RGB2BGR))
    lens = save_calibration(tmp_path / "lens.yaml", CameraCalibration(intrinsics), "front")
    out = tmp_path / "camera_front.yaml"
    debug = tmp_path / "debug.png"
    argv = [
        "--image",
        str(image),
        "--board",
        str(REPO / "hardware" / "aruco_board.yaml"),
        "--intrinsics",
        str(lens),
        "--camera",
        "front",
        "--out",
        str(out),
        "--debug-image",
        str(debug),
    ]
    assert calibrate_main(argv) == 0
    printed = capsys.readouterr().out
    assert "markers used: [0, 1, 2, 3]" in printed and "reprojection error: RMS" in printed
    position_mm, angle_deg = errors(load_camera_pose(out, "front"), truth)
    assert position_mm < 5.0 and angle_deg < 0.5 and debug.exists()
    # A too strict error bound writes nothing and says why.
    out.unlink()
    assert calibrate_main([*argv, "--max-error", "0.001"]) == 1
    assert "exceeds --max-error" in capsys.readouterr().err and not out.exists()
