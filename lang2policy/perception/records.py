"""What perception reports per object, and the checks every report passes before it goes out.

``PerceivedObject`` has the fields of ``lang2policy.ros.convert.ObjectPose`` (which the ROS side
turns into a marker), so the same record serves simulator ground truth and camera detections.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from lang2policy.errors import ConfigError

KINDS = ("block", "bowl")


class PerceivedObject(NamedTuple):
    """One object on the table, in the world frame (metres; quat w, x, y, z)."""

    name: str
    position: tuple[float, float, float]
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    kind: str = "block"  # "block" | "bowl" (ground truth may carry other kinds)
    size: float = 0.0125  # half-size of a block, radius of a bowl
    rgba: tuple[float, float, float, float] = (0.6, 0.6, 0.6, 1.0)


def yaw_quat(yaw: float) -> tuple[float, float, float, float]:
    """Quaternion (w, x, y, z) of a rotation by ``yaw`` radians about the world z axis."""
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def validate_objects(objects: Iterable[Sequence]) -> list[PerceivedObject]:
    """Checked copies of object records (anything with PerceivedObject's six fields in order).

    Names must be non-empty and unique; positions 3 finite numbers; quaternions 4 finite
    numbers, not all zero (returned normalised; an all-zero one is refused, not guessed); kind
    a string (the camera reports KINDS, other sources may use others); size finite and > 0;
    rgba 4 numbers in 0..1. Raises ConfigError naming the object and the rule it broke;
    nothing is returned when one record is bad.
    """
    checked: list[PerceivedObject] = []
    seen: set[str] = set()
    for index, record in enumerate(objects):
        obj = _check_one(index, record)
        if obj.name in seen:
            raise ConfigError(f"object '{obj.name}' appears twice; names must be unique")
        seen.add(obj.name)
        checked.append(obj)
    return checked


def _check_one(index: int, record: Sequence) -> PerceivedObject:
    if len(record) != len(PerceivedObject._fields):
        raise ConfigError(
            f"object {index}: expected fields {PerceivedObject._fields}, got {len(record)} values"
        )
    name, position, quat, kind, size, rgba = record
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"object {index}: name must be a non-empty string, got {name!r}")
    where = f"object '{name}'"
    position = _finite(position, 3, f"{where}: position")
    quat = _finite(quat, 4, f"{where}: quat (w, x, y, z)")
    norm = math.sqrt(sum(q * q for q in quat))
    if norm < 1e-6:
        raise ConfigError(f"{where}: quat is all zeros; give a unit quaternion (w, x, y, z)")
    if not isinstance(kind, str):
        raise ConfigError(f"{where}: kind must be a string such as {list(KINDS)}, got {kind!r}")
    if not (isinstance(size, int | float) and math.isfinite(size) and size > 0):
        raise ConfigError(f"{where}: size must be a finite number > 0 (metres), got {size!r}")
    rgba = _finite(rgba, 4, f"{where}: rgba")
    if not all(0.0 <= c <= 1.0 for c in rgba):
        raise ConfigError(f"{where}: rgba values must lie in 0..1, got {list(rgba)}")
    quat = tuple(q / norm for q in quat)
    return PerceivedObject(name.strip(), position, quat, kind, float(size), rgba)


def _finite(values, count: int, what: str) -> tuple[float, ...]:
    try:
        numbers = tuple(float(v) for v in values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must be {count} numbers, got {values!r}") from exc
    if len(numbers) != count or not all(map(math.isfinite, numbers)):
        raise ConfigError(f"{what} must be {count} finite numbers, got {list(numbers)}")
    return numbers
