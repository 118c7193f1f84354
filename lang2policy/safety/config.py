"""Safety limits per robot, read from config/safety.yaml and validated on load.

The file maps a robot name (as in config/robots/) to its limits: a margin inside the model's
joint ranges, the largest joint speed, how far a command's first point may lead the measured
position, the workspace box and keep-out boxes for the tool centre point (world frame, metres),
and the watchdog's timeouts. Unknown keys, wrong types, non-finite numbers and boxes whose
``min`` is not below ``max`` fail loudly with a ConfigError that says what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from lang2policy.config import load_dataclass, read_yaml
from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir

AXES = ("x", "y", "z")


GEOMETRIES = ("gripper", "tool")


@dataclass(frozen=True)
class BoxConfig:
    """An axis-aligned box in the world frame (metres): ``min`` and ``max`` corners.

    ``geometry`` (keep-out zones): what must stay out of it: ``gripper`` (its geometry and the
    tool centre point, the default) or ``tool`` (the tool centre point alone: a zone around
    the robot's own base, which the folded arm's gripper sits beside at rest).
    """

    min: tuple[float, float, float]
    max: tuple[float, float, float]
    geometry: str = "gripper"


def shifted(corner: tuple[float, float, float], by: float) -> tuple[float, float, float]:
    """``corner`` moved by ``by`` (m) along every axis (a box grown or shrunk by a margin)."""
    x, y, z = corner
    return (x + by, y + by, z + by)


@dataclass(frozen=True)
class RobotSafetyConfig:
    """The limits the motion filter and the watchdog enforce for one robot."""

    # Largest speed of every arm joint (rad/s); faster commands are retimed, never sped up.
    max_joint_speed: float
    # Where the tool centre point may go (world frame, metres).
    workspace: BoxConfig
    # Joint states older than this (s, by arrival) make the arm hold.
    state_timeout: float
    # A commander silent this long (s) while its last trajectory still runs makes the arm hold.
    command_timeout: float
    # Distance (rad) kept from each end of the model's joint ranges.
    joint_limit_margin: float = 0.0
    # How far (rad) the first point may lead the measured position beyond max_joint_speed x its
    # time, for a MotionFilter caller that does not know where the robot's target is. The safety
    # supervisor knows (it replays what it sent) and times every command from there instead: an
    # allowance on each of a stream of commands let the stream run at (allowance + limit x
    # period) / period, 4.5 rad/s on the SO-101.
    lead_allowance: float = 0.0
    # Named boxes the gripper (its geometry and the tool centre point) must not enter.
    keep_out: dict[str, BoxConfig] = field(default_factory=dict)
    # Largest acceleration (rad/s^2) of every arm joint's position target: the safety node
    # shapes what it sends so that the target's velocity never steps (lang2policy.safety.shaper).
    max_joint_acceleration: float = 10.0
    # Largest deceleration (rad/s^2) of a target slowing down (0: max_joint_acceleration):
    # a stream that ends stops sooner; slowing makes a servo overshoot its rest point (mrad),
    # not its speed cap.
    max_joint_deceleration: float = 0.0
    # How far (fraction) the servo's measured speed runs above its target's speed when the
    # target accelerates at max_joint_acceleration (measured: `lang2policy bench redteam`); the
    # target is capped at max_joint_speed / (1 + servo_overshoot) so the joints measure <= cap.
    servo_overshoot: float = 0.0
    # Metres keep-out zones are grown by for the gripper check (the servo lags and overshoots
    # its target; the guard checks the target).
    zone_margin: float = 0.0
    # Metres the workspace box is shrunk by for the check of every shaped sample's tool point
    # (the servo runs a few mm past its target where the guard stops it at the box's face).
    workspace_margin: float = 0.0
    # Seconds between the samples of a shaped trajectory (the robots' control period or less).
    sample_period: float = 0.02


def default_config_path() -> Path:
    """The packaged config/safety.yaml."""
    return config_dir() / "safety.yaml"


def load_safety_config(robot: str, path: str | Path | None = None) -> RobotSafetyConfig:
    """The validated limits of ``robot`` from ``path`` (default: the packaged safety.yaml)."""
    path = Path(path) if path else default_config_path()
    data = read_yaml(path)
    if robot not in data:
        raise ConfigError(f"{path}: no safety limits for robot '{robot}'; it has {sorted(data)}")
    where = f"{path}: {robot}"
    config = load_dataclass(RobotSafetyConfig, data[robot], where)
    validate(config, where)
    return config


def validate(config: RobotSafetyConfig, where: str) -> None:
    """Raise ConfigError when a number is out of range or a box is empty."""
    _positive(config.max_joint_speed, f"{where}.max_joint_speed")
    _positive(config.state_timeout, f"{where}.state_timeout")
    _positive(config.command_timeout, f"{where}.command_timeout")
    _not_negative(config.joint_limit_margin, f"{where}.joint_limit_margin")
    _not_negative(config.lead_allowance, f"{where}.lead_allowance")
    _positive(config.max_joint_acceleration, f"{where}.max_joint_acceleration")
    _not_negative(config.servo_overshoot, f"{where}.servo_overshoot")
    _not_negative(config.max_joint_deceleration, f"{where}.max_joint_deceleration")
    _not_negative(config.zone_margin, f"{where}.zone_margin")
    _not_negative(config.workspace_margin, f"{where}.workspace_margin")
    _positive(config.sample_period, f"{where}.sample_period")
    if config.sample_period > 0.1:
        raise ConfigError(f"{where}.sample_period: at most 0.1 s, got {config.sample_period}")
    _box(config.workspace, f"{where}.workspace")
    for name, box in config.keep_out.items():
        _box(box, f"{where}.keep_out.{name}")


def _positive(value: float, where: str) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{where}: must be a finite number > 0, got {value!r}")


def _not_negative(value: float, where: str) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{where}: must be a finite number >= 0, got {value!r}")


def _box(box: BoxConfig, where: str) -> None:
    if box.geometry not in GEOMETRIES:
        raise ConfigError(f"{where}.geometry: one of {list(GEOMETRIES)}, got {box.geometry!r}")
    for axis, lo, hi in zip(AXES, box.min, box.max, strict=True):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ConfigError(f"{where}: {axis} bounds must be finite numbers, got {lo}, {hi}")
        if lo >= hi:
            raise ConfigError(
                f"{where}: min {axis} ({lo}) must be below max {axis} ({hi}); "
                "a box is {min: [x, y, z], max: [x, y, z]} with min < max on every axis"
            )
