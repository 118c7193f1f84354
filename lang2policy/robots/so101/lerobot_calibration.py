"""SO-101 calibration to and from LeRobot's calibration file (``lerobot-calibrate``).

LeRobot writes one JSON object per arm (``.../calibration/robots/so_follower/<id>.json``): for
each motor (``shoulder_pan`` ... ``gripper``) its ``id``, ``drive_mode`` (0 or 1),
``homing_offset`` (written into the servo's EEPROM so that the pose the arm was calibrated in
reads tick 2047) and ``range_min``/``range_max``, in the ticks the servo reports with that offset.
LeRobot's units are a body joint's degrees about the middle of its range,
``(ticks - (range_min + range_max) / 2) * 360 / 4095``, and the gripper's 0..100 across its range
(reversed for drive mode 1).

Ours (``calibration``): ``rad = sign * (ticks - zero) * 2 pi / 4096``, ``zero`` being the tick at
the model's 0 rad pose. The mapping:

- ``id`` -> servo id; ``drive_mode`` 0 / 1 -> ``sign`` +1 / -1;
- ``range_min``/``range_max`` as they are: the offset stays in the servo, and our driver reads
  the same ticks LeRobot does;
- the gripper's ``closed``/``open``: the ends of its range (``range_min`` closed for drive mode 0);
- ``zero``: what the file cannot tell. LeRobot's degree zero is the middle of each range, which
  can lie several degrees from the model's zero pose. ``zero_ticks``, read from the arm held in
  that pose (``calibrate so101 --from-lerobot FILE --port PORT``), give it. Without them the
  pose LeRobot calibrated in (tick 2047) is taken as the model's zero, and the caller must say
  that it accepts this.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.robots.feetech.protocol import MAX_TICK
from lang2policy.robots.so101.calibration import (
    GRIPPER,
    JOINTS,
    RAD_PER_TICK,
    Calibration,
    JointCalibration,
)

MAX_FILE_BYTES = 64 * 1024
CALIBRATION_POSE_TICK = 2047  # what LeRobot's homing offset makes the calibration pose read
MAX_HOMING_OFFSET = 2047  # the STS3215's register holds 11 bits and a sign
DEGREE_TICKS = MAX_TICK  # LeRobot divides by the model's resolution less one: 4095
_KEYS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


@dataclass(frozen=True)
class LeRobotMotor:
    """One motor's entry of a LeRobot calibration file."""

    name: str
    id: int
    drive_mode: int
    homing_offset: int
    range_min: int
    range_max: int

    @property
    def middle(self) -> float:
        """LeRobot's degree zero: the middle of the range (ticks)."""
        return (self.range_min + self.range_max) / 2

    def degrees(self, ticks: float) -> float:
        """A body joint's reading as LeRobot reports it (degrees)."""
        return (ticks - self.middle) * 360.0 / DEGREE_TICKS

    def ticks_of_degrees(self, degrees: float) -> float:
        return self.middle + degrees * DEGREE_TICKS / 360.0

    def ticks_of_range100(self, value: float) -> float:
        """A body joint's tick from LeRobot's -100..100 across its range (``use_degrees=False``;
        reversed for drive mode 1)."""
        share = (-value if self.drive_mode else value) + 100.0
        return self.range_min + share / 200.0 * (self.range_max - self.range_min)

    def percent(self, ticks: float) -> float:
        """The gripper's reading as LeRobot reports it (0..100 across the range)."""
        bounded = min(max(ticks, self.range_min), self.range_max)
        share = 100.0 * (bounded - self.range_min) / (self.range_max - self.range_min)
        return 100.0 - share if self.drive_mode else share

    def ticks_of_percent(self, percent: float) -> float:
        share = 100.0 - percent if self.drive_mode else percent
        return self.range_min + share / 100.0 * (self.range_max - self.range_min)


def read_lerobot_calibration(path: str | Path) -> dict[str, LeRobotMotor]:
    """The motors of a LeRobot calibration file; ``ConfigError`` naming what is wrong."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"cannot read LeRobot calibration {path}: {exc.strerror}") from exc
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: {size} bytes; a LeRobot calibration is under 64 KiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a LeRobot calibration (JSON): {exc}") from exc
    return lerobot_motors(data, str(path))


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def lerobot_motors(data: object, source: str = "LeRobot calibration") -> dict[str, LeRobotMotor]:
    """Check a parsed LeRobot calibration: the six SO-101 motors, each with its five integers."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected an object of motors {list(JOINTS)}")
    unknown = sorted(str(k) for k in data if k not in JOINTS)
    missing = [name for name in JOINTS if name not in data]
    if unknown or missing:
        raise ConfigError(f"{source}: unknown motors {unknown}, missing motors {missing}; an "
                          f"SO-101 has {list(JOINTS)}")  # fmt: skip
    motors = {name: _motor(name, data[name], source) for name in JOINTS}
    ids = [m.id for m in motors.values()]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source}: motor ids must be distinct, got {ids}")
    return motors


def _motor(name: str, entry: object, source: str) -> LeRobotMotor:
    where = f"{source}: motor '{name}'"
    if not isinstance(entry, Mapping) or set(entry) != set(_KEYS):
        keys = sorted(map(str, entry)) if isinstance(entry, Mapping) else type(entry).__name__
        raise ConfigError(f"{where}: expected exactly the keys {list(_KEYS)}, got {keys}")
    values = {}
    for key in _KEYS:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
        values[key] = value
    limits = {
        "id": (0, 252),
        "drive_mode": (0, 1),
        "range_min": (0, MAX_TICK),
        "range_max": (0, MAX_TICK),
        "homing_offset": (-MAX_HOMING_OFFSET, MAX_HOMING_OFFSET),
    }
    for key, (low, high) in limits.items():  # fmt: skip
        if not low <= values[key] <= high:
            raise ConfigError(f"{where}: {key} = {values[key]} is outside {low}..{high}")
    if values["range_min"] >= values["range_max"]:
        raise ConfigError(f"{where}: range_min ({values['range_min']}) must be below range_max "
                          f"({values['range_max']})")  # fmt: skip
    return LeRobotMotor(name, **values)


def from_lerobot(
    motors: Mapping[str, LeRobotMotor],
    zero_ticks: Mapping[str, int] | None = None,
    *,
    accept_calibration_pose: bool = False,
) -> Calibration:
    """Our calibration of the arm LeRobot calibrated (see the module docstring).

    ``zero_ticks``: each joint's tick read with the arm held in the model's zero pose. Without
    them, ``accept_calibration_pose`` must be True: the pose LeRobot calibrated in is then taken
    as the model's zero (tick 2047 on every joint)."""
    if zero_ticks is None and not accept_calibration_pose:
        raise ConfigError(
            "a LeRobot calibration does not say which ticks the model's zero pose reads: hold "
            "the arm in that pose and read them (--port), or accept LeRobot's calibration pose "
            "as the zero (--assume-calibration-pose)"
        )
    joints = []
    for name in JOINTS:
        motor = motors[name]
        zero = CALIBRATION_POSE_TICK if zero_ticks is None else int(zero_ticks[name])
        if not motor.range_min <= zero <= motor.range_max:
            raise ConfigError(f"'{name}': the zero pose reads tick {zero}, outside LeRobot's "
                              f"range {motor.range_min}..{motor.range_max} for it")  # fmt: skip
        sign = -1 if motor.drive_mode else 1
        ends = {}
        if name == GRIPPER:
            closed, opened = _gripper_ends(motor.range_min, motor.range_max, motor.drive_mode)
            ends = {"closed": closed, "open": opened}
        joints.append(JointCalibration(name, motor.id, sign, zero, motor.range_min,
                                       motor.range_max, **ends))  # fmt: skip
    return Calibration(tuple(joints))


def to_lerobot(
    calibration: Calibration, homing_offsets: Mapping[str, int] | None = None
) -> dict[str, dict[str, int]]:
    """LeRobot's calibration file for ``calibration`` (JSON-ready). ``homing_offsets``: what
    the servos' EEPROM holds (None: 0, what a servo this project calibrated keeps; LeRobot
    rewrites the file's offset into the servo when it connects)."""
    data = {}
    for joint in calibration.joints:
        offset = int((homing_offsets or {}).get(joint.name, 0))
        if not -MAX_HOMING_OFFSET <= offset <= MAX_HOMING_OFFSET:
            raise ConfigError(f"'{joint.name}': homing offset {offset} is outside "
                              f"{-MAX_HOMING_OFFSET}..{MAX_HOMING_OFFSET}")  # fmt: skip
        drive_mode = 0 if joint.sign > 0 else 1
        ends = _gripper_ends(joint.range_min, joint.range_max, drive_mode)
        if joint.name == GRIPPER and (joint.closed, joint.open) != ends:
            raise ConfigError("the gripper's closed and open ticks are not the ends of its range; "
                              "LeRobot's 0..100 runs from end to end")  # fmt: skip
        data[joint.name] = {"id": joint.servo_id, "drive_mode": drive_mode,
                            "homing_offset": offset, "range_min": joint.range_min,
                            "range_max": joint.range_max}  # fmt: skip
    return data


def _gripper_ends(range_min: int, range_max: int, drive_mode: int) -> tuple[int, int]:
    """The gripper's (closed, open) ticks: the ends of its range, reversed for drive mode 1."""
    return (range_max, range_min) if drive_mode else (range_min, range_max)


def lerobot_to_action(
    motors: Mapping[str, LeRobotMotor], calibration: Calibration, values: Mapping[str, float]
) -> list[float]:
    """A LeRobot reading or action (body joints in degrees, gripper 0..100, by motor name) in
    our units (arm radians, gripper opening 0..1), through the ticks both describe."""
    result = []
    for joint in calibration.joints:
        value = float(values[joint.name])
        if not math.isfinite(value):
            raise ConfigError(f"'{joint.name}': {value} is not a finite number")
        motor = motors[joint.name]
        if joint.name == GRIPPER:
            result.append(joint.ticks_to_opening(motor.ticks_of_percent(value)))
        else:
            result.append(joint.ticks_to_rad(motor.ticks_of_degrees(value)))
    return result


def action_to_lerobot(
    motors: Mapping[str, LeRobotMotor], calibration: Calibration, action: Sequence[float]
) -> dict[str, float]:
    """Our reading or action (arm radians, gripper opening 0..1, ``calibration``'s joint
    order) in LeRobot's units by motor name: ``lerobot_to_action``'s inverse."""
    if len(action) != len(calibration.joints):
        raise ConfigError(
            f"an action has {len(calibration.joints)} values "
            f"({', '.join(calibration.names)}), got {len(action)}"
        )
    result = {}
    for joint, value in zip(calibration.joints, action, strict=True):
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"'{joint.name}': {value} is not a finite number")
        motor = motors[joint.name]
        if joint.name == GRIPPER:
            closed, opened = _gripper_ends(motor.range_min, motor.range_max, motor.drive_mode)
            result[joint.name] = motor.percent(closed + value * (opened - closed))
        else:  # unrounded ticks: a recorded angle keeps its precision
            result[joint.name] = motor.degrees(joint.zero + joint.sign * value / RAD_PER_TICK)
    return result


def load_calibration(path: str | Path | None, accept_calibration_pose: bool = False) -> Calibration:
    """Our calibration YAML, or LeRobot's calibration JSON taken directly (``.json``): what the
    driver's ``calibration`` parameter reads. A LeRobot file needs ``accept_calibration_pose``
    (its zero pose cannot be read here without asking a person; ``from_lerobot``)."""
    if path is not None and Path(path).suffix.lower() == ".json":
        motors = read_lerobot_calibration(path)
        try:
            return from_lerobot(motors, accept_calibration_pose=accept_calibration_pose)
        except ConfigError as exc:
            raise ConfigError(
                f"{path} is LeRobot's calibration: {exc}. For the driver, set "
                "lerobot_calibration_pose:=true, or convert it once with `lang2policy calibrate "
                f"so101 --from-lerobot {path} --port PORT` and pass the YAML it writes"
            ) from exc
    return Calibration.load(path)
