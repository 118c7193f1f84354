"""One servo's readout (position, speed, load, voltage, temperature, moving, error bits) and its
decoding from the 11 state registers the bus reads in one sync read."""

from __future__ import annotations

from dataclasses import dataclass

from lang2policy.robots.feetech.protocol import (
    LOAD_FULL_SCALE,
    LOAD_SIGN_BIT,
    POSITION_SIGN_BIT,
    SPEED_SIGN_BIT,
    Address,
    decode_signed,
    error_names,
)

STATE_START = Address.PRESENT_POSITION
STATE_LENGTH = Address.MOVING - Address.PRESENT_POSITION + 1  # position .. moving, 11 bytes


@dataclass(frozen=True)
class ServoState:
    """One servo's readout. Speed in ticks/s, load as a signed fraction of maximum torque."""

    servo_id: int
    position: int
    speed: int
    load: float
    voltage: float
    temperature: int
    moving: bool
    errors: int

    @property
    def error_names(self) -> tuple[str, ...]:
        return error_names(self.errors)


def decode_state(servo_id: int, data: bytes, errors: int) -> ServoState:
    """Registers 56..66 (position .. moving) -> ``ServoState``."""
    return ServoState(
        servo_id=servo_id,
        position=decode_signed(data[0:2], POSITION_SIGN_BIT),
        speed=decode_signed(data[2:4], SPEED_SIGN_BIT),
        load=decode_signed(data[4:6], LOAD_SIGN_BIT) / LOAD_FULL_SCALE,
        voltage=data[6] / 10.0,
        temperature=data[7],
        moving=bool(data[Address.MOVING - STATE_START]),
        errors=errors,
    )
