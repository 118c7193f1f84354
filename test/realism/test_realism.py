"""Realism profiles: checked on load, drawn per seed, applied to the world and its images."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.perception.camera_pose import sim_camera_pose
from lang2policy.realism import LEVELS, load_realism
from lang2policy.realism.image_effects import apply_image_effects
from lang2policy.realism.profile import realism_from_dict, realism_path
from lang2policy.realism.scene_look import ImageEffects, SceneLook, temperature_rgb
from lang2policy.scene.render import CameraRenderer
from lang2policy.scene.world import World


def test_the_shipped_levels_load_and_only_off_is_off():
    profiles = {level: load_realism(level) for level in LEVELS}
    assert profiles["off"].is_off and profiles["off"].name == "off"
    assert not profiles["mild"].is_off and not profiles["hard"].is_off
    assert profiles["hard"].camera.noise > profiles["mild"].camera.noise > 0
    assert profiles["mild"].to_dict()["servo"]["backlash_ticks"] == 4.0


def test_a_copied_file_loads_by_path(tmp_path):
    mine = tmp_path / "bench_room.yaml"
    shutil.copy(realism_path("mild"), mine)
    assert load_realism(mine) == load_realism("mild")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"lights": {}}, r"unknown key\(s\) \['lights'\]"),
        ({"light": {"brightness": 1}}, r"light\.\['brightness'\]"),
        ({"camera": {"noise": 99}}, r"camera\.noise must be a number in \[0, 30\], got 99"),
        ({"camera": {"noise": math.nan}}, r"camera\.noise must be a number in \[0, 30\], got nan"),
        ({"light": {"intensity": [1.3, 0.7]}}, r"light\.intensity range \[1\.3, 0\.7\]"),
        ({"light": {"intensity": 1.0}}, r"light\.intensity must be a range \[low, high\]"),
        ({"light": {"shadows": "yes"}}, r"light\.shadows must be true or false"),
        ({"table": {"distractors": [0, 1.5]}}, r"table\.distractors must be an integer"),
        ({"version": 2}, r"version must be 1"),
        ({"name": False}, r"name must be a short text"),
    ],
)
def test_a_bad_value_is_refused_with_its_key_and_what_is_allowed(data, message):
    with pytest.raises(ConfigError, match=message):
        realism_from_dict(data, "my.yaml")


def test_an_unknown_level_says_what_is_allowed():
    with pytest.raises(ConfigError, match="allowed: off, mild, hard or the path of a YAML"):
        load_realism("medium")


@pytest.fixture(scope="module")
def worlds():
    return (
        World("so101"),
        World("so101", realism=load_realism("off")),
        World("so101", realism=load_realism("mild")),
    )


def render(world: World, seed: int) -> np.ndarray:
    world.reset(seed)
    renderer = CameraRenderer(world.model, 160, 120)
    try:
        return renderer.render(world.data, "top")
    finally:
        renderer.close()


def test_off_is_todays_world_byte_for_byte(worlds):
    plain, off, _ = worlds
    assert off.realism is None and off.look is None
    assert plain.model.nbody == off.model.nbody and plain.model.ntex == off.model.ntex
    np.testing.assert_array_equal(render(plain, 3), render(off, 3))


def test_a_seed_draws_the_same_look_every_time_and_looks_do_not_compound(worlds):
    plain, _, mild = worlds
    first = render(mild, 3)
    look_3 = mild.look
    render(mild, 4)
    assert not np.array_equal(mild.look.light_scale, look_3.light_scale)
    again = render(mild, 3)  # the look of seed 3 from the look of seed 4, not a mix
    np.testing.assert_array_equal(first, again)
    assert np.abs(first.astype(int) - render(plain, 3).astype(int)).mean() > 2


def test_the_camera_is_off_its_calibration_which_stays_nominal(worlds):
    _, _, mild = worlds
    mild.reset(3)
    top = mild.model.camera("top").id
    moved = np.linalg.norm(mild.model.cam_pos[top] - mild.nominal.cam_pos[top])
    assert 0 < moved <= math.sqrt(3) * 0.002 + 1e-9  # mild: up to 2 mm per axis
    assert mild.model.cam_fovy[top] != mild.nominal.cam_fovy[top]
    calibrated = sim_camera_pose("so101", "top").position
    np.testing.assert_allclose(calibrated, mild.nominal.cam_pos[top], atol=1e-9)


def test_distractors_stand_clear_of_the_objects_and_do_not_collide():
    hard = World("so101", realism=load_realism("hard"))
    hard.reset(5)
    assert 1 <= len(hard.look.distractors) <= 2
    for _color, (x, y, _yaw) in hard.look.distractors:
        for name in hard.present:
            assert math.dist((x, y), hard.object_pose(name).position[:2]) > 0.07
    geoms = [g for g in range(hard.model.ngeom) if "distractor" in hard.model.geom(g).name]
    assert geoms and all(
        hard.model.geom_contype[g] == hard.model.geom_conaffinity[g] == 0 for g in geoms
    )


def test_image_effects_are_reproducible_and_off_leaves_the_frame_alone():
    frame = np.full((40, 50, 3), 100, np.uint8)
    assert apply_image_effects(frame, ImageEffects(), np.random.default_rng(0)) is frame
    effects = ImageEffects(exposure=1.2, blur_px=1.0, noise=4.0)
    a = apply_image_effects(frame, effects, np.random.default_rng(5))
    b = apply_image_effects(frame, effects, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - 120) < 1.0 and 2.0 < a.std() < 6.0


def test_warm_light_is_red_and_white_light_is_neutral():
    np.testing.assert_allclose(temperature_rgb(6500), 1.0, atol=1e-9)
    warm = temperature_rgb(3000)
    assert warm[0] > warm[1] > warm[2]


def test_draw_uses_only_the_seed(worlds):
    _, _, mild = worlds
    mild.reset(8)
    taken = [mild.object_pose(n).position[:2] for n in mild.present]
    a = SceneLook.draw(mild.realism, 8, mild, taken)
    b = SceneLook.draw(mild.realism, 8, mild, taken)
    np.testing.assert_array_equal(a.camera_turn, b.camera_turn)
    assert a.object_hsv == b.object_hsv


def test_a_rig_keeps_its_objects_shades_and_table_tint_while_the_light_changes(worlds):
    _, _, mild = worlds
    mild.reset(8)
    taken = [mild.object_pose(n).position[:2] for n in mild.present]
    free = [SceneLook.draw(mild.realism, seed, mild, taken) for seed in (8, 9)]
    rig = [SceneLook.draw(mild.realism, seed, mild, taken, rig=2) for seed in (8, 9)]
    assert rig[0].object_hsv == rig[1].object_hsv  # one user's objects, every episode
    np.testing.assert_array_equal(rig[0].table_shift, rig[1].table_shift)
    assert free[0].object_hsv != free[1].object_hsv  # without a rig: drawn per episode
    other = SceneLook.draw(mild.realism, 8, mild, taken, rig=3)
    assert other.object_hsv != rig[0].object_hsv  # another user's objects
    for with_rig, without in zip(rig, free, strict=True):  # the episode's own draws stay
        np.testing.assert_array_equal(with_rig.light_rgb, without.light_rgb)
        np.testing.assert_array_equal(with_rig.camera_pos, without.camera_pos)
    assert not np.array_equal(rig[0].light_rgb, rig[1].light_rgb)
