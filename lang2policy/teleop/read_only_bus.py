"""A Feetech bus that can only read: the leader arm's port never carries a write.

A leader SO-101 is moved by hand; a byte that changed its goal, torque, id or EEPROM could make
it move, or silently re-calibrate it. So the read-only property is structural rather than a
promise of the calling code: ``ReadOnlySerial`` sits between ``FeetechBus`` (the driver's
protocol code, unchanged) and the serial port, parses every buffer handed to ``write`` as whole
instruction packets, and raises ``WriteRefused`` (sending nothing) unless each one is a PING,
READ or SYNC_READ. A buffer with garbage, a partial packet or a bad checksum is refused too:
what cannot be parsed cannot be proven harmless. The port object offers nothing but what the
bus needs to read (no ``writelines``, no ``send_break``, no attribute passthrough), and
``ReadOnlyBus`` checks each request before sending it too, so a refusal is a ``WriteRefused``
rather than the bus's "lost port" error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lang2policy.errors import Lang2PolicyError
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.protocol import Instruction, InstructionParser

READ_INSTRUCTIONS = frozenset({Instruction.PING, Instruction.READ, Instruction.SYNC_READ})


class WriteRefused(Lang2PolicyError):
    """Bytes other than PING/READ/SYNC_READ packets were about to go to a read-only bus."""


def check_read_only(data: bytes) -> None:
    """Return if ``data`` is only whole PING, READ and SYNC_READ packets; ``WriteRefused``
    naming what was found otherwise."""
    parser = InstructionParser()
    packets = parser.feed(bytes(data))
    if not packets or parser.pending or parser.skipped_bytes or parser.corrupt:
        raise WriteRefused(
            f"refused {len(data)} bytes on the read-only leader bus: not a sequence of whole, "
            f"valid instruction packets ({data[:16].hex(' ')}...); allowed: PING, READ, SYNC_READ"
        )
    for packet in packets:
        if packet.instruction not in READ_INSTRUCTIONS:
            try:
                name = Instruction(packet.instruction).name
            except ValueError:
                name = f"0x{packet.instruction:02x}"
            raise WriteRefused(
                f"refused a {name} packet to servo {packet.servo_id} on the read-only leader "
                "bus; allowed: PING, READ, SYNC_READ (the leader arm is never written to)"
            )


class ReadOnlySerial:
    """A serial port wrapper whose ``write`` lets only read requests through."""

    def __init__(self, port: Any) -> None:
        self._port = port

    def write(self, data: bytes) -> int:
        check_read_only(data)
        return self._port.write(data)

    def read(self, size: int = 1) -> bytes:
        return self._port.read(size)

    @property
    def in_waiting(self) -> int:
        return self._port.in_waiting

    def fileno(self) -> int:
        return self._port.fileno()

    def flush(self) -> None:
        self._port.flush()

    def reset_input_buffer(self) -> None:
        self._port.reset_input_buffer()

    def close(self) -> None:
        self._port.close()


class ReadOnlyBus(FeetechBus):
    """``FeetechBus`` whose every request is checked before it is sent: a write raises
    ``WriteRefused`` itself (not the bus's "lost port" error), and its port is a
    ``ReadOnlySerial``, so a path that bypasses the check still cannot write."""

    def _send(self, packet: bytes) -> None:
        check_read_only(packet)
        super()._send(packet)


def read_only_bus(
    port: str,
    *,
    timeout: float = 0.02,
    retries: int = 2,
    serial_factory: Callable[..., Any] | None = None,
) -> ReadOnlyBus:
    """A ``ReadOnlyBus`` on ``port`` with its serial port wrapped in ``ReadOnlySerial``:
    ``write``, ``sync_write``, ``torque`` and ``write_goal_positions`` raise ``WriteRefused``
    before a byte leaves."""

    def open_read_only(*args: Any, **kwargs: Any) -> ReadOnlySerial:
        factory = serial_factory
        if factory is None:
            import serial

            factory = serial.Serial
        return ReadOnlySerial(factory(*args, **kwargs))

    return ReadOnlyBus(port, timeout=timeout, retries=retries, serial_factory=open_read_only)
