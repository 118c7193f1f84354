"""Joint maps (hardware/<arm>.yaml): loading, validation and name/unit conversion. Pure."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from lang2policy.errors import ConfigError, InvalidCommandError
from lang2policy.hardware import GRIPPER, available_joint_maps, load_joint_map
from lang2policy.hardware.joint_map_files import description_limits

REPO = Path(__file__).resolve().parents[2]
PANDA = [f"panda_joint{i}" for i in range(1, 8)]
FR3 = [f"fr3_joint{i}" for i in range(1, 8)]


def panda_data() -> dict:
    return yaml.safe_load((REPO / "hardware" / "panda.yaml").read_text())


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "arm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def load(tmp_path: Path, data: dict, check_description: bool = True):
    return load_joint_map(write(tmp_path, data), check_description=check_description)


# --------------------------------------------------------------------- the shipped maps
def test_shipped_maps_load_and_match_their_descriptions():
    assert {"panda", "so101_ros2_control"} <= set(available_joint_maps())
    for arm in ("panda", "so101_ros2_control"):
        joint_map = load_joint_map(arm)
        names, lower, upper = description_limits(joint_map.robot)
        assert [j.name for j in joint_map.joints] == list(names)
        assert joint_map.names == (*names, GRIPPER)
        for joint, lo, hi in zip(joint_map.joints, lower, upper, strict=True):
            assert lo - 1e-9 <= joint.lower - joint.offset < joint.upper - joint.offset <= hi + 1e-9


def test_panda_map_uses_franka_ros2_names_and_the_descriptions_home():
    from lang2policy.scene.robot_description import load_robot_description

    joint_map = load_joint_map("panda")
    assert joint_map.trajectory_topic == "/fr3_arm_controller/joint_trajectory"
    assert [j.hardware_name for j in joint_map.joints] == FR3
    assert not joint_map.gripper.commanded and GRIPPER not in joint_map.commanded_names
    home = load_robot_description("panda").home
    for joint in joint_map.joints:
        assert joint.home - joint.offset == pytest.approx(home[joint.name])


def test_so101_map_keeps_the_descriptions_names_and_commands_the_gripper():
    joint_map = load_joint_map("so101_ros2_control")
    assert all(j.hardware_name == j.name and j.offset == 0.0 for j in joint_map.joints)
    assert joint_map.trajectory_topic == "/arm_controller/joint_trajectory"
    assert joint_map.commanded_names[-1] == GRIPPER


def test_gripper_constant_matches_the_scene():
    from lang2policy.scene.arm import GRIPPER as SCENE_GRIPPER

    assert SCENE_GRIPPER == GRIPPER


def test_loading_by_path_and_unknown_arm_names(tmp_path):
    assert load(tmp_path, panda_data()).source == str(tmp_path / "arm.yaml")
    with pytest.raises(ConfigError, match=r"unknown joint map 'nope'.*panda"):
        load_joint_map("nope")
    assert "README" not in available_joint_maps()
    with pytest.raises(ConfigError, match="not found"):
        load_joint_map(tmp_path / "missing.yaml")


# --------------------------------------------------------------------- validation
def edited(change) -> dict:
    data = copy.deepcopy(panda_data())
    change(data)
    return data


def _set(path: tuple, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _delete(key):
    return lambda data: data.pop(key)


CASES = {
    "unknown top-level key": (_set(("speed",), 1.0), r"unknown key\(s\) \['speed'\]"),
    "unknown joint key": (_set(("joints", 0, "sign"), -1), r"unknown key\(s\) \['sign'\]"),
    "source is not a key": (_set(("source",), "x"), r"unknown key\(s\) \['source'\]"),
    "missing robot": (_delete("robot"), "missing required key 'robot'"),
    "bad topic name": (_set(("trajectory_topic",), "arm//traj"), "must be a ROS topic name"),
    "topic with a space": (_set(("joint_states_topic",), "/joint states"), "ROS topic name"),
    "same topics": (
        _set(("joint_states_topic",), "/fr3_arm_controller/joint_trajectory"),
        "the same topic",
    ),
    "home outside limits": (_set(("joints", 1, "home"), 2.0), "home 2.0 is outside"),
    "lower above upper": (_set(("joints", 0, "lower"), 3.0), "must be below upper"),
    "not finite": (_set(("joints", 0, "upper"), float("inf")), "finite"),
    "duplicate name": (_set(("joints", 1, "name"), "panda_joint1"), "names used more than once"),
    "duplicate hardware name": (
        _set(("joints", 1, "hardware_name"), "fr3_joint1"),
        r"hardware names used more than once: \['fr3_joint1'\]",
    ),
    "extra joint reuses a name": (
        _set(("extra_joints",), ["fr3_joint3"]),
        "hardware names used more than once",
    ),
    "gripper in joints": (_set(("joints", 0, "name"), GRIPPER), "'gripper' section"),
    "gripper closed == open": (_set(("gripper", "open"), 0.0), "must differ"),
    "wrong type": (_set(("joints", 0, "home"), "zero"), "expected a number"),
    "empty joints": (_set(("joints",), []), "'joints' is empty"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_maps_fail_with_a_clear_message(tmp_path, case):
    change, message = CASES[case]
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, edited(change), check_description=False)


def test_joints_must_be_the_descriptions_in_its_order(tmp_path):
    data = edited(lambda d: d["joints"].pop(3))
    with pytest.raises(ConfigError, match=r"missing: \['panda_joint4'\]"):
        load(tmp_path, data)
    data = edited(lambda d: d["joints"].insert(0, d["joints"].pop(2)))
    with pytest.raises(ConfigError, match="in its order"):
        load(tmp_path, data)
    data = edited(_set(("joints", 0, "name"), "panda_joint0"))
    with pytest.raises(ConfigError, match=r"unknown: \['panda_joint0'\]"):
        load(tmp_path, data)


def test_limits_wider_than_the_description_are_an_error(tmp_path):
    # FR3's data-sheet upper limit of joint 6 (4.5169) lies beyond our model's range.
    data = edited(_set(("joints", 5, "upper"), 4.5169))
    with pytest.raises(ConfigError, match=r"panda_joint6.*wider.*3\.6827"):
        load(tmp_path, data)
    # ... and an offset that is missing moves the limits out of range too.
    data = edited(_set(("joints", 5, "offset"), 0.0))
    with pytest.raises(ConfigError, match=r"panda_joint6.*wider"):
        load(tmp_path, data)


def test_robot_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="unknown robot 'ur5'"):
        load(tmp_path, edited(_set(("robot",), "ur5")))


# --------------------------------------------------------------------- conversion
@pytest.fixture(scope="module")
def panda():
    return load_joint_map("panda")


@pytest.fixture(scope="module")
def so101_joint_map():
    return load_joint_map("so101_ros2_control")


def test_to_hardware_renames_reorders_and_offsets(panda):
    names = list(reversed(PANDA))  # scrambled: joint7 first
    ours = np.array([[0.1, 0.2, 0.3, -1.0, 0.5, 0.6, 0.7]])
    result = panda.to_hardware(names, ours)
    assert result.names == tuple(FR3)
    expected = [0.7, 0.6, 0.5, -1.0, 0.3, 0.2 + 1.57, 0.1 + 0.7854]
    np.testing.assert_allclose(result.positions[0], expected)
    assert result.clamped == () and result.dropped == ()


def test_to_hardware_clamps_fills_and_drops(panda):
    measured = dict(zip(PANDA, [0.0, -0.34, 0.0, -2.25, 0.0, 0.34, 0.0], strict=True))
    result = panda.to_hardware(["panda_joint1", GRIPPER], [[5.0, 0.5], [-0.2, 1.0]], hold=measured)
    assert result.positions.shape == (2, 7)
    np.testing.assert_allclose(result.positions[:, 0], [2.7437, -0.2])  # clipped to FR3's
    np.testing.assert_allclose(result.positions[:, 5], [1.91, 1.91])  # held, offset applied
    assert result.clamped == ("panda_joint1",)
    assert result.dropped == (GRIPPER,)  # Franka's gripper has its own driver


def test_to_hardware_errors(panda):
    with pytest.raises(InvalidCommandError, match=r"unknown joints \['elbow'\]"):
        panda.to_hardware(["elbow"], [[0.0]])
    with pytest.raises(InvalidCommandError, match=r"does not name \['panda_joint2'"):
        panda.to_hardware(["panda_joint1"], [[0.0]])
    with pytest.raises(InvalidCommandError, match="one position per name"):
        panda.to_hardware(["panda_joint1", "panda_joint2"], [[0.0, 1.0, 2.0]])


def test_an_empty_trajectory_names_every_commanded_joint(panda):
    result = panda.to_hardware([], [])
    assert result.names == tuple(FR3) and result.positions.shape == (0, 7)


def test_gripper_opening_maps_linearly(so101_joint_map):
    result = so101_joint_map.to_hardware(
        list(so101_joint_map.names), [[0, 0, 0, 0, 0, 0.5], [0, 0, 0, 0, 0, 2.0]]
    )
    assert result.names[-1] == "gripper"
    np.testing.assert_allclose(result.positions[:, -1], [-0.17 + 0.5 * 1.37, 1.2])
    assert result.clamped == (GRIPPER,)


def test_from_hardware_reorders_and_drops_extra_joints(panda):
    hw_names = ["fr3_finger_joint2", *reversed(FR3), "fr3_finger_joint1"]
    positions = [0.03, 0.7854, 1.91, 0.0, -2.25, 0.0, -0.34, 0.1, 0.02]
    velocities = [0.0, 0.0, 0.5, 0, 0, 0, 0, 0.2, 0.04]
    names, ours, speeds = panda.from_hardware(hw_names, positions, velocities)
    assert names == (*PANDA, GRIPPER)
    np.testing.assert_allclose(ours, [0.1, -0.34, 0.0, -2.25, 0.0, 0.34, 0.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(speeds, [0.2, 0, 0, 0, 0, 0.5, 0, 1.0])
    assert panda.from_hardware(hw_names, positions, [])[2] is None


def test_from_hardware_lists_missing_joints(panda):
    present = [n for n in FR3 if n != "fr3_joint3"]
    with pytest.raises(ValueError, match=r"lacks \['fr3_joint3', 'fr3_finger_joint1'\]"):
        panda.from_hardware(present, [0.0] * len(present))
    with pytest.raises(ValueError, match="one per name"):
        panda.from_hardware(["fr3_joint1", "fr3_joint2"], [0.0])


def test_hardware_home_and_limits(panda):
    home = panda.hardware_home()
    assert list(home) == [*FR3, "fr3_finger_joint1", "fr3_finger_joint2"]
    assert home["fr3_joint6"] == 1.91 and home["fr3_finger_joint1"] == 0.0
    assert list(panda.hardware_limits()) == FR3  # the gripper is not the controller's
