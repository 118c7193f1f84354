"""Feetech STS3215 servo bus (the SO-101's motors): protocol, pyserial driver and an emulator.

The emulator is imported from ``lang2policy.robots.feetech.emulator`` when needed.
"""

from lang2policy.robots.feetech.bus import BusStats, FeetechBus
from lang2policy.robots.feetech.bus_errors import FeetechError, PortError, ServoError, ServoTimeout
from lang2policy.robots.feetech.protocol import (
    CENTER_TICK,
    TICKS_PER_TURN,
    Address,
    ErrorBit,
    Instruction,
    ProtocolError,
    StatusParser,
    radians_to_ticks,
    ticks_to_radians,
)
from lang2policy.robots.feetech.servo_state import ServoState

__all__ = [
    "CENTER_TICK",
    "TICKS_PER_TURN",
    "Address",
    "BusStats",
    "ErrorBit",
    "FeetechBus",
    "FeetechError",
    "Instruction",
    "PortError",
    "ProtocolError",
    "ServoError",
    "ServoState",
    "ServoTimeout",
    "StatusParser",
    "radians_to_ticks",
    "ticks_to_radians",
]
