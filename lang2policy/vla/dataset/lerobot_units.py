"""A dataset LeRobot recorded on an SO-101, in our units, for ``train vla``.

LeRobot's SO-101 follower names its state and action ``shoulder_pan.pos`` ... ``gripper.pos``
and reports them in its own units: each body joint in degrees about the middle of its
calibrated range (``use_degrees=True``, LeRobot 0.6's default) or -100..100 across that range
(``use_degrees=False``), the gripper 0..100 across its range. Ours are radians about the
model's zero pose and a gripper opening 0..1 (``vla/spec/schema.py``). Nothing in the dataset says
where that zero lies in ticks, nor which of LeRobot's two body units it holds: the arm's
calibration (``lerobot-calibrate``'s JSON, or ours from ``calibrate so101 --from-lerobot``)
and the unit choice must be given, and a dataset in LeRobot's units is refused without them.

The conversion goes through the servo ticks both describe (``lerobot_calibration``): a value
becomes the tick LeRobot read it from, and that tick our angle. The dataset's state and action
statistics (in LeRobot's units) are dropped, so the normaliser is computed from the converted
frames.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.robots.so101.calibration import GRIPPER, Calibration
from lang2policy.robots.so101.lerobot_calibration import (
    LeRobotMotor,
    lerobot_motors,
    load_calibration,
    to_lerobot,
)
from lang2policy.vla.dataset.reader import DemoDataset
from lang2policy.vla.spec.schema import ACTION_KEY, STATE_KEY, STATE_NAMES

SUFFIX = ".pos"
BODY_UNITS = ("degrees", "range100")  # LeRobot's use_degrees=True / False


def lerobot_names(features: dict) -> list[str] | None:
    """The state's motor names when they are LeRobot's (``<motor>.pos``), else None."""
    names = (features.get(STATE_KEY) or {}).get("names")
    if isinstance(names, list) and names and all(
        isinstance(n, str) and n.endswith(SUFFIX) for n in names
    ):
        return [n[: -len(SUFFIX)] for n in names]
    return None


def in_our_units(
    data: DemoDataset,
    calibration: str | Path | None,
    body_units: str = "degrees",
    accept_calibration_pose: bool = True,
) -> DemoDataset:
    """``data`` with state and action in our units when LeRobot recorded them (else as it
    is, and then ``calibration`` must be None: there is nothing to convert)."""
    motors = lerobot_names(data.info["features"])
    if motors is None:
        if calibration is not None:
            raise ConfigError(
                f"{data.root}: its state is already in our units (names "
                f"{data.info['features'][STATE_KEY].get('names')}); --calibration converts "
                "only datasets LeRobot recorded (<motor>.pos)"
            )
        return data
    order = _our_order(motors, data.root)
    if calibration is None:
        raise ConfigError(
            f"{data.root} was recorded by LeRobot: its state and action are LeRobot's units "
            "(degrees about each range's middle, gripper 0..100), which only the arm's "
            "calibration turns into ours: pass --calibration FILE (lerobot-calibrate's JSON, "
            "or ours from `lang2policy calibrate so101 --from-lerobot`)"
        )
    if body_units not in BODY_UNITS:
        raise ConfigError(f"LeRobot body units must be one of {BODY_UNITS}, got {body_units!r}")
    ours = load_calibration(calibration, accept_calibration_pose=accept_calibration_pose)
    lerobot = lerobot_motors(to_lerobot(ours), f"{calibration}")
    convert = {
        key: to_our_units(getattr(data, key)[:, order], ours, lerobot, body_units)
        for key in ("state", "action")
    }
    stats = {k: v for k, v in data.stats.items() if k not in (STATE_KEY, ACTION_KEY)}
    units = (
        f"LeRobot SO-101 ({body_units}, gripper 0..100; {', '.join(m + SUFFIX for m in motors)})"
        f" -> rad and gripper 0..1 via {Path(calibration).name}"
        + (" (its calibration pose taken as the zero pose)" if _is_lerobot(calibration) else "")
    )
    return replace(data, stats=stats, adaptation={**data.adaptation, "units": units}, **convert)


def _is_lerobot(path: str | Path) -> bool:
    return Path(path).suffix.lower() == ".json"


def _our_order(motors: list[str], root: Path) -> np.ndarray:
    """The dataset's columns in ``STATE_NAMES`` order; every one of the SO-101's motors once."""
    if sorted(motors) != sorted(STATE_NAMES):
        raise ConfigError(
            f"{root}: LeRobot's state names {[m + SUFFIX for m in motors]} are not the SO-101's "
            f"six motors {[n + SUFFIX for n in STATE_NAMES]}; only an SO-101 follower's "
            "dataset can be mapped to our units"
        )
    return np.array([motors.index(name) for name in STATE_NAMES])


def to_our_units(
    values: np.ndarray,
    calibration: Calibration,
    motors: dict[str, LeRobotMotor],
    body_units: str = "degrees",
) -> np.ndarray:
    """``(N, 6)`` LeRobot values (``STATE_NAMES`` order) as ``float32`` radians and gripper
    opening; a non-finite value is refused (ConfigError naming the column)."""
    values = np.asarray(values, np.float64)
    if not np.isfinite(values).all():
        bad = sorted({STATE_NAMES[c] for c in np.argwhere(~np.isfinite(values))[:, 1]})
        raise ConfigError(f"non-finite LeRobot values in {bad}")
    out = np.empty_like(values)
    for column, joint in enumerate(calibration.joints):  # the motor's own formulas, on arrays
        motor, value = motors[joint.name], values[:, column]
        if joint.name == GRIPPER:
            ticks = motor.ticks_of_percent(value)
            out[:, column] = np.clip((ticks - joint.closed) / (joint.open - joint.closed), 0, 1)
        elif body_units == "degrees":
            out[:, column] = joint.ticks_to_rad(motor.ticks_of_degrees(value))
        else:
            out[:, column] = joint.ticks_to_rad(motor.ticks_of_range100(value))
    return out.astype(np.float32)

