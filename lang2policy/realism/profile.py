"""Realism profiles: how far the simulated world is from the ideal one (issue 34).

A profile (``config/realism/{off,mild,hard}.yaml``, or a user's copy) gives, per effect, the
range an episode's value is drawn from (``realism.draw``): the light (intensity, direction,
colour temperature, shadows), each object's shade, the table's tint and grain, distractor
objects outside the palette, the camera's pose and focal length off from their calibration,
image noise, blur and exposure, and the STS3215 servos' deadband, backlash, response, command
latency, reading noise and gripper slip.

Every value is checked on load: an unknown key, a value outside its range, NaN, or a range
whose low end is above its high end is refused with the key and what is allowed. ``off`` has
every effect at its identity: the world is today's, byte for byte (nothing is applied).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir
from lang2policy.yaml_strict import read_yaml_file, short

LEVELS = ("off", "mild", "hard")
VERSION = 1

Span = tuple[float, float]


@dataclass(frozen=True)
class Field:
    """One setting's allowed values: a number in [low, high], or a [lo, hi] range within it."""

    low: float
    high: float
    span: bool = False  # a [lo, hi] pair drawn from
    integer: bool = False
    flag: bool = False  # true/false


@dataclass(frozen=True)
class LightRealism:
    intensity: Span = (1.0, 1.0)  # scale of every light's brightness
    direction_deg: float = 0.0  # each light's direction turned by up to this
    temperature_k: Span = (6500.0, 6500.0)  # colour temperature (6500 K: white)
    shadows: bool = False  # the key light casts shadows


@dataclass(frozen=True)
class ColorRealism:
    hue_deg: float = 0.0  # each object's hue shifted by up to this
    saturation: Span = (1.0, 1.0)  # scale
    value: Span = (1.0, 1.0)  # brightness scale


@dataclass(frozen=True)
class TableRealism:
    tint: float = 0.0  # each RGB channel of the table shifted by up to this
    grain: float = 0.0  # contrast of a speckled wood-like texture (0: flat)
    distractors: tuple[int, int] = (0, 0)  # objects outside the palette on the table


@dataclass(frozen=True)
class CameraRealism:
    position_mm: float = 0.0  # the camera's true position off its calibrated one, per axis
    rotation_deg: float = 0.0  # ... and its orientation, about each axis
    focal: float = 0.0  # relative error of the focal length
    noise: float = 0.0  # standard deviation of pixel noise (0..255 scale)
    blur_px: float = 0.0  # Gaussian blur sigma
    exposure: Span = (1.0, 1.0)  # brightness gain of the sensor


@dataclass(frozen=True)
class ServoRealism:
    deadband_ticks: float = 0.0  # a goal this close to the present position is not pursued
    backlash_ticks: float = 0.0  # play in the gears when the direction reverses
    response_s: float = 0.0  # time constant of the position loop (0: as the plant follows)
    latency_s: float = 0.0  # from a goal written to the servo acting on it
    read_noise_ticks: float = 0.0  # standard deviation of the present position read
    gripper_slip: float = 0.0  # chance per grasp that the held object slips


@dataclass(frozen=True)
class RealismProfile:
    """One realism level; see the module docstring."""

    name: str = "off"
    light: LightRealism = LightRealism()
    colors: ColorRealism = ColorRealism()
    table: TableRealism = TableRealism()
    camera: CameraRealism = CameraRealism()
    servo: ServoRealism = ServoRealism()

    @property
    def is_off(self) -> bool:
        """Every effect at its identity (the world is left exactly as built)."""
        return all(getattr(self, g) == _CLASSES[g]() for g in _CLASSES)

    def to_dict(self) -> dict[str, Any]:
        """The profile as YAML/JSON data (what reports and datasets record)."""
        data: dict[str, Any] = {"version": VERSION, "name": self.name}
        for group in _GROUPS:
            section = getattr(self, group.name)
            data[group.name] = {
                f.name: list(v) if isinstance(v := getattr(section, f.name), tuple) else v
                for f in fields(section)
            }
        return data


_GROUPS = [f for f in fields(RealismProfile) if f.name != "name"]

# Allowed values of every setting (what a user's file may hold).
RULES: dict[str, dict[str, Field]] = {
    "light": {
        "intensity": Field(0.1, 3.0, span=True),
        "direction_deg": Field(0.0, 60.0),
        "temperature_k": Field(2000.0, 10000.0, span=True),
        "shadows": Field(0, 1, flag=True),
    },
    "colors": {
        "hue_deg": Field(0.0, 30.0),
        "saturation": Field(0.3, 1.5, span=True),
        "value": Field(0.3, 1.5, span=True),
    },
    "table": {
        "tint": Field(0.0, 0.3),
        "grain": Field(0.0, 0.5),
        "distractors": Field(0, 4, span=True, integer=True),
    },
    "camera": {
        "position_mm": Field(0.0, 50.0),
        "rotation_deg": Field(0.0, 10.0),
        "focal": Field(0.0, 0.2),
        "noise": Field(0.0, 30.0),
        "blur_px": Field(0.0, 5.0),
        "exposure": Field(0.3, 2.0, span=True),
    },
    "servo": {
        "deadband_ticks": Field(0.0, 50.0),
        "backlash_ticks": Field(0.0, 100.0),
        "response_s": Field(0.0, 0.5),
        "latency_s": Field(0.0, 0.2),
        "read_noise_ticks": Field(0.0, 20.0),
        "gripper_slip": Field(0.0, 1.0),
    },
}
_CLASSES = {
    "light": LightRealism,
    "colors": ColorRealism,
    "table": TableRealism,
    "camera": CameraRealism,
    "servo": ServoRealism,
}


def realism_path(level: str) -> Path:
    """The shipped profile of ``level``."""
    return config_dir() / "realism" / f"{level}.yaml"


def load_realism(name_or_path: str | Path) -> RealismProfile:
    """The profile named ``off``/``mild``/``hard``, or read from a YAML file path."""
    text = str(name_or_path)
    if text in LEVELS:
        return realism_from_dict(read_yaml_file(realism_path(text)), text)
    path = Path(text).expanduser()
    if not path.suffix or not path.exists():
        raise ConfigError(
            f"realism {short(text)!s}: not a level or a file; allowed: {', '.join(LEVELS)} "
            "or the path of a YAML file (copy config/realism/mild.yaml to start)"
        )
    return realism_from_dict(read_yaml_file(path), str(path))


def realism_from_dict(data: Any, source: str = "realism") -> RealismProfile:
    """A profile from parsed YAML/JSON data; ConfigError naming the key for any bad value."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of realism settings, got {short(data)}")
    allowed = {"version", "name", *RULES}
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    if data.get("version", VERSION) != VERSION:
        raise ConfigError(f"{source}: version must be {VERSION}, got {short(data['version'])}")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip() or len(name) > 40:
        raise ConfigError(f"{source}: name must be a short text, got {short(name)}")
    groups = {g: _group(data.get(g, {}), g, source) for g in RULES}
    return RealismProfile(name=name.strip(), **groups)


def _group(section: Any, group: str, source: str):
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: {group} must be a mapping, got {short(section)}")
    rules = RULES[group]
    unknown = sorted(str(k) for k in section if k not in rules)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {group}.{unknown}; allowed: {sorted(rules)}")
    values = {key: _value(section[key], rules[key], f"{group}.{key}", source) for key in section}
    return _CLASSES[group](**values)


def _value(value: Any, rule: Field, key: str, source: str):
    if rule.flag:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key} must be true or false, got {short(value)}")
        return value
    if rule.span:
        if not isinstance(value, list) or len(value) != 2:
            raise ConfigError(
                f"{source}: {key} must be a range [low, high] within "
                f"[{rule.low:g}, {rule.high:g}], got {short(value)}"
            )
        low, high = (_number(v, rule, key, source) for v in value)
        if low > high:
            raise ConfigError(f"{source}: {key} range [{low:g}, {high:g}] has low above high")
        return (low, high)
    return _number(value, rule, key, source)


def _number(value: Any, rule: Field, key: str, source: str) -> float | int:
    kind = "an integer" if rule.integer else "a number"
    allowed = f"{kind} in [{rule.low:g}, {rule.high:g}]"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{source}: {key} must be {allowed}, got {short(value)}")
    if rule.integer and not isinstance(value, int):
        raise ConfigError(f"{source}: {key} must be {allowed}, got {short(value)}")
    if not math.isfinite(value) or not rule.low <= value <= rule.high:
        raise ConfigError(f"{source}: {key} must be {allowed}, got {short(value)}")
    return int(value) if rule.integer else float(value)
