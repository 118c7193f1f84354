"""Joint maps: how a ros2_control arm's joints correspond to our robot description's joints.

The graph speaks the joint names of ``config/robots/<robot>.yaml`` (the compiled model's
names, plus the normalised ``gripper`` 0 = closed .. 1 = open). A real arm's ros2_control
driver has names of its own (``fr3_joint1``, ``shoulder_pan_joint`` ...), its own joint zero
conventions, limits that may be tighter than the model's, and publishes its joint states in
any order with extra joints (fingers). A joint map (``hardware/<arm>.yaml``) says all of that
once; ``JointMap.to_hardware`` / ``JointMap.from_hardware`` convert commands and states, and
``lang2policy.ros.joint_map_bridge_node`` applies them between the graph and the controller.

Conventions:
  * ``lower``, ``upper`` and ``home`` are in the *hardware's* convention (what the controller
    sees, what the vendor's data sheet lists); ``hardware = ours + offset``.
  * A map's limits must lie inside the description's limits (converted with the offset):
    wider limits are an error, not a warning, because the planner, the IK and the safety node
    all assume the description's limits; a map cannot widen them, only narrow them (the
    usual case: the real arm's range is tighter than the model's).
  * ``joints`` lists every arm joint of the description, in the description's order (that is
    the order of the graph's ``/joint_states``).
  * ``gripper`` maps the contract's 0..1 opening linearly onto one hardware joint
    (``closed`` .. ``open``); ``commanded: false`` when the arm's gripper has a driver of its
    own (Franka's gripper actions) and only its joint state is read.

Loading and checking a map file: ``lang2policy.hardware.joint_map_files``. Pure: no ROS import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lang2policy.errors import InvalidCommandError

# The contract's normalised gripper entry (lang2policy.scene.arm.GRIPPER; not imported here
# so that this module loads without MuJoCo).
GRIPPER = "gripper"
# Slack for comparing limits written with 4 decimals after adding an offset (float rounding).


@dataclass(frozen=True)
class MappedJoint:
    """One arm joint: our name, the arm's name, the arm's limits and home (hardware units)."""

    name: str
    hardware_name: str
    lower: float
    upper: float
    home: float
    offset: float = 0.0  # hardware = ours + offset (a different joint zero in the arm's URDF)


@dataclass(frozen=True)
class MappedGripper:
    """The contract's gripper opening (0..1) as one hardware joint position."""

    hardware_name: str
    closed: float  # hardware position at opening 0
    open: float  # hardware position at opening 1
    commanded: bool = True  # False: read only; the arm's own gripper driver moves it

    def to_hardware(self, opening: float) -> float:
        return self.closed + float(np.clip(opening, 0.0, 1.0)) * (self.open - self.closed)

    def from_hardware(self, position: float) -> float:
        return float(np.clip((position - self.closed) / (self.open - self.closed), 0.0, 1.0))


@dataclass(frozen=True)
class HardwareTrajectory:
    """A command converted for the arm: hardware names (map order) and clamped positions."""

    names: tuple[str, ...]
    positions: np.ndarray  # (points, joints), hardware units; empty rows: stop and hold
    clamped: tuple[str, ...]  # our names of the joints clipped to the map's limits
    dropped: tuple[str, ...]  # our names not sent (a gripper the controller does not own)


@dataclass(frozen=True)
class JointMap:
    """A ros2_control arm's joints and topics, validated (see the module docstring)."""

    arm: str  # the hardware's name (fr3, ur5e, so101 ...), for messages
    robot: str  # our robot description: config/robots/<robot>.yaml
    trajectory_topic: str  # the controller's JointTrajectory input
    joint_states_topic: str  # where the arm's JointState arrives (joint_state_broadcaster)
    joints: list[MappedJoint]
    gripper: MappedGripper | None = None
    # Hardware joints the arm publishes that we do not use (e.g. the second finger); the
    # stand-in publishes them too, and the bridge drops them.
    extra_joints: list[str] = field(default_factory=list)
    source: str = ""  # the file it was read from (messages only)

    # ----------------------------------------------------------------- names
    @property
    def names(self) -> tuple[str, ...]:
        """Our names in the graph's order: the arm joints, then ``gripper`` if mapped."""
        return (*(j.name for j in self.joints), *((GRIPPER,) if self.gripper else ()))

    @property
    def commanded_names(self) -> tuple[str, ...]:
        """Our names of the joints the controller owns (those sent on trajectory_topic)."""
        gripper = self.gripper is not None and self.gripper.commanded
        return (*(j.name for j in self.joints), *((GRIPPER,) if gripper else ()))

    def hardware_name(self, name: str) -> str:
        if name == GRIPPER and self.gripper is not None:
            return self.gripper.hardware_name
        return self._joint(name).hardware_name

    def hardware_limits(self) -> dict[str, tuple[float, float]]:
        """Limits (hardware names and units) of the joints the controller owns."""
        limits = {j.hardware_name: (j.lower, j.upper) for j in self.joints}
        if self.gripper is not None and self.gripper.commanded:
            g = self.gripper
            limits[g.hardware_name] = (min(g.closed, g.open), max(g.closed, g.open))
        return limits

    def hardware_home(self) -> dict[str, float]:
        """Every joint the arm publishes at its home position (gripper closed, extras 0)."""
        home = {j.hardware_name: j.home for j in self.joints}
        if self.gripper is not None:
            home[self.gripper.hardware_name] = self.gripper.closed
        return home | {name: 0.0 for name in self.extra_joints}

    def _joint(self, name: str) -> MappedJoint:
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise InvalidCommandError(f"joint map {self.arm}: unknown joint '{name}'")

    # ----------------------------------------------------------------- conversion
    def to_hardware(
        self,
        names: Sequence[str],
        positions: Sequence[Sequence[float]] | np.ndarray,
        hold: Mapping[str, float] | None = None,
    ) -> HardwareTrajectory:
        """Convert trajectory points in our names (any order, any subset) for the controller.

        ``positions`` has one row per point, one column per name (our units). The result
        names every joint the controller owns, in map order (joint_trajectory_controller
        rejects partial goals by default): a joint not in ``names`` is filled from ``hold``
        (our names, e.g. the measured position). Positions are clipped to the map's limits.
        Raises InvalidCommandError for unknown names, a missing joint without a ``hold``
        value, or rows of the wrong length.
        """
        names = list(names)
        rows = _rows(positions, len(names))
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise InvalidCommandError(
                f"joint map {self.arm}: unknown joints {unknown}; known: {list(self.names)}"
            )
        hold = dict(hold or {})
        missing = [n for n in self.commanded_names if n not in names and n not in hold]
        if missing and len(rows):
            raise InvalidCommandError(
                f"joint map {self.arm}: the command does not name {missing} and no held "
                "position is known for them (the controller needs every joint it owns)"
            )
        columns = {n: rows[:, i] for i, n in enumerate(names)}
        out, clamped = [], []
        for name in self.commanded_names:
            ours = columns.get(name, np.full(len(rows), hold.get(name, 0.0)))
            value, clipped = self._joint_to_hardware(name, ours)
            out.append(value)
            if clipped and name in columns:
                clamped.append(name)
        dropped = tuple(n for n in names if n not in self.commanded_names)
        matrix = np.stack(out, axis=1) if len(rows) else np.zeros((0, len(out)))
        hardware_names = tuple(self.hardware_name(n) for n in self.commanded_names)
        return HardwareTrajectory(hardware_names, matrix, tuple(clamped), dropped)

    def _joint_to_hardware(self, name: str, ours: np.ndarray) -> tuple[np.ndarray, bool]:
        """Hardware positions of one joint's column and whether any was clipped."""
        if name == GRIPPER:
            assert self.gripper is not None
            clipped = bool(np.any((ours < 0.0) | (ours > 1.0)))
            return np.array([self.gripper.to_hardware(v) for v in ours]), clipped
        joint = self._joint(name)
        raw = ours + joint.offset
        value = np.clip(raw, joint.lower, joint.upper)
        return value, bool(np.any(value != raw))

    def from_hardware(
        self,
        names: Sequence[str],
        positions: Sequence[float],
        velocities: Sequence[float] | None = None,
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray | None]:
        """A hardware joint state in our names and order: (names, positions, velocities).

        Hardware joints are matched by name (any order); joints the map does not use are
        dropped. Velocities are converted when given (one per name), else None. Raises
        ValueError naming the hardware joints that are missing, or on mismatched lengths.
        """
        names = list(names)
        velocities = None if velocities is None or len(velocities) == 0 else velocities
        if len(positions) != len(names) or (
            velocities is not None and len(velocities) != len(names)
        ):
            count = 0 if velocities is None else len(velocities)
            raise ValueError(
                f"joint state has {len(names)} names, {len(positions)} positions and {count} "
                "velocities; positions (and velocities, if any) need one per name"
            )
        index = {n: i for i, n in enumerate(names)}
        wanted = [self.hardware_name(n) for n in self.names]
        missing = [h for h in wanted if h not in index]
        if missing:
            raise ValueError(
                f"joint map {self.arm}: the arm's joint state lacks {missing} (it has {names})"
            )
        pairs = list(zip(self.names, wanted, strict=True))
        ours = np.array([self._from_hardware(n, positions[index[h]]) for n, h in pairs])
        speeds = None
        if velocities is not None:
            speeds = np.array([self._speed(n, velocities[index[h]]) for n, h in pairs])
        return self.names, ours, speeds

    def _from_hardware(self, name: str, value: float) -> float:
        if name == GRIPPER:
            assert self.gripper is not None
            return self.gripper.from_hardware(value)
        return float(value) - self._joint(name).offset

    def _speed(self, name: str, value: float) -> float:
        if name == GRIPPER:
            assert self.gripper is not None
            return float(value) / (self.gripper.open - self.gripper.closed)
        return float(value)


def _rows(positions: Sequence[Sequence[float]] | np.ndarray, width: int) -> np.ndarray:
    """Trajectory rows as a (points, width) float array; InvalidCommandError on a bad shape."""
    rows = np.asarray(positions, dtype=float)
    if rows.size == 0:
        return np.zeros((0, width))
    if rows.ndim != 2 or rows.shape[1] != width:
        raise InvalidCommandError(
            f"trajectory rows must have one position per name ({width}), got shape {rows.shape}"
        )
    return rows
