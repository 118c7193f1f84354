"""The leader SO-101: its servos' present positions as follower joint targets.

A leader arm is an SO-101 with its torque off that a person moves by hand; its six STS3215
servos sit on a bus of their own (a second USB adapter). ``LeaderArm`` reads their present
positions with one SYNC_READ through a read-only bus (``read_only_bus``: the driver's protocol
code, with every write refused before it leaves the port) and maps ticks to joint positions
with the driver's calibration format (``hardware/so101/calibration.yaml``; a leader has a
calibration file of its own, made with ``lang2policy calibrate so101 --port <leader port>``):

    rad = sign * (ticks - zero) * 2 pi / 4096; gripper opening 0..1 from closed..open

so a leader posture means the same joint angles as the follower's. Readings are checked before
they become targets: a tick outside 0..4095 or farther than ``margin_ticks`` outside the
joint's calibrated range (a wrong calibration file, a slipped horn, a decoding error) is a
``LeaderFault`` naming the joint; within the margin it is clamped into the range. Checksums,
framing and timeouts are the bus's (``FeetechBus``: corrupt replies are retried, a silent servo
raises ``ServoTimeout``). The caller holds the follower on any of these errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.protocol import MAX_TICK, Address
from lang2policy.robots.so101.calibration import Calibration

DEFAULT_MARGIN_TICKS = 100  # about 9 degrees: hand-moved joints overshoot calibration a little


class LeaderFault(Lang2PolicyError):
    """The leader's reading is not a posture to follow (the message says which joint and why)."""


@dataclass(frozen=True)
class LeaderReading:
    """Follower joint targets (arm rad, gripper opening 0..1, action order) and raw ticks."""

    names: tuple[str, ...]
    target: np.ndarray
    ticks: dict[int, int]


def leader_target(
    calibration: Calibration, ticks: Mapping[int, int], margin_ticks: int = DEFAULT_MARGIN_TICKS
) -> np.ndarray:
    """Leader ticks by servo id -> follower joint targets (action order); ``LeaderFault`` for
    a missing servo or a tick outside 0..4095 or outside the calibrated range +- margin."""
    for joint in calibration.joints:
        if joint.servo_id not in ticks:
            raise LeaderFault(f"leader servo {joint.servo_id} ({joint.name}) sent no position")
        tick = ticks[joint.servo_id]
        low, high = joint.range_min - margin_ticks, joint.range_max + margin_ticks
        if isinstance(tick, bool) or not isinstance(tick, int) or not 0 <= tick <= MAX_TICK:
            raise LeaderFault(
                f"leader {joint.name} (servo {joint.servo_id}) reads {tick!r}; valid: integer "
                f"ticks 0..{MAX_TICK}"
            )
        if not low <= tick <= high:
            raise LeaderFault(
                f"leader {joint.name} (servo {joint.servo_id}) reads tick {tick}, outside its "
                f"calibrated range {joint.range_min}..{joint.range_max} (+-{margin_ticks}); "
                "check the leader's calibration file or recalibrate it"
            )
    clamped = {
        j.servo_id: min(max(ticks[j.servo_id], j.range_min), j.range_max)
        for j in calibration.joints
    }
    return np.array(calibration.ticks_to_action(clamped))


class LeaderArm:
    """A leader SO-101 on a read-only bus (``read_only_bus``); ``connect``, ``read``, ``close``."""

    def __init__(
        self,
        bus: FeetechBus,
        calibration: Calibration,
        margin_ticks: int = DEFAULT_MARGIN_TICKS,
    ) -> None:
        if margin_ticks < 0:
            raise ValueError(f"margin_ticks must be >= 0, got {margin_ticks}")
        self.bus = bus
        self.calibration = calibration
        self.margin_ticks = margin_ticks

    @property
    def names(self) -> tuple[str, ...]:
        return self.calibration.names

    def connect(self) -> None:
        """Open the port and check every servo answers and has its torque off (a leader with
        torque on resists the hand; only a power cycle turns it off: nothing is written)."""
        self.bus.open()
        try:
            ids = self.calibration.servo_ids
            self.bus.check_servos(ids)
            torque = self.bus.sync_read(Address.TORQUE_ENABLE, 1, ids)
            on = [self.calibration.by_id(i).name for i in ids if torque[i] != b"\x00"]
            if on:
                raise LeaderFault(
                    f"leader joints {on} have their torque on: power-cycle the leader arm "
                    "(the leader reader never writes to its servos)"
                )
        except BaseException:
            self.bus.close()
            raise

    def read(self) -> LeaderReading:
        """One SYNC_READ of the present positions, checked and mapped (see the module)."""
        ticks = self.bus.read_positions(self.calibration.servo_ids)
        target = leader_target(self.calibration, ticks, self.margin_ticks)
        return LeaderReading(self.names, target, dict(ticks))

    def close(self) -> None:
        self.bus.close()
