"""SO-101 servo calibration: which servo drives which joint, and how ticks map to the sim's units.

One ``JointCalibration`` per joint: servo id, ``sign`` (+1 or -1: the drive direction relative to
the MuJoCo model), ``zero`` (the tick at which the joint is at 0 rad in the model) and the
calibrated ``range_min``..``range_max`` ticks. The gripper also has ``closed`` and ``open`` ticks,
between which its normalised opening runs from 0 to 1 (as ``World.gripper_opening``).

    rad = sign * (ticks - zero) * 2 pi / 4096

The default file ``hardware/so101/calibration.yaml`` has ``zero`` 2048 and the ranges of the
simulation model, so an uncalibrated arm and the sim agree; ``guided_calibration`` computes a
real one from tick samples recorded while a person moves each joint through its range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError
from lang2policy.paths import share_dir
from lang2policy.robots.feetech.protocol import MAX_TICK, TICKS_PER_TURN

ARM_JOINTS: tuple[str, ...] = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_roll",
)
GRIPPER = "gripper"
JOINTS: tuple[str, ...] = (*ARM_JOINTS, GRIPPER)
DEFAULT_SERVO_IDS: dict[str, int] = {name: i + 1 for i, name in enumerate(JOINTS)}
RAD_PER_TICK = 2.0 * math.pi / TICKS_PER_TURN
MIN_SPAN_TICKS = 50  # a joint that moved less than this during calibration was not moved

_KEYS = {"id", "sign", "zero", "range_min", "range_max"}
_GRIPPER_KEYS = _KEYS | {"closed", "open"}


def default_calibration_path() -> Path:
    return share_dir() / "hardware" / "so101" / "calibration.yaml"


@dataclass(frozen=True)
class JointCalibration:
    name: str
    servo_id: int
    sign: int
    zero: int
    range_min: int
    range_max: int
    closed: int | None = None  # gripper only
    open: int | None = None  # gripper only

    def validate(self) -> None:
        where = f"calibration of '{self.name}'"
        if not 0 <= self.servo_id <= 252:
            raise ConfigError(f"{where}: servo id {self.servo_id} not in 0..252")
        if self.sign not in (1, -1):
            raise ConfigError(f"{where}: sign must be 1 or -1, got {self.sign}")
        for key in ("zero", "range_min", "range_max", "closed", "open"):
            value = getattr(self, key)
            if value is not None and not 0 <= value <= MAX_TICK:
                raise ConfigError(f"{where}: {key} = {value} ticks is outside 0..{MAX_TICK}")
        if self.range_min >= self.range_max:
            raise ConfigError(
                f"{where}: range_min ({self.range_min}) must be below range_max ({self.range_max})"
            )
        if self.name == GRIPPER:
            if self.closed is None or self.open is None:
                raise ConfigError(f"{where}: the gripper needs 'closed' and 'open' ticks")
            if self.closed == self.open:
                raise ConfigError(f"{where}: closed and open ticks must differ ({self.open})")
            for key in ("closed", "open"):
                value = getattr(self, key)
                if not self.range_min <= value <= self.range_max:
                    raise ConfigError(
                        f"{where}: {key} = {value} is outside the range "
                        f"{self.range_min}..{self.range_max}"
                    )
        elif self.closed is not None or self.open is not None:
            raise ConfigError(f"{where}: only the gripper has 'closed' and 'open' ticks")

    # -- conversions -----------------------------------------------------------------------------

    def ticks_to_rad(self, ticks: float) -> float:
        """Joint angle in the sim's convention (not clamped: a reading is reported as it is)."""
        return self.sign * (ticks - self.zero) * RAD_PER_TICK

    def rad_to_ticks(self, rad: float, *, clamp: bool = True) -> int:
        """Nearest tick for an angle; clamped into the calibrated range (or ConfigError)."""
        if not math.isfinite(rad):
            raise ValueError(f"{self.name}: angle must be finite, got {rad}")
        ticks = round(self.zero + self.sign * rad / RAD_PER_TICK)
        return self._limit(ticks, clamp, f"{rad:.4f} rad")

    @property
    def lower_rad(self) -> float:
        return min(self.ticks_to_rad(self.range_min), self.ticks_to_rad(self.range_max))

    @property
    def upper_rad(self) -> float:
        return max(self.ticks_to_rad(self.range_min), self.ticks_to_rad(self.range_max))

    def ticks_to_opening(self, ticks: float) -> float:
        """Gripper: normalised opening, 0 at ``closed`` and 1 at ``open``, clipped to 0..1."""
        closed, opened = self._gripper_ends()
        return min(max((ticks - closed) / (opened - closed), 0.0), 1.0)

    def opening_to_ticks(self, opening: float, *, clamp: bool = True) -> int:
        """Gripper: nearest tick for a normalised opening (clipped to 0..1, or ConfigError)."""
        if not math.isfinite(opening):
            raise ValueError(f"{self.name}: opening must be finite, got {opening}")
        if not clamp and not 0.0 <= opening <= 1.0:
            raise ConfigError(f"{self.name}: opening {opening} is outside 0..1")
        closed, opened = self._gripper_ends()
        ticks = round(closed + min(max(opening, 0.0), 1.0) * (opened - closed))
        return self._limit(ticks, clamp, f"opening {opening}")

    def _gripper_ends(self) -> tuple[int, int]:
        if self.closed is None or self.open is None:
            raise ConfigError(f"'{self.name}' has no gripper calibration (closed/open ticks)")
        return self.closed, self.open

    def _limit(self, ticks: int, clamp: bool, what: str) -> int:
        if self.range_min <= ticks <= self.range_max:
            return ticks
        if clamp:
            return min(max(ticks, self.range_min), self.range_max)
        raise ConfigError(
            f"{self.name}: {what} is tick {ticks}, outside the calibrated range "
            f"{self.range_min}..{self.range_max}"
        )

    def as_dict(self) -> dict[str, int]:
        data = {
            "id": self.servo_id,
            "sign": self.sign,
            "zero": self.zero,
            "range_min": self.range_min,
            "range_max": self.range_max,
        }
        if self.closed is not None and self.open is not None:
            data |= {"closed": self.closed, "open": self.open}
        return data


@dataclass(frozen=True)
class Calibration:
    """All six joints, in action order (the arm joints, then the gripper)."""

    joints: tuple[JointCalibration, ...]

    def __post_init__(self) -> None:
        names = [j.name for j in self.joints]
        unknown = sorted(set(names) - set(JOINTS))
        missing = [n for n in JOINTS if n not in names]
        if unknown or missing or len(names) != len(set(names)):
            raise ConfigError(
                f"SO-101 calibration must list each of {list(JOINTS)} once; "
                f"unknown: {unknown}, missing: {missing}"
            )
        ordered = tuple(next(j for j in self.joints if j.name == n) for n in JOINTS)
        object.__setattr__(self, "joints", ordered)
        for joint in ordered:
            joint.validate()
        ids = [j.servo_id for j in ordered]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"SO-101 calibration: servo ids must be distinct, got {ids}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def servo_ids(self) -> tuple[int, ...]:
        return tuple(j.servo_id for j in self.joints)

    @property
    def arm(self) -> tuple[JointCalibration, ...]:
        return self.joints[:-1]

    @property
    def gripper(self) -> JointCalibration:
        return self.joints[-1]

    def __getitem__(self, name: str) -> JointCalibration:
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise KeyError(f"no joint '{name}'; joints: {list(self.names)}")

    def by_id(self, servo_id: int) -> JointCalibration:
        for joint in self.joints:
            if joint.servo_id == servo_id:
                return joint
        raise KeyError(f"no servo id {servo_id}; ids: {list(self.servo_ids)}")

    def action_to_ticks(self, action: Sequence[float]) -> dict[int, int]:
        """Action vector (arm rad + gripper 0..1, action order) -> {servo id: goal tick}."""
        if len(action) != len(self.joints):
            raise ValueError(f"action needs {len(self.joints)} values, got {len(action)}")
        arm = zip(self.arm, action[:-1], strict=True)
        goals = {j.servo_id: j.rad_to_ticks(float(v)) for j, v in arm}
        goals[self.gripper.servo_id] = self.gripper.opening_to_ticks(float(action[-1]))
        return goals

    def ticks_to_action(self, ticks: Mapping[int, float]) -> list[float]:
        """{servo id: tick} -> action-order values (arm rad, gripper opening 0..1)."""
        values = [j.ticks_to_rad(ticks[j.servo_id]) for j in self.arm]
        values.append(self.gripper.ticks_to_opening(ticks[self.gripper.servo_id]))
        return values

    # -- files -----------------------------------------------------------------------------------

    def as_dict(self) -> dict:
        return {"robot": "so101", "joints": {j.name: j.as_dict() for j in self.joints}}

    def save(self, path: str | Path) -> None:
        header = (
            "# SO-101 servo calibration (lang2policy.robots.so101.calibration).\n"
            "# rad = sign * (ticks - zero) * 2 pi / 4096; gripper opening 0..1 from closed..open.\n"
        )
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(header + yaml.safe_dump(self.as_dict(), sort_keys=False))

    @classmethod
    def from_dict(cls, data: object, source: str = "calibration") -> Calibration:
        if not isinstance(data, Mapping) or not isinstance(data.get("joints"), Mapping):
            raise ConfigError(f"{source}: expected a mapping with a 'joints' mapping")
        extra = sorted(set(data) - {"robot", "joints"})
        if extra:
            raise ConfigError(f"{source}: unknown top-level keys {extra}")
        joints = []
        for name, entry in data["joints"].items():
            if name not in JOINTS:
                raise ConfigError(f"{source}: unknown joint '{name}'; joints: {list(JOINTS)}")
            joints.append(_joint_from_dict(str(name), entry, source))
        try:
            return cls(tuple(joints))
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path | None = None) -> Calibration:
        """Read a calibration file (default: ``hardware/so101/calibration.yaml``)."""
        path = Path(path) if path is not None else default_calibration_path()
        try:
            data = read_yaml(path)  # strict and bounded: duplicate keys, aliases etc. refused
        except ConfigError as exc:
            raise ConfigError(f"cannot read SO-101 calibration: {exc}") from exc
        return cls.from_dict(data, str(path))


def _joint_from_dict(name: str, entry: object, source: str) -> JointCalibration:
    where = f"{source}: joint '{name}'"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a mapping of {sorted(_KEYS)}")
    allowed = _GRIPPER_KEYS if name == GRIPPER else _KEYS
    unknown = sorted(set(entry) - allowed)
    missing = sorted((_GRIPPER_KEYS if name == GRIPPER else _KEYS) - set(entry))
    if unknown or missing:
        raise ConfigError(f"{where}: unknown keys {unknown}, missing keys {missing}")
    values = {}
    for key in allowed:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
        values[key] = value
    return JointCalibration(
        name=name,
        servo_id=values["id"],
        sign=values["sign"],
        zero=values["zero"],
        range_min=values["range_min"],
        range_max=values["range_max"],
        closed=values.get("closed"),
        open=values.get("open"),
    )


def guided_calibration(
    samples: Mapping[str, Sequence[int]],
    zero_ticks: Mapping[str, int],
    *,
    servo_ids: Mapping[str, int] | None = None,
    signs: Mapping[str, int] | None = None,
    gripper_closed: int | None = None,
    gripper_open: int | None = None,
) -> Calibration:
    """Compute a calibration from recorded ticks (pure: no bus access).

    ``samples[joint]`` are the ticks read while a person moved ``joint`` through its whole
    range; ``zero_ticks[joint]`` the tick at the pose where the model has the joint at 0 rad
    (the middle pose). The range is the smallest and largest sample. The gripper's closed and
    open ticks default to the ends of its range on the closing and opening side for its sign.
    Ranges that wrap through tick 0/4095 are not supported (move the servo horn instead).
    """
    unknown = sorted((set(samples) | set(zero_ticks)) - set(JOINTS))
    missing = [n for n in JOINTS if n not in samples or n not in zero_ticks]
    if unknown or missing:
        raise ConfigError(
            f"guided calibration needs samples and a zero tick for each of {list(JOINTS)}; "
            f"unknown: {unknown}, missing: {missing}"
        )
    ids = {**DEFAULT_SERVO_IDS, **(servo_ids or {})}
    joints = []
    for name in JOINTS:
        ticks = [int(t) for t in samples[name]]
        zero = int(zero_ticks[name])
        if not ticks:
            raise ConfigError(f"guided calibration: no samples recorded for '{name}'")
        bad = [t for t in (*ticks, zero) if not 0 <= t <= MAX_TICK]
        if bad:
            raise ConfigError(f"guided calibration: '{name}' has ticks outside 0..4095: {bad[:5]}")
        low, high = min(ticks), max(ticks)
        if high - low < MIN_SPAN_TICKS:
            raise ConfigError(
                f"guided calibration: '{name}' only moved {high - low} ticks ({low}..{high}); "
                "move it through its whole range"
            )
        if not low <= zero <= high:
            raise ConfigError(
                f"guided calibration: zero tick {zero} of '{name}' is outside its recorded "
                f"range {low}..{high}"
            )
        sign = int((signs or {}).get(name, 1))
        extra = {}
        if name == GRIPPER:
            closed_end, open_end = (low, high) if sign > 0 else (high, low)
            extra = {
                "closed": closed_end if gripper_closed is None else int(gripper_closed),
                "open": open_end if gripper_open is None else int(gripper_open),
            }
        joints.append(
            JointCalibration(name, ids[name], sign, zero, low, high, **extra)  # type: ignore[arg-type]
        )
    return Calibration(tuple(joints))


def with_joint(calibration: Calibration, name: str, **changes: int) -> Calibration:
    """A copy with one joint's fields changed (validated)."""
    joints = tuple(replace(j, **changes) if j.name == name else j for j in calibration.joints)
    return Calibration(joints)
