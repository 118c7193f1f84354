"""The pure parts of perception, on synthetic inputs: camera geometry, pose files, image decoding,
record validation, colour classes, blobs, shape fitting and the object tracker."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.perception import (
    CameraPose,
    Intrinsics,
    ObjectTracker,
    PerceivedObject,
    PinholeCamera,
    decode_image,
    intrinsics_from_camera_info,
    load_camera_pose,
    load_palette,
    palette_from_colors,
    save_camera_pose,
    scene_palette,
    sim_camera_pose,
    validate_objects,
)
from lang2policy.perception.palette import UNKNOWN
from lang2policy.perception.segmentation import find_blobs
from lang2policy.perception.silhouette import Shape, fit_shape, predicted_outline, signed_distance
from lang2policy.scene.objects import COLORS

K = np.array([[300.0, 0.0, 159.5], [0.0, 300.0, 119.5], [0.0, 0.0, 1.0]])
# Looking straight down from 0.6 m: optical x = world -y, optical y = world -x.
DOWN = np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])


def overhead(distortion=()) -> PinholeCamera:
    return PinholeCamera(Intrinsics(K, 320, 240, distortion), CameraPose([0.2, 0.0, 0.6], DOWN))


# --------------------------------------------------------------------- camera geometry
def test_pixels_go_back_to_the_points_they_came_from():
    camera = overhead()
    points = np.array([[0.2, 0.0, 0.0], [0.25, -0.1, 0.0], [0.1, 0.12, 0.0]])
    pixels = camera.project(points)
    assert pixels[0] == pytest.approx([159.5, 119.5])  # straight below: the principal point
    assert camera.to_plane(pixels, 0.0) == pytest.approx(points)
    raised = points + np.array(
        [0, 0, 0.025]
    )  # the same pixels meet a higher plane nearer the camera
    assert np.linalg.norm(camera.to_plane(camera.project(raised), 0.025) - raised) < 1e-9


def test_lens_distortion_is_undone():
    camera = overhead(distortion=(-0.2, 0.05, 0.001, -0.001, 0.0))
    points = np.array([[0.05, -0.15, 0.0], [0.3, 0.14, 0.0]])
    pixels = camera.project(points)
    assert not np.allclose(pixels, overhead().project(points), atol=1.0)  # it does distort
    assert camera.to_plane(pixels, 0.0) == pytest.approx(points, abs=1e-6)


def test_rays_that_miss_the_plane_give_nan():
    camera = overhead()
    assert np.isnan(camera.to_plane(np.array([[159.5, 119.5]]), 0.8)).all()  # behind the camera


@pytest.mark.parametrize(
    ("k", "size", "distortion", "reason"),
    [
        (np.zeros((3, 3)), (320, 240), (), "not calibrated"),
        (np.eye(2), (320, 240), (), "finite 3x3"),
        (np.diag([-300.0, 300.0, 1.0]), (320, 240), (), "fx, fy > 0"),
        (K, (100, 100), (), "principal point (159.5, 119.5) lies outside the 100x100 image"),
        (K, (0, 240), (), "must be positive"),
        (K, (320, 240), (0.1, 0.2, 0.3), "distortion must be"),
        (K, (320, 240), (math.nan,) * 5, "distortion must be"),
    ],
)
def test_bad_intrinsics_are_refused_with_a_reason(k, size, distortion, reason):
    with pytest.raises(ConfigError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        Intrinsics(k, *size, distortion)


def test_intrinsics_from_camera_info_fields():
    intrinsics = intrinsics_from_camera_info(K.ravel().tolist(), 320, 240, [0.0] * 5)
    assert intrinsics.distortion == () and intrinsics.k == pytest.approx(K)
    with pytest.raises(ConfigError, match="9 numbers"):
        intrinsics_from_camera_info([1.0, 2.0], 320, 240)
    with pytest.raises(ConfigError, match="unsupported distortion model 'equidistant'"):
        intrinsics_from_camera_info(K.ravel().tolist(), 320, 240, [0.1] * 4, "equidistant")


# --------------------------------------------------------------------- camera poses
def test_camera_pose_conversions():
    pose = CameraPose.from_quat([0.2, 0.0, 0.6], [0.0, 2.0, -2.0, 0.0])  # normalised
    assert pose.rotation == pytest.approx(DOWN)
    again = CameraPose.from_quat(pose.position, pose.quat())  # q and -q: the same rotation
    assert again.rotation == pytest.approx(DOWN)
    assert np.linalg.norm(pose.quat()) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="not a proper rotation"):
        CameraPose([0, 0, 1], np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ConfigError, match="quat must be 4 finite"):
        CameraPose.from_quat([0, 0, 1], [0, 0, 0, 0])


def test_pose_from_solvepnp_matches_the_camera():
    """What an ArUco calibration gets from cv2.solvePnP turns back into the camera's pose."""
    camera = overhead()
    board = np.array([[x, y, 0.0] for x in (0.1, 0.2, 0.3) for y in (-0.1, 0.0, 0.1)])
    ok, rvec, tvec = cv2.solvePnP(board, camera.project(board), K, None)
    assert ok
    pose = CameraPose.from_rvec_tvec(rvec.ravel(), tvec.ravel())
    assert pose.position == pytest.approx(camera.pose.position, abs=1e-6)
    assert pose.rotation == pytest.approx(camera.pose.rotation, abs=1e-6)


def test_pose_file_round_trip_and_errors(tmp_path):
    pose = sim_camera_pose("so101", "top")
    path = save_camera_pose(tmp_path / "camera_top.yaml", pose, "top")
    loaded = load_camera_pose(path, "top")
    assert loaded.position == pytest.approx(pose.position)
    assert loaded.rotation == pytest.approx(pose.rotation, abs=1e-6)
    with pytest.raises(ConfigError, match="is the pose of camera 'top', not 'front'"):
        load_camera_pose(path, "front")
    bad = tmp_path / "bad.yaml"
    bad.write_text("position: [0, 0, 1]\nrotation: [1, 0, 0]\n")
    with pytest.raises(ConfigError, match=r"unknown keys \['rotation'\], missing keys \['quat'\]"):
        load_camera_pose(bad)
    bad.write_text("position: [0, 0, .nan]\nquat: [1, 0, 0, 0]\n")
    with pytest.raises(ConfigError, match="position must be 3 finite numbers"):
        load_camera_pose(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_camera_pose(tmp_path / "missing.yaml")


def test_sim_camera_poses_come_from_the_scene():
    top = sim_camera_pose("so101", "top")  # config/robots/so101.yaml: 0.62 m up, looking down
    assert top.position == pytest.approx([0.21, 0.0, 0.62])
    assert top.rotation[:, 2] == pytest.approx([0.0, 0.0, -1.0])  # optical axis: down
    front = sim_camera_pose("so101", "front")  # looks from pos towards target
    view = np.subtract([0.16, 0.0, 0.04], [0.5, -0.12, 0.3])
    assert front.rotation[:, 2] == pytest.approx(view / np.linalg.norm(view))
    with pytest.raises(ConfigError, match=r"'wrist' moves with the robot.*\['front', 'top'\]"):
        sim_camera_pose("so101", "wrist")
    with pytest.raises(ConfigError, match="unknown camera 'side'"):
        sim_camera_pose("so101", "side")


# --------------------------------------------------------------------- images
@pytest.mark.parametrize(("encoding", "order"), [("rgb8", [0, 1, 2]), ("bgr8", [2, 1, 0])])
def test_decode_three_channel_images_with_row_padding(encoding, order):
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    rows = np.zeros((2, 12), np.uint8)  # step 12 > 9: 3 bytes of padding per row
    rows[:, :9] = rgb[:, :, order].reshape(2, 9)
    assert np.array_equal(decode_image(rows.tobytes(), 3, 2, 12, encoding), rgb)


def test_decode_four_channel_images():
    bgra = np.array([[[3, 2, 1, 255]]], np.uint8)
    assert decode_image(bgra.tobytes(), 1, 1, 4, "bgra8").tolist() == [[[1, 2, 3]]]


@pytest.mark.parametrize(
    ("data", "width", "height", "step", "encoding", "reason"),
    [
        (b"\0" * 4, 2, 2, 2, "mono8", "unsupported image encoding 'mono8'"),
        (b"\0" * 11, 2, 2, 6, "rgb8", "has 11 bytes; 2 rows of step 6 need 12"),
        (b"\0" * 8, 2, 2, 4, "rgb8", "step 4 is shorter than a row"),
        (b"", 0, 0, 0, "rgb8", "empty image"),
    ],
)
def test_decode_rejects_bad_images(data, width, height, step, encoding, reason):
    with pytest.raises(ConfigError, match=reason):
        decode_image(data, width, height, step, encoding)


# --------------------------------------------------------------------- records
def record(name="red block", **changes) -> PerceivedObject:
    return PerceivedObject(name, (0.2, 0.0, 0.0125))._replace(**changes)


def test_valid_records_pass_normalised():
    [obj] = validate_objects([record(quat=(2.0, 0.0, 0.0, 0.0))])
    assert obj.quat == (1.0, 0.0, 0.0, 0.0) and obj.position == (0.2, 0.0, 0.0125)
    assert validate_objects([]) == []


@pytest.mark.parametrize(
    ("records", "reason"),
    [
        ([record(), record()], "'red block' appears twice"),
        ([record(name=" ")], "name must be a non-empty string"),
        ([record(position=(0.0, math.nan, 0.0))], "position must be 3 finite numbers"),
        ([record(position=(0.0, 0.0))], "position must be 3 finite numbers"),
        ([record(quat=(0.0, 0.0, 0.0, 0.0))], "quat is all zeros"),
        ([record(size=0.0)], "size must be a finite number > 0"),
        ([record(rgba=(1.0, 0.0, 0.0, 2.0))], r"rgba values must lie in 0..1"),
        ([record(kind=3)], "kind must be a string"),
        ([("red block", (0, 0, 0))], "expected fields"),
    ],
)
def test_bad_records_are_refused_with_a_reason(records, reason):
    with pytest.raises(ConfigError, match=reason):
        validate_objects(records)


# --------------------------------------------------------------------- colours and blobs
def shade(rgb, k: float, highlight: float = 0.0) -> np.ndarray:
    return np.clip(np.round((np.asarray(rgb) * k + highlight) * 255), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("name", sorted(COLORS))
def test_every_scene_colour_is_recognised_in_light_and_shade(name):
    palette = scene_palette("so101")
    pixels = np.array(
        [[shade(COLORS[name], k, w) for k in (0.5, 0.8, 1.0, 1.2)] for w in (0, 0.06)]
    )
    labels = palette.classify(pixels)
    # Orange and brown share a hue: single pixels may go either way (blobs decide, see below).
    allowed = {"orange", "brown"} if name in ("orange", "brown") else {name}
    assert {palette.names[i] for i in labels.ravel()} <= allowed
    assert name in {palette.names[i] for i in labels.ravel()}


def test_table_floor_and_shadow_are_no_object_colour():
    palette = scene_palette("so101")
    table, floor, black = shade((0.55, 0.47, 0.38), 1.1), shade((0.22, 0.24, 0.27), 0.5), (5, 5, 5)
    labels = palette.classify(np.array([[table, floor, black]], np.uint8))
    named = [palette.names[i] for i in labels.ravel() if i != UNKNOWN]
    assert not any(named), named


def test_orange_and_brown_blobs_are_told_apart():
    """Single pixels of a dim orange and a bright brown look alike; whole blobs do not."""
    palette = palette_from_colors({"orange": COLORS["orange"], "brown": COLORS["brown"]})
    image = np.full((60, 120, 3), 140, np.uint8)
    image[10:50, 10:50] = shade(COLORS["orange"], 1.1, 0.1)  # over-exposed top face
    image[40:50, 10:50] = shade(COLORS["orange"], 0.6, 0.05)  # a shaded side
    image[10:50, 70:110] = shade(COLORS["brown"], 1.3)
    image[40:50, 70:110] = shade(COLORS["brown"], 0.6)
    blobs = sorted(find_blobs(image, palette), key=lambda b: b.centroid[0])
    assert [b.color for b in blobs] == ["orange", "brown"]
    assert [b.area for b in blobs] == [1600, 1600]


def test_blobs_know_their_hidden_edges():
    palette = palette_from_colors({"red": COLORS["red"]})
    image = np.full((60, 80, 3), 140, np.uint8)
    image[10:40, 10:40] = shade(COLORS["red"], 1.0)
    ignore = np.zeros((60, 80), bool)
    ignore[:, 30:] = True  # the right part of the square is behind the robot
    [blob] = find_blobs(image, palette, ignore=ignore)
    assert blob.occluded and not blob.touches_border and blob.area == 30 * 20
    assert blob.edge[:, 0].max() < 28  # no edge point where the robot cuts the blob
    with_hole = image.copy()
    with_hole[20:30, 20:30] = 140
    [ring] = find_blobs(with_hole, palette)
    assert ring.hole_fraction == pytest.approx(100 / 900)


def test_palette_file(tmp_path):
    path = tmp_path / "palette.yaml"
    path.write_text("colors:\n  red: [0.8, 0.1, 0.1]\ndistractors:\n  - [1.0, 0.82, 0.12]\n")
    palette = load_palette(path)
    assert palette.names == ["red", ""]
    path.write_text("colours:\n  red: [0.8, 0.1, 0.1]\n")
    with pytest.raises(ConfigError, match=r"unknown keys: \['colours'\]"):
        load_palette(path)
    path.write_text("colors:\n  red: [2, 0, 0]\n")
    with pytest.raises(ConfigError, match=r"rgb must be 3 numbers in 0\.\.1"):
        load_palette(path)


# --------------------------------------------------------------------- shape fitting
def test_signed_distance_is_positive_inside():
    square = cv2.convexHull(np.array([[0, 0], [10, 0], [10, 10], [0, 10]], np.float32))
    distance, gradient = signed_distance(
        np.array([[5.0, 5.0], [5.0, 12.0], [5.0, 1.0]]), square.reshape(-1, 2).astype(float)
    )
    assert distance == pytest.approx([5.0, -2.0, 1.0])
    # Shifting the square down (+v) brings its bottom edge nearer (5, 12), outside below it.
    assert gradient[1] == pytest.approx([0.0, 1.0])


@pytest.mark.parametrize("kind", ["block", "bowl"])
def test_fit_recovers_the_position_from_a_partly_hidden_outline(kind):
    camera = overhead()
    shape = Shape("block", 0.0125, 0.025) if kind == "block" else Shape("bowl", 0.046, 0.0285)
    true = (0.23, -0.05, 0.3)
    outline = predicted_outline(camera, shape, true, 0.0)
    dense = np.concatenate(
        [
            np.linspace(a, b, 20, endpoint=False)
            for a, b in zip(outline, np.roll(outline, -1, 0), strict=True)
        ]
    )
    centre = camera.project(np.array([[*true[:2], 0.0]]))[0]
    visible = dense[dense[:, 0] < centre[0] + 2]  # the right half is hidden
    cut = np.column_stack(
        [np.full(20, centre[0] + 2), np.linspace(dense[:, 1].min(), dense[:, 1].max(), 20)]
    )
    fit = fit_shape(camera, shape, np.vstack([visible, cut]), (0.245, -0.04, 0.3), 0.0)
    assert math.dist((fit.x, fit.y), true[:2]) < 1e-3
    assert fit.support > 0.6


# --------------------------------------------------------------------- tracker
def test_tracker_keeps_unseen_objects_for_max_missed_frames():
    tracker = ObjectTracker(max_missed=2)
    red, blue = record("red block"), record("blue block", position=(0.1, 0.1, 0.0125))
    assert tracker.update([red, blue]).added == ("blue block", "red block")
    moved = red._replace(position=(0.3, 0.0, 0.0125))
    for _ in range(2):
        update = tracker.update([moved])
        assert not update.changed and len(tracker.objects) == 2
    assert tracker.missed("blue block") == 2
    assert tracker.update([moved]).dropped == ("blue block",)
    assert tracker.objects == [moved]  # the latest pose of what is seen
    assert ObjectTracker(0).update([red]).added == ("red block",)
    with pytest.raises(ConfigError, match="max_missed must be"):
        ObjectTracker(-1)


def test_tracker_keeps_what_the_arm_hides_and_drops_it_once_the_view_shows_the_table():
    tracker = ObjectTracker(max_missed=1)
    red, bowl = record("red block"), record("blue bowl", position=(0.1, 0.1, 0.0))
    tracker.update([red, bowl])
    behind_the_arm = {"blue bowl"}
    for _ in range(20):  # two seconds at 10 Hz behind the arm: kept, never missed
        update = tracker.update([red], hidden=lambda obj: obj.name in behind_the_arm)
        assert not update.changed and tracker.missed("blue bowl") == 0
    behind_the_arm.clear()  # the arm moved on and the table shows where the bowl was
    assert not tracker.update([red], hidden=lambda obj: obj.name in behind_the_arm).changed
    assert tracker.update([red], hidden=lambda obj: False).dropped == ("blue bowl",)


def test_a_new_name_joins_only_after_confirm_frames_in_a_row():
    tracker = ObjectTracker(max_missed=0, confirm=3)
    red, glint = record("red block"), record("yellow block", position=(0.2, 0.1, 0.0125))
    assert tracker.update([red]).added == ("red block",)  # the first frame as it is
    for frames in ([red, glint], [red, glint], [red], [red, glint]):  # seen 2, then 1
        assert not tracker.update(frames).changed
    assert not tracker.update([red, glint]).changed  # 2 in a row
    assert tracker.update([red, glint]).added == ("yellow block",)  # 3 in a row
    with pytest.raises(ConfigError, match="confirm must be an integer >= 1"):
        ObjectTracker(0, confirm=0)
