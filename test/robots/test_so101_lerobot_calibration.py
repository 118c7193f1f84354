"""An SO-101 that LeRobot calibrated, brought here and back (``lerobot_calibration``, and
``calibrate so101 --from-lerobot / --to-lerobot``): the file LeRobot writes becomes our
calibration with the zero pose read from the arm on the emulated servo bus; LeRobot's degrees
and 0..100 gripper land on the same ticks as our radians and opening; bad files are refused."""

from __future__ import annotations

import json

import pytest

from lang2policy.errors import ConfigError
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.servo_plant import KinematicPlant
from lang2policy.robots.so101 import guided
from lang2policy.robots.so101.calibration import JOINTS, Calibration
from lang2policy.robots.so101.lerobot_calibration import (
    from_lerobot,
    lerobot_motors,
    lerobot_to_action,
    read_lerobot_calibration,
    to_lerobot,
)

pytestmark = pytest.mark.timeout(60)

# Shaped as lerobot-calibrate writes it for an SO-101 follower (so_follower/<id>.json).
LEROBOT = {
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1470, "range_min": 758,
                     "range_max": 3292},
    "shoulder_lift": {"id": 2, "drive_mode": 0, "homing_offset": 153, "range_min": 812,
                      "range_max": 3210},
    "elbow_flex": {"id": 3, "drive_mode": 0, "homing_offset": 1296, "range_min": 894,
                   "range_max": 3116},
    "wrist_flex": {"id": 4, "drive_mode": 0, "homing_offset": -1440, "range_min": 845,
                   "range_max": 3274},
    "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": -1390, "range_min": 0,
                   "range_max": 4095},
    "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 1407, "range_min": 2023,
                "range_max": 3445},
}  # fmt: skip
# The ticks the arm reads held in the model's zero pose: not LeRobot's calibration pose (2047)
ZERO = {1: 2031, 2: 1975, 3: 2101, 4: 2060, 5: 2047, 6: 2030}


@pytest.fixture
def lerobot_file(tmp_path):
    path = tmp_path / "so101_follower.json"
    path.write_text(json.dumps(LEROBOT, indent=4))
    return path


def test_the_zero_pose_is_read_from_the_arm_and_the_rest_comes_from_lerobots_file(
    lerobot_file, tmp_path
):
    out, lines, prompts = tmp_path / "calibration.yaml", [], []
    with ServoBusEmulator(tuple(ZERO), plant=KinematicPlant(), positions=ZERO) as emulator:
        bus = FeetechBus(emulator.port, timeout=0.1)
        zero = guided.read_zero_pose(emulator.port, prompts.append, lines.append, bus)
        assert not any(emulator.servo(i).torque_on for i in ZERO)  # the arm is moved by hand
    assert "middle pose" in prompts[0]
    guided.import_lerobot(lerobot_file, out, zero, False, lines.append)
    saved = Calibration.load(out)
    for joint in saved.joints:
        entry = LEROBOT[joint.name]
        assert joint.servo_id == entry["id"] and joint.sign == 1
        assert joint.zero == ZERO[joint.servo_id]  # read, not assumed
        assert (joint.range_min, joint.range_max) == (entry["range_min"], entry["range_max"])
    assert (saved.gripper.closed, saved.gripper.open) == (2023, 3445)
    assert any("zero pose: read from the arm" in line for line in lines)


def test_lerobots_degrees_and_gripper_percent_land_on_the_same_ticks_as_ours(lerobot_file):
    motors = read_lerobot_calibration(lerobot_file)
    ours = from_lerobot(motors, {name: ZERO[i + 1] for i, name in enumerate(JOINTS)})
    ticks = {1: 1200, 2: 2900, 3: 2101, 4: 900, 5: 3500, 6: 3000}  # a reading off the bus
    lerobot_reading = {  # what LeRobot's bus reports for them (DEGREES body, 0..100 gripper)
        m.name: (m.percent(ticks[m.id]) if m.name == "gripper" else m.degrees(ticks[m.id]))
        for m in motors.values()
    }
    assert lerobot_reading["elbow_flex"] == pytest.approx((2101 - 2005) * 360 / 4095)
    assert lerobot_to_action(motors, ours, lerobot_reading) == pytest.approx(
        ours.ticks_to_action(ticks), abs=1e-9
    )
    # LeRobot's degree zero is the middle of the range, not our zero pose: here 8.4° apart
    assert ours["elbow_flex"].ticks_to_rad(motors["elbow_flex"].middle) == pytest.approx(
        -(2101 - 2005) * 2 * 3.141592653589793 / 4096
    )


def test_without_the_arm_the_calibration_pose_must_be_accepted_by_name(lerobot_file):
    motors = read_lerobot_calibration(lerobot_file)
    with pytest.raises(ConfigError, match="does not say which ticks the model's zero pose"):
        from_lerobot(motors)
    assumed = from_lerobot(motors, accept_calibration_pose=True)
    assert {j.zero for j in assumed.joints} == {2047}


def test_our_calibration_goes_back_to_lerobots_format(lerobot_file):
    motors = read_lerobot_calibration(lerobot_file)
    ours = from_lerobot(motors, {name: ZERO[i + 1] for i, name in enumerate(JOINTS)})
    exported = to_lerobot(ours, {n: LEROBOT[n]["homing_offset"] for n in JOINTS})
    assert exported == LEROBOT
    assert to_lerobot(ours)["gripper"]["homing_offset"] == 0  # offsets not given: 0
    flipped = dict(LEROBOT, gripper={**LEROBOT["gripper"], "drive_mode": 1})
    again = from_lerobot(lerobot_motors(flipped), accept_calibration_pose=True)
    assert (again.gripper.sign, again.gripper.closed, again.gripper.open) == (-1, 3445, 2023)
    assert to_lerobot(again)["gripper"]["drive_mode"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gripper": {**LEROBOT["gripper"], "drive_mode": 2}}, "drive_mode = 2 is outside 0..1"),
        ({"gripper": {**LEROBOT["gripper"], "calib": 1}}, "expected exactly the keys"),
        ({"elbow_flex": {**LEROBOT["elbow_flex"], "id": "3"}}, "id must be an integer"),
        ({"wrist_flex": {**LEROBOT["wrist_flex"], "range_min": 3300}}, "must be below range_max"),
        ({"elbow_flex": {**LEROBOT["elbow_flex"], "id": 2}}, "motor ids must be distinct"),
        ({"base": LEROBOT["gripper"]}, "unknown motors \\['base'\\]"),
    ],
)
def test_bad_lerobot_files_are_refused_with_what_is_allowed(tmp_path, change, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**LEROBOT, **change}))
    with pytest.raises(ConfigError, match=message):
        read_lerobot_calibration(path)


def test_nan_oversized_and_missing_files_are_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(LEROBOT).replace("758", "NaN"))
    with pytest.raises(ConfigError, match="NaN is not a number"):
        read_lerobot_calibration(path)
    path.write_text(" " * (64 * 1024 + 1))
    with pytest.raises(ConfigError, match="under 64 KiB"):
        read_lerobot_calibration(path)
    with pytest.raises(ConfigError, match="missing motors \\['gripper'\\]"):
        lerobot_motors({n: v for n, v in LEROBOT.items() if n != "gripper"})
    with pytest.raises(ConfigError, match="cannot read LeRobot calibration"):
        read_lerobot_calibration(tmp_path / "none.json")


def test_the_command_imports_without_an_arm_only_when_told_and_exports(
    lerobot_file, tmp_path, capsys
):
    out = tmp_path / "ours.yaml"
    with pytest.raises(SystemExit):  # neither an arm nor the assumption: refused
        guided.main(["--from-lerobot", str(lerobot_file), "--out", str(out)])
    assert "--port is needed" in capsys.readouterr().err and not out.exists()
    argv = ["--from-lerobot", str(lerobot_file), "--assume-calibration-pose", "--out", str(out)]
    assert guided.main(argv) == 0
    assert Calibration.load(out)["elbow_flex"].zero == 2047
    back = tmp_path / "back.json"
    assert guided.main(["--to-lerobot", str(back), "--calibration", str(out)]) == 0
    assert lerobot_motors(json.loads(back.read_text()))["elbow_flex"].range_max == 3116
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert guided.main(["--from-lerobot", str(broken), "--assume-calibration-pose",
                        "--out", str(out)]) == 1  # fmt: skip
    assert "nothing was written" in capsys.readouterr().err
