"""A measured state for the real-time MPC, checked at the door.

``check_state`` turns what a state message carries (time, joints by name, object poses,
velocities) into a ``MeasuredState`` or raises ``InvalidStateError`` saying what was wrong:
a missing or non-finite joint, a bad object pose. Objects the planning model cannot represent
are left out (and reported once through ``on_unknown``).
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.model import ObjectState


class InvalidStateError(Lang2PolicyError, ValueError):
    """A measured state was rejected (missing joint, NaN, bad pose, time going back)."""


@dataclass(frozen=True)
class MeasuredState:
    """One validated measurement, in action space, with its steady-clock arrival time."""

    time: float
    joints: dict[str, float]
    velocities: dict[str, float]
    objects: dict[str, ObjectState]
    received: float


def check_state(time: object, joints: Mapping[str, float], objects: Mapping[str, ObjectState],
                velocities: Mapping[str, float], names: Sequence[str],
                known_objects: Collection[str], on_unknown: Callable[[str], None]) -> MeasuredState:
    """The validated state, in action space ``names``, with its steady-clock arrival time."""
    if not _finite(time):
        raise InvalidStateError(f"state time must be a finite number, got {time!r}")
    missing = [n for n in names if n not in joints]
    if missing:
        raise InvalidStateError(f"joint state lacks {missing}; expected {list(names)}")
    bad = [n for n in names if not _finite(joints[n])
           or (n in velocities and not _finite(velocities[n]))]
    if bad:
        raise InvalidStateError(f"joint state has non-finite values for {bad}")
    kept: dict[str, ObjectState] = {}
    for name, obj in objects.items():
        if name not in known_objects:
            on_unknown(name)
            continue
        kept[name] = checked_object(name, obj)
    return MeasuredState(
        float(time), {n: float(joints[n]) for n in names},
        {n: float(velocities[n]) for n in names if n in velocities},
        kept, _time.monotonic())


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def checked_object(name: str, obj: ObjectState) -> ObjectState:
    """A validated copy of an object pose (quaternion normalised)."""
    try:
        position = [float(v) for v in obj.position]
        quat = [float(v) for v in obj.quat]
        velocity = [float(v) for v in obj.velocity]
    except (TypeError, ValueError) as exc:
        raise InvalidStateError(f"object '{name}': pose values must be numbers ({exc})") from exc
    if (len(position), len(quat), len(velocity)) != (3, 4, 3):
        raise InvalidStateError(f"object '{name}': expected position[3], quat[4], velocity[3]")
    # plain floats, not numpy: this runs for every object of every 50 Hz state message
    if not all(math.isfinite(v) for v in (*position, *quat, *velocity)):
        raise InvalidStateError(f"object '{name}' has a non-finite pose or velocity")
    norm = math.sqrt(sum(q * q for q in quat))
    if norm < 1e-6:
        raise InvalidStateError(f"object '{name}' has a zero quaternion")
    return ObjectState(tuple(position), tuple(q / norm for q in quat), tuple(velocity))
