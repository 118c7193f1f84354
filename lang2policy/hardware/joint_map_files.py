"""Joint maps from files (``hardware/<arm>.yaml`` or a path): finding, loading and checking
them. The checks that need the map alone (``validate``: names, topics, limits, the gripper,
duplicates) and those against the robot description it names (``check_against_description``:
the arm joints in their order, limits no wider than the description's). Every problem raises
``ConfigError`` naming the file. Pure."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from lang2policy.config import load_dataclass, read_yaml
from lang2policy.errors import ConfigError
from lang2policy.hardware.joint_map import GRIPPER, JointMap, MappedGripper, MappedJoint
from lang2policy.paths import hardware_dir

_TOLERANCE = 1e-9  # rad: a map's limit may equal the description's up to rounding


def available_joint_maps() -> list[str]:
    """Arm names with a joint map: the ``hardware/*.yaml`` files that are joint maps (other
    hardware data, such as a calibration board, lives there too)."""
    return sorted(p.stem for p in hardware_dir().glob("*.yaml") if _is_joint_map(p))


def _is_joint_map(path: Path) -> bool:
    try:
        data = read_yaml(path)
    except ConfigError:
        return False
    return "joints" in data and "trajectory_topic" in data


def joint_map_path(ref: str) -> Path:
    """``ref`` as a file: a path (has a ``/`` or ends in .yaml) or ``hardware/<ref>.yaml``."""
    if "/" in ref or ref.endswith((".yaml", ".yml")):
        return Path(ref)
    path = hardware_dir() / f"{ref}.yaml"
    if not path.is_file() or not _is_joint_map(path):
        raise ConfigError(
            f"unknown joint map '{ref}'; available: {available_joint_maps()} "
            f"(hardware/<arm>.yaml), or give the path of a YAML file"
        )
    return path


def load_joint_map(ref: str | Path, check_description: bool = True) -> JointMap:
    """Load and validate a joint map (an arm name under hardware/ or a YAML path).

    With ``check_description`` the map is also checked against the robot description it
    names (joint names, order and limits; this compiles the robot model, about a second the
    first time per robot). Every problem raises ConfigError naming the file.
    """
    path = joint_map_path(str(ref))
    data = read_yaml(path)
    if "source" in data:  # set by the loader, never by the file
        raise ConfigError(f"{path}: unknown key(s) ['source']")
    joint_map = dataclasses.replace(load_dataclass(JointMap, data, str(path)), source=str(path))
    validate(joint_map)
    if check_description:
        names, lower, upper = description_limits(joint_map.robot)
        check_against_description(joint_map, names, lower, upper)
    return joint_map


def validate(joint_map: JointMap) -> None:
    """Checks that need nothing but the map itself; raises ConfigError."""
    where = joint_map.source or joint_map.arm
    for key in ("arm", "robot"):
        if not getattr(joint_map, key).strip():
            raise ConfigError(f"{where}: '{key}' must not be empty")
    _check_topics(joint_map, where)
    if not joint_map.joints:
        raise ConfigError(f"{where}: 'joints' is empty; list every arm joint of the robot")
    for joint in joint_map.joints:
        _check_joint(joint, where)
    if joint_map.gripper is not None:
        _check_gripper(joint_map.gripper, where)
    _check_unique(joint_map, where)


_TOPIC = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")


def _check_topics(joint_map: JointMap, where: str) -> None:
    """Absolute names (``/fr3_arm_controller/joint_trajectory``) reach one arm's controller;
    relative ones (``fr3_arm_controller/joint_trajectory``) resolve in the bridge's namespace,
    so one map serves every arm of a fleet (``/arm1/fr3_arm_controller/...``)."""
    for key in ("trajectory_topic", "joint_states_topic"):
        topic = getattr(joint_map, key)
        if not isinstance(topic, str) or not _TOPIC.match(topic):
            raise ConfigError(f"{where}: {key} must be a ROS topic name, absolute "
                              f"('/arm_controller/joint_trajectory') or relative to the "
                              f"bridge's namespace ('arm_controller/joint_trajectory'), "
                              f"got {topic!r}")  # fmt: skip
    if joint_map.trajectory_topic == joint_map.joint_states_topic:
        raise ConfigError(f"{where}: trajectory_topic and joint_states_topic are the same topic")


def _check_joint(joint: MappedJoint, where: str) -> None:
    label = f"{where}: joint '{joint.name}'"
    if joint.name == GRIPPER:
        raise ConfigError(f"{label}: map the gripper in the 'gripper' section, not in 'joints'")
    if not joint.name or not joint.hardware_name:
        raise ConfigError(f"{label}: name and hardware_name must not be empty")
    values = (joint.lower, joint.upper, joint.home, joint.offset)
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{label}: lower, upper, home and offset must be finite numbers")
    if joint.lower >= joint.upper:
        raise ConfigError(f"{label}: lower ({joint.lower}) must be below upper ({joint.upper})")
    if not joint.lower <= joint.home <= joint.upper:
        raise ConfigError(
            f"{label}: home {joint.home} is outside its limits [{joint.lower}, {joint.upper}]"
        )


def _check_gripper(gripper: MappedGripper, where: str) -> None:
    if not gripper.hardware_name:
        raise ConfigError(f"{where}: gripper.hardware_name must not be empty")
    if not (math.isfinite(gripper.closed) and math.isfinite(gripper.open)):
        raise ConfigError(f"{where}: gripper closed and open must be finite numbers")
    if gripper.closed == gripper.open:
        raise ConfigError(f"{where}: gripper closed and open must differ, both are {gripper.open}")


def _check_unique(joint_map: JointMap, where: str) -> None:
    ours = [j.name for j in joint_map.joints]
    theirs = [j.hardware_name for j in joint_map.joints] + list(joint_map.extra_joints)
    if joint_map.gripper is not None:
        theirs.append(joint_map.gripper.hardware_name)
    for kind, names in (("name", ours), ("hardware name", theirs)):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"{where}: {kind}s used more than once: {duplicates}")


def check_against_description(
    joint_map: JointMap, names: Sequence[str], lower: Sequence[float], upper: Sequence[float]
) -> None:
    """The map covers exactly the description's arm joints ``names`` (in that order), and its
    limits (converted to our convention) lie inside the description's; raises ConfigError."""
    where = joint_map.source or joint_map.arm
    ours = [j.name for j in joint_map.joints]
    if ours != list(names):
        missing = [n for n in names if n not in ours]
        unknown = [n for n in ours if n not in names]
        raise ConfigError(
            f"{where}: joints must be the arm joints of robot '{joint_map.robot}' in its order "
            f"{list(names)}; missing: {missing}, unknown: {unknown}, given: {ours}"
        )
    for joint, lo, hi in zip(joint_map.joints, lower, upper, strict=True):
        wider_low = joint.lower - joint.offset < lo - _TOLERANCE
        if wider_low or joint.upper - joint.offset > hi + _TOLERANCE:
            raise ConfigError(
                f"{where}: joint '{joint.name}' limits [{joint.lower}, {joint.upper}] are wider "
                f"than robot '{joint_map.robot}' allows: [{lo + joint.offset:.6g}, "
                f"{hi + joint.offset:.6g}] in hardware units (offset {joint.offset}); a map may "
                "only narrow the description's limits"
            )


@cache
def description_limits(robot: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Arm joint names and limits (rad) of a robot description, from its compiled model."""
    from lang2policy.scene.arm import arm_layout
    from lang2policy.scene.builder import compile_scene, load_robot_spec
    from lang2policy.scene.robot_description import load_robot_description

    description = load_robot_description(robot)
    layout = arm_layout(compile_scene(load_robot_spec(description)), description)
    return layout.joint_names, layout.lower.copy(), layout.upper.copy()
