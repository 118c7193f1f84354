"""Camera perception on images of the real MuJoCo scene (World + CameraRenderer, MUJOCO_GL=egl).

Every seeded layout is rendered from the fixed cameras; the detector must name every object on
the table, nothing else, and place each within TOLERANCE of the simulator's ground truth. The
measured errors are printed (pytest -s). Seeds where the arm at its home pose hides an object
from a camera completely are left out of the accuracy tests: no camera sees through the arm.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from lang2policy.errors import ConfigError
from lang2policy.perception import (
    CameraPerception,
    Detector,
    DetectorSettings,
    PinholeCamera,
    RobotMask,
    geometry_for_robot,
    scene_palette,
    sim_camera_pose,
)
from lang2policy.perception.evidence import visible_share
from lang2policy.perception.scene import sim_intrinsics
from lang2policy.perception.silhouette import predicted_outline
from lang2policy.scene.objects import COLORS
from lang2policy.scene.render import CameraRenderer
from lang2policy.scene.world import World

ROBOT = "so101"
WIDTH = HEIGHT = 224  # the sim node's default camera size
TOLERANCE = 0.01  # metres in x and y (the planner needs 1.5 cm; measured errors are ~1 mm)
# Seeds whose every object each camera sees at least in part, with the arm at home.
SEEDS = {"top": (0, 1, 2, 3, 5, 7), "front": (0, 1, 2, 3, 4, 5)}


@pytest.fixture(scope="module")
def camera_scene():
    world = World(ROBOT)
    renderer = CameraRenderer(world.model, WIDTH, HEIGHT)
    mask = RobotMask(ROBOT)
    yield world, renderer, mask
    renderer.close()


def camera_model(name: str) -> PinholeCamera:
    return PinholeCamera(sim_intrinsics(ROBOT, name, WIDTH, HEIGHT), sim_camera_pose(ROBOT, name))


def joints(world: World) -> dict[str, float]:
    positions = [*world.arm_qpos(), world.gripper_opening()]
    return dict(zip(world.arm.action_names, positions, strict=True))


def look(camera_scene, camera: str, seed: int, use_mask: bool = True):
    """(detections by name, world) for ``seed`` seen by ``camera``."""
    world, renderer, mask = camera_scene
    world.reset(seed)
    model = camera_model(camera)
    ignore = None
    if use_mask:
        mask.pose(joints(world))
        ignore = mask.mask(model)
    detector = Detector(model, geometry_for_robot(ROBOT), scene_palette(ROBOT))
    found = detector.detect(renderer.render(world.data, camera), ignore)
    return {o.name: o for o in found}, world


def yaw_error(found_quat, true_yaw: float) -> float:
    """Degrees between a block's yaws, modulo the cube's 90 degree symmetry."""
    w, _, _, z = found_quat
    difference = 2 * math.atan2(z, w) - true_yaw
    return abs(math.degrees((difference + math.pi / 4) % (math.pi / 2) - math.pi / 4))


@pytest.mark.parametrize(
    ("camera", "seed"), [(camera, seed) for camera, seeds in SEEDS.items() for seed in seeds]
)
def test_every_object_is_found_where_it_is(camera_scene, camera, seed):
    found, world = look(camera_scene, camera, seed)
    assert set(found) == set(world.present), f"found {sorted(found)}, on the table {world.present}"
    errors = {}
    for name, obj in found.items():
        truth = world.object_pose(name).position
        errors[name] = math.dist(obj.position[:2], truth[:2])
        assert obj.position[2] == pytest.approx(truth[2], abs=0.002), name
        assert obj.kind == world.object_kind(name) and obj.size == world.object_size(name)
        assert obj.rgba == pytest.approx((*COLORS[name.split()[0]], 1.0))
    in_mm = {name: round(error * 1000, 1) for name, error in errors.items()}
    print(f"\n{camera} seed {seed}: xy error mm {in_mm}")
    assert max(errors.values()) < TOLERANCE, errors


def test_block_yaw_is_measured(camera_scene):
    errors = []
    for seed in SEEDS["top"]:
        found, world = look(camera_scene, "top", seed)
        errors += [
            yaw_error(obj.quat, world.object_yaw(name))
            for name, obj in found.items()
            if obj.kind == "block"
        ]
    print(f"\nyaw error (deg): median {np.median(errors):.1f}, max {max(errors):.1f}")
    assert np.median(errors) < 3.0 and max(errors) < 20.0, errors


def test_bowl_half_hidden_by_the_gripper_is_placed_by_its_visible_rim(camera_scene):
    # Seed 3: the gripper hangs over the red bowl in the top view and cuts it in two.
    found, world = look(camera_scene, "top", 3)
    truth = world.object_pose("red bowl").position
    assert math.dist(found["red bowl"].position[:2], truth[:2]) < TOLERANCE


def test_an_object_the_robot_hides_almost_whole_is_not_named(camera_scene):
    # The robot's pixels (the mask) widened over the blue bowl of seed 1 from the left: with
    # half of it in view it is found; with a strip of 8 % left it is "not seen", though the
    # strip's edge alone fits a bowl (as the edge of a cup at the arm's side does:
    # perception.evidence); without the rule (min_visible 0) it would be named.
    world, renderer, mask = camera_scene
    world.reset(1)
    model = camera_model("top")
    mask.pose(joints(world))
    geometry = geometry_for_robot(ROBOT)
    bowl = world.object_pose("blue bowl").position
    outline = predicted_outline(model, geometry.bowl, (bowl[0], bowl[1], 0.0), geometry.table_z)
    image = renderer.render(world.data, "top")
    left, right = outline[:, 0].min(), outline[:, 0].max()
    found, rule = {}, DetectorSettings().min_visible
    for share in (0.5, 0.1):
        ignore = mask.mask(model).copy()
        ignore[:, : round(right - share * (right - left))] = True  # all but a strip
        found[share, "visible"] = round(visible_share(outline, ignore), 2)
        for least in (rule, 0.0):
            settings = DetectorSettings(min_visible=least)
            detector = Detector(model, geometry, scene_palette(ROBOT), settings)
            found[share, least] = "blue bowl" in {o.name for o in detector.detect(image, ignore)}
    print(f"\n{found}")
    assert found[0.1, "visible"] < rule < found[0.5, "visible"]
    assert found[0.5, rule] and not found[0.1, rule] and found[0.1, 0.0]


@pytest.mark.parametrize("camera", ["top", "front"])
def test_a_block_in_a_bowl_stands_on_its_floor(camera_scene, camera):
    world, renderer, mask = camera_scene
    world.reset(1)
    bowl = world.object_pose("blue bowl").position
    block = world.objects["pink block"].qpos_adr
    world.data.qpos[block : block + 3] = (bowl[0] + 0.01, bowl[1], 0.04)  # dropped into it
    world.step_seconds(0.5)
    assert ("pink block", "in", "blue bowl") in world.relations()
    model = camera_model(camera)
    mask.pose(joints(world))
    detector = Detector(model, geometry_for_robot(ROBOT), scene_palette(ROBOT))
    found = {
        o.name: o for o in detector.detect(renderer.render(world.data, camera), mask.mask(model))
    }
    truth = world.object_pose("pink block").position
    assert math.dist(found["pink block"].position[:2], truth[:2]) < 0.005
    assert found["pink block"].position[2] == pytest.approx(truth[2], abs=0.002)  # on the floor


def test_without_the_robot_mask_the_arms_paint_looks_like_blocks(camera_scene):
    # Why the mask exists: the SO-101's yellow, shaded and over-exposed, passes for objects.
    found, world = look(camera_scene, "top", 0, use_mask=False)
    assert set(found) - set(world.present), "expected false detections on the arm"
    masked, _ = look(camera_scene, "top", 0)
    assert set(masked) == set(world.present)


@pytest.mark.parametrize("pan", [-0.8, 0.8])
def test_the_mask_follows_the_arm_to_other_poses(camera_scene, pan):
    import mujoco

    world, renderer, mask = camera_scene
    model = camera_model("front")
    detector = Detector(model, geometry_for_robot(ROBOT), scene_palette(ROBOT))
    for seed in (0, 1):
        world.reset(seed)
        arm = world.arm_qpos()
        arm[:3] = (pan, -1.4, 1.0)  # swung to a side, raised
        world.data.qpos[world.arm.qpos_adr] = arm
        mujoco.mj_forward(world.model, world.data)
        mask.pose(joints(world))
        found = detector.detect(renderer.render(world.data, "front"), mask.mask(model))
        assert {o.name for o in found} == set(world.present)
        for obj in found:
            assert math.dist(obj.position[:2], world.object_pose(obj.name).position[:2]) < TOLERANCE


def test_robot_mask_covers_the_rendered_arm(camera_scene):
    import mujoco

    world, _, mask = camera_scene
    world.reset(0)
    mask.pose(joints(world))
    covered = mask.mask(camera_model("front"))
    segmentation = mujoco.Renderer(world.model, HEIGHT, WIDTH)
    segmentation.enable_segmentation_rendering()
    segmentation.update_scene(world.data, camera="front")
    ids = segmentation.render()
    segmentation.close()
    robot_root = world.model.body_rootid[world.model.site_bodyid[world.arm.ee_site_id]]
    geom_root = world.model.body_rootid[world.model.geom_bodyid]
    is_geom = ids[..., 1] == mujoco.mjtObj.mjOBJ_GEOM
    arm = is_geom & (geom_root[np.maximum(ids[..., 0], 0)] == robot_root)
    assert arm.sum() > 500
    assert covered[arm].mean() > 0.99  # the mask holds the arm
    assert covered.sum() < 2.0 * arm.sum()  # and not much more


def test_pipeline_processes_frames_and_reports_timing(camera_scene):
    world, renderer, _ = camera_scene
    perception = CameraPerception(ROBOT, sim_camera_pose(ROBOT, "front"), max_missed=1)
    image = renderer.render(world.data, "front")
    with pytest.raises(ConfigError, match="waiting for camera intrinsics"):
        perception.process(image)
    assert perception.set_intrinsics(sim_intrinsics(ROBOT, "front", WIDTH, HEIGHT))
    assert not perception.set_intrinsics(sim_intrinsics(ROBOT, "front", WIDTH, HEIGHT))
    assert perception.waiting_for() == "joint positions (for the robot mask)"
    perception.set_joints(joints(world))
    seconds = []
    for seed in SEEDS["front"]:
        world.reset(seed)
        image = renderer.render(world.data, "front")
        start = time.perf_counter()
        update = perception.process(image)
        seconds.append(time.perf_counter() - start)
        assert set(update.added) <= set(world.present)
    # Objects of the layout before are kept for max_missed = 1 frame, then dropped.
    assert {o.name for o in perception.objects} > set(world.present)
    update = perception.process(image)
    assert update.dropped and {o.name for o in perception.objects} == set(world.present)
    print(f"\nper frame ({WIDTH}x{HEIGHT}): median {1000 * np.median(seconds):.1f} ms")


def test_detector_rejects_images_it_cannot_use(camera_scene):
    detector = Detector(camera_model("top"), geometry_for_robot(ROBOT), scene_palette(ROBOT))
    with pytest.raises(ConfigError, match=r"uint8 RGB image, got float64"):
        detector.detect(np.zeros((HEIGHT, WIDTH, 3)))
    with pytest.raises(ConfigError, match=r"uint8 RGB image.*\(224, 224\)"):
        detector.detect(np.zeros((HEIGHT, WIDTH), np.uint8))
    with pytest.raises(
        ConfigError, match="image is 100x80 but the camera intrinsics are for 224x224"
    ):
        detector.detect(np.zeros((80, 100, 3), np.uint8))
    with pytest.raises(ConfigError, match="ignore mask"):
        detector.detect(np.zeros((HEIGHT, WIDTH, 3), np.uint8), np.zeros((5, 5), bool))
    assert detector.detect(np.full((HEIGHT, WIDTH, 3), 140, np.uint8)) == []  # a bare table
