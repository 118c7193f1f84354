"""The running plan's keep-out zones on the wire: the JSON of ``/lang2policy/plan_zones``.

The planner node publishes, when a plan starts, the keep-out zones of the plan's privilege
policy (``sandbox.policy_keep_out``), and an empty mapping when the plan ends; the safety node
keeps the gripper out of them, beside config/safety.yaml's, on every motion from every source.
One JSON object, world frame, metres::

    {"plan_id": "3f2a9c01b7de" | null,
     "keep_out": {"person_side": {"min": [x, y, z], "max": [x, y, z]}, ...}}

Anyone on the graph can publish it, so ``decode_plan_zones`` bounds the text before it parses
it (``MAX_BYTES``), then the count of zones, each name and each corner, and refuses anything
else with a ``ConfigError`` that names the field and the limit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from lang2policy.errors import ConfigError
from lang2policy.safety.config import AXES, BoxConfig
from lang2policy.wire_json import MessageError, decode_json_object

MAX_BYTES = 64 * 1024  # UTF-8 bytes of one message
MAX_ZONES = 32
MAX_NAME = 64  # characters of a zone name, and of a plan id
KEYS = ("plan_id", "keep_out")
CORNERS = ("min", "max")
_DEPTH = 4  # the message, keep_out, a zone, a corner


def encode_plan_zones(plan_id: str | None, zones: Mapping[str, Any]) -> str:
    """The message for ``plan_id`` (None: no plan runs) and ``zones`` (name -> anything with
    ``min`` and ``max`` corners: a ``BoxConfig`` or the policy's ``Box``). ConfigError when
    they break a limit that ``decode_plan_zones`` checks."""
    message = {
        "plan_id": plan_id,
        "keep_out": {
            name: {corner: [float(v) for v in getattr(box, corner)] for corner in CORNERS}
            for name, box in zones.items()
        },
    }
    _checked(message)
    return json.dumps(message, separators=(",", ":"))


def decode_plan_zones(text: str | bytes) -> tuple[str | None, dict[str, BoxConfig]]:
    """The plan id (None: no plan runs) and the keep-out zones of one message; ConfigError
    naming what is wrong and what is allowed."""
    try:
        message = decode_json_object(text, max_bytes=MAX_BYTES, max_depth=_DEPTH, what="plan zones")
    except MessageError as exc:
        raise ConfigError(str(exc)) from None
    return _checked(message)


def _checked(message: dict) -> tuple[str | None, dict[str, BoxConfig]]:
    if set(message) != set(KEYS):
        raise ConfigError(
            f"plan zones: the keys must be exactly {list(KEYS)}, got {sorted(map(str, message))}"
        )
    plan_id = message["plan_id"]
    if plan_id is not None:
        _check_name(plan_id, "plan zones: plan_id (null when no plan runs)")
    zones = message["keep_out"]
    if not isinstance(zones, dict):
        raise ConfigError(f"plan zones: keep_out must be an object, got {type(zones).__name__}")
    if len(zones) > MAX_ZONES:
        raise ConfigError(f"plan zones: keep_out has {len(zones)} zones; at most {MAX_ZONES}")
    boxes = {}
    for name, box in zones.items():
        _check_name(name, "plan zones: a keep_out zone name")
        boxes[name] = _box(box, f"plan zones: keep_out.{name}")
    return plan_id, boxes


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isprintable():
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        raise ConfigError(f"{what} must be 1 to {MAX_NAME} printable characters, got {shown}")


def _box(box: object, where: str) -> BoxConfig:
    if not isinstance(box, dict) or set(box) != set(CORNERS):
        keys = sorted(map(str, box)) if isinstance(box, dict) else type(box).__name__
        raise ConfigError(f"{where}: must be {{min: [x, y, z], max: [x, y, z]}}, got {keys}")
    low, high = (_corner(box[c], f"{where}.{c}") for c in CORNERS)
    for axis, lo, hi in zip(AXES, low, high, strict=True):
        if lo >= hi:
            raise ConfigError(f"{where}: min {axis} ({lo:g}) must be below max {axis} ({hi:g})")
    return BoxConfig(low, high)


def _corner(corner: object, where: str) -> tuple[float, float, float]:
    values = corner if isinstance(corner, list) else []
    numbers = isinstance(corner, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    )
    if not numbers or len(values) != len(AXES) or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{where}: must be 3 finite numbers [x, y, z] (m), got {corner!r:.80}")
    x, y, z = (float(v) for v in values)
    return (x, y, z)
