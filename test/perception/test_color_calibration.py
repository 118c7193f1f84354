"""Colour calibration and white balance: a palette fitted from frames of the user's objects
under one light finds them under another, and bad input is refused with what is allowed."""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest

from lang2policy.bench.perception import CALIBRATION_FRAMES, LevelRun
from lang2policy.errors import ConfigError
from lang2policy.perception.calibrate_colors import main as calibrate_colors_main
from lang2policy.perception.color_calibration import CalibrationFrame, fit_palette, save_palette
from lang2policy.perception.palette import load_palette
from lang2policy.perception.scene import scene_palette, scene_table_color
from lang2policy.perception.white_balance import WhiteBalance
from lang2policy.realism.scene_look import temperature_rgb
from lang2policy.scene.objects import COLORS

RIG = 5
BLOCKS = ["blue", "green", "red", "yellow", "purple"]


@pytest.fixture(scope="module")
def mild():
    run = LevelRun("so101", "mild", "top", 224)
    run.world.rig = RIG  # one user's objects and table: the same shades in every layout
    yield run
    run.close()


def frame_of(run: LevelRun, seed: int, names: list[str]):
    run.session.reset(seed, objects=names)
    rgb, visible = run.frame(seed, 0)
    run._mask.pose(run.joints())
    return rgb, visible, run._mask.mask(run.calibrated)


def test_white_balance_takes_a_warm_light_out_against_the_table():
    table = np.array(scene_table_color("so101"))
    image = np.full((60, 60, 3), table * 255 * 0.9)
    image[20:30, 20:30] = (128, 128, 128)  # a grey object on the table
    warm = temperature_rgb(3500)  # red kept, green and blue cut
    seen = np.clip(image * warm, 0, 255).astype(np.uint8)
    balance = WhiteBalance(tuple(table))
    np.testing.assert_allclose(balance.gains(seen), warm / warm.max(), atol=0.02)
    grey = balance.correct(seen)[25, 25].astype(float)
    assert np.ptp(grey) <= 4  # grey again, not the warm light's orange
    with pytest.raises(ConfigError, match="table's colour"):
        WhiteBalance((0.5, float("nan"), 0.4))


def test_a_palette_fitted_under_one_light_finds_the_objects_under_another(mild):
    rgb, visible, ignore = frame_of(mild, 900_100, [f"{c} block" for c in BLOCKS])
    assert min(visible.values()) >= 60, visible  # the calibration layout shows every block
    fit = fit_palette([CalibrationFrame(rgb, tuple(BLOCKS), ignore)], scene_palette("so101"))
    assert sorted(fit.measured) == sorted(BLOCKS) and fit.missed == []
    assert fit.palette.table is not None
    named = {c.name: c for c in fit.palette.colors if c.name}
    assert all(named[c].measured for c in BLOCKS) and not named["cyan"].measured

    found, expected, lights = 0, 0, set()
    for seed in (11, 12, 13, 14):
        perception = mild.perception_with(fit.palette)
        mild.session.reset(seed, objects=["red block", "green block", "blue bowl"])
        lights.add(tuple(np.round(mild.world.look.light_rgb, 3)))
        rgb, visible = mild.frame(seed, 0)
        perception.set_joints(mild.joints(), mild.world.data.time)
        perception.process(rgb, mild.world.data.time)
        names = {o.name for o in perception.objects}
        assert names <= set(mild.world.present)  # never a name that is not on the table
        shown = [n for n, px in visible.items() if px >= 20]
        expected += len(shown)
        found += len(names & set(shown))
    assert len(lights) == 4  # each layout under its own light
    assert found >= expected - 1, (found, expected)


def test_bad_calibration_input_is_refused_with_what_is_allowed(mild):
    rgb, _visible, _ignore = frame_of(mild, 900_100, [f"{c} block" for c in BLOCKS])
    base = scene_palette("so101")
    with pytest.raises(ConfigError, match="known:"):
        fit_palette([CalibrationFrame(rgb, ("teal",))], base)
    with pytest.raises(ConfigError, match=r"1\.\.50 frames"):
        fit_palette([], base)
    with pytest.raises(ConfigError, match="too little of the table"):
        fit_palette([CalibrationFrame(np.zeros_like(rgb), ("red",))], base)


def test_the_command_writes_a_palette_the_perception_node_loads(mild, tmp_path):
    rgb, _visible, _ignore = frame_of(mild, 900_100, [f"{c} block" for c in BLOCKS])
    image = tmp_path / "frame.png"
    cv2.imwrite(str(image), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    out, debug = tmp_path / "palette.yaml", tmp_path / "debug.png"
    argv = ["--image", str(image), "--objects", ", ".join(f"{c} block" for c in BLOCKS)]
    assert calibrate_colors_main([*argv, "--out", str(out), "--debug-image", str(debug)]) == 0
    palette = load_palette(out)
    assert debug.exists() and palette.table is not None
    fitted = {c.name: c for c in palette.colors if c.name}
    assert all(fitted[c].measured for c in BLOCKS)
    assert all(set(fitted[c].measured_kinds) == {"block"} for c in BLOCKS)  # named as blocks
    assert "block:" in out.read_text()
    assert calibrate_colors_main(["--image", str(image), "--objects", "teal block",
                                  "--out", str(tmp_path / "no.yaml")]) == 1  # fmt: skip
    assert not (tmp_path / "no.yaml").exists()


def test_a_palette_file_with_bad_values_is_refused(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("colors: {red: [0.8, 0.1, 0.1]}\ntable: [0.5, 0.45, 0.4]\n")
    assert load_palette(good).table == (0.5, 0.45, 0.4)
    for body, message in (
        ("colors: {red: [0.8, 0.1, 0.1]}\nshade: 3\n", "unknown keys: \\['shade'\\]"),
        ("colors: {red: [0.8, .nan, 0.1]}\n", "0..1"),
        ("colors: {red: [0.8, 0.1, 0.1]}\ntable: [2, 0, 0]\n", "0..1"),
        ("colors: {red: [0.8, 0.1, 0.1]}\nmeasured: {blue: [[0.1, 0.2, 0.9]]}\n", "not in"),
        (
            "colors: {red: [0.8, 0.1, 0.1]}\nmeasured: {red: {cup: [[0.7, 0.1, 0.1]]}}\n",
            "kinds \\['cup'\\] unknown; allowed: \\['block', 'bowl', 'any'\\]",
        ),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(body)
        with pytest.raises(ConfigError, match=message):
            load_palette(bad)


def test_save_and_load_keep_the_fit(mild, tmp_path):
    rgb, _visible, ignore = frame_of(mild, 900_100, [f"{c} block" for c in BLOCKS])
    fit = fit_palette([CalibrationFrame(rgb, tuple(BLOCKS), ignore)], scene_palette("so101"))
    loaded = load_palette(save_palette(tmp_path / "p.yaml", fit))
    for a, b in zip(fit.palette.colors, loaded.colors, strict=True):
        assert a.name == b.name
        np.testing.assert_allclose(a.rgb, b.rgb, atol=1e-4)
        np.testing.assert_allclose(np.array(a.measured), np.array(b.measured), atol=1e-4)
    np.testing.assert_allclose(fit.palette.table, loaded.table, atol=1e-4)


def test_save_and_load_keep_the_kind_each_look_was_measured_on(mild, tmp_path):
    names = tuple(f"{c} block" for c in BLOCKS)
    rgb, _visible, ignore = frame_of(mild, 900_100, list(names))
    fit = fit_palette([CalibrationFrame(rgb, names, ignore)], scene_palette("so101"))
    red = next(c for c in fit.palette.colors if c.name == "red")
    assert red.measured and set(red.measured_kinds) == {"block"}
    assert red.looks("block") == red.measured and red.looks("bowl") == ()
    loaded = load_palette(save_palette(tmp_path / "p.yaml", fit))
    assert next(c for c in loaded.colors if c.name == "red").measured_kinds == red.measured_kinds


def test_a_block_is_told_from_its_hue_neighbour_by_the_looks_of_blocks():
    """Brown and orange share a hue. Calibrated with bare colour names, the looks of each
    colour pool its block and its bowl (the bowl's shaded inside has the most pixels), and a
    brown block under mild realism is named orange; calibrated with the objects' names, it is
    judged by the looks of blocks alone, and named brown (rig 0, layout 8)."""
    run = LevelRun("so101", "mild", "top", 224)
    try:
        run.world.rig = 0
        frames, colors = [], sorted(COLORS)
        for kind, count in CALIBRATION_FRAMES.items():
            for index in range(count):
                frames.append(run._calibration_frame(len(frames), colors[index::count], kind))
        bare = [replace(f, objects=tuple(n.split()[0] for n in f.objects)) for f in frames]
        run.session.reset(8)
        rgb, _visible = run.frame(8, 0)
        truth = run.truth()["brown block"][0]
        seen = {}
        for label, used in (("names", frames), ("colours", bare)):
            perception = run.perception_with(fit_palette(used, scene_palette("so101")).palette)
            perception.set_joints(run.joints(), run.world.data.time)
            perception.process(rgb, run.world.data.time)
            seen[label] = {o.name: o.position for o in perception.objects}
    finally:
        run.close()
    assert "brown block" not in seen["colours"]  # what the kinds fix
    assert np.hypot(*(np.array(seen["names"]["brown block"][:2]) - truth[:2])) < 0.01
