"""``train vla`` and ``dataset info`` on a dataset LeRobot's own writer made (issue 35).

``fixtures/lerobot/so101_sweep`` was written by LeRobot 0.6.1's ``LeRobotDataset`` (AV1 video,
640 x 480 front camera, 30 fps, ``<motor>.pos`` in degrees and gripper 0..100) from frames of
the simulated SO-101 (``scripts/lerobot_fixtures/make_dataset_fixture.sh``);
``so101_sweep_truth.npz`` holds the same state and action in our units, as the simulator
measured them.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lang2policy.commands import dataset as dataset_command
from lang2policy.commands import train as train_command
from lang2policy.errors import ConfigError
from lang2policy.vla.dataset.combine import ForeignData, load_datasets
from lang2policy.vla.dataset.lerobot_units import in_our_units, lerobot_names
from lang2policy.vla.dataset.reader import load_dataset
from lang2policy.vla.policy.runtime import VLAPolicy
from lang2policy.vla.spec.image_fit import fit_image

pytestmark = pytest.mark.timeout(180)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "lerobot"
DATASET = FIXTURES / "so101_sweep"
CALIBRATION = FIXTURES / "so101_follower.json"
TRUTH = np.load(FIXTURES / "so101_sweep_truth.npz")


def test_lerobots_degrees_become_the_radians_the_simulator_measured():
    data = load_dataset(DATASET)
    assert data.fps == 30 and data.images["front"].shape == (40, 480, 640, 3)
    assert lerobot_names(data.info["features"])[0] == "shoulder_pan"
    assert np.abs(data.state).max() > 20  # degrees and percent, as LeRobot recorded them
    ours = in_our_units(data, CALIBRATION)
    np.testing.assert_allclose(ours.state, TRUTH["state_rad"], atol=1e-5)
    np.testing.assert_allclose(ours.action, TRUTH["action_rad"], atol=1e-5)
    assert "observation.state" not in ours.stats  # LeRobot's stats were in degrees
    assert "degrees" in ours.adaptation["units"] and CALIBRATION.name in ours.adaptation["units"]


def test_frames_are_fitted_as_decoded_the_way_the_node_fits_camera_images():
    full = load_dataset(DATASET).images["front"]
    fitted = load_dataset(DATASET, image_size=96)
    assert fitted.images["front"].shape == (40, 96, 96, 3)
    np.testing.assert_array_equal(fitted.images["front"][7], fit_image(full[7], 96))
    assert fitted.adaptation["image_fit"].startswith("front: 640x480 -> centre square crop")


def test_a_lerobot_dataset_without_its_calibration_is_refused_with_what_to_pass():
    with pytest.raises(ConfigError, match="pass --calibration FILE"):
        load_datasets([DATASET])
    ours = in_our_units(load_dataset(DATASET), CALIBRATION)
    with pytest.raises(ConfigError, match="already in our units"):
        in_our_units(_as_ours(ours), CALIBRATION)
    with pytest.raises(ConfigError, match="body units must be one of"):
        in_our_units(load_dataset(DATASET), CALIBRATION, body_units="radians")


def test_other_robots_motor_names_are_refused(tmp_path):
    copy = shutil.copytree(DATASET, tmp_path / "koch")
    info_path = copy / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info["features"]["observation.state"]["names"][0] = "waist.pos"
    info_path.write_text(json.dumps(info))
    with pytest.raises(ConfigError, match="not the SO-101's six motors"):
        in_our_units(load_dataset(copy), CALIBRATION)


def test_range100_units_convert_through_the_same_ticks():
    data = load_dataset(DATASET)
    motors = json.loads(CALIBRATION.read_text())
    ranged = data.state.copy()
    for column, name in enumerate(("shoulder_pan", "shoulder_lift", "elbow_flex",
                                   "wrist_flex", "wrist_roll")):  # fmt: skip
        low, high = motors[name]["range_min"], motors[name]["range_max"]
        ticks = (low + high) / 2 + data.state[:, column] * 4095 / 360
        ranged[:, column] = (ticks - low) / (high - low) * 200 - 100
    as_range = in_our_units(_with_state(data, ranged), CALIBRATION, body_units="range100")
    np.testing.assert_allclose(as_range.state, TRUTH["state_rad"], atol=1e-4)


def test_train_vla_on_lerobots_dataset_records_fps_fit_and_units(tmp_path, capsys):
    out = tmp_path / "model"
    # the plain design: a LeRobot recording has no scene state (one of its 2 episodes validates)
    args = _parse("--dataset", str(DATASET), "--design", "plain", "--cameras", "front",
                  "--calibration", str(CALIBRATION), "--out", str(out), "--steps", "60",
                  "--batch-size", "16")  # fmt: skip
    assert train_command.run(args) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["fps"] == 30 and config["image_size"] == 96
    assert "640x480" in config["image_fit"] and "96x96" in config["image_fit"]
    assert "degrees" in config["units"] and "rad" in config["units"]
    policy = VLAPolicy.load(out)
    frames = load_datasets([DATASET], ["front"], foreign=ForeignData(calibration=CALIBRATION))
    errors = []
    for row in range(0, 40, 5):
        chunk = policy.act_chunk({"front": frames.images["front"][row]}, frames.state[row],
                                 frames.tasks[0])  # fmt: skip
        errors.append(np.abs(chunk[0] - TRUTH["action_rad"][row]))
    # in our units: within a fraction of a radian of the measured targets; had the degrees
    # been taken as radians, the predictions would be tens of "radians" away
    print(f"mean error {np.mean(errors):.4f} rad")
    assert np.mean(errors) < 0.15, np.mean(errors)


def test_dataset_info_says_the_units_are_lerobots(capsys):
    args = argparse.Namespace(dataset_command="info", root=DATASET, json=False)
    dataset_command.run(args)
    out = capsys.readouterr().out
    assert "640x480" in out.replace("480x640", "640x480") and "30 fps" in out
    assert "units: LeRobot's" in out and "--calibration FILE" in out


def _parse(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", "vla", *words])


def _with_state(data, state):
    from dataclasses import replace

    return replace(data, state=state.astype(np.float32))


def _as_ours(data):
    from dataclasses import replace

    features = json.loads(json.dumps(data.info["features"]))
    names = [n.removesuffix(".pos") for n in features["observation.state"]["names"]]
    features["observation.state"]["names"] = names
    return replace(data, info={**data.info, "features": features})
