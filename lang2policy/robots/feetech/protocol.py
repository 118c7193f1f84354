"""The Feetech SCS/STS serial protocol as the STS3215 speaks it: packets, registers, parsing.

Pure code, no I/O: the bus driver and the servo emulator both build on it.

Framing (both directions): ``FF FF ID LEN CODE PARAMS... CHECKSUM`` where LEN = len(PARAMS) + 2,
CODE is the instruction (host -> servo) or the error byte (servo -> host), and
CHECKSUM = ~(ID + LEN + CODE + sum(PARAMS)) & 0xFF. Multi-byte registers are little endian.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from lang2policy.errors import Lang2PolicyError

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_SERVO_ID = 0xFD
MAX_PARAMS = 0xFF - 2  # LEN is one byte and counts CODE and CHECKSUM too

TICKS_PER_TURN = 4096
CENTER_TICK = 2048
MAX_TICK = TICKS_PER_TURN - 1
STS3215_MODEL_NUMBER = 777


class ProtocolError(Lang2PolicyError):
    """A packet is malformed (header, length, checksum, field range); the message says which."""


class Instruction(IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


class Address(IntEnum):
    """STS3215 control table. Below ``EEPROM_END`` the table is EEPROM, from there on RAM."""

    FIRMWARE_MAJOR = 0
    FIRMWARE_MINOR = 1
    MODEL_NUMBER = 3
    ID = 5
    BAUD_RATE = 6
    RETURN_DELAY = 7
    RESPONSE_LEVEL = 8
    MIN_ANGLE_LIMIT = 9
    MAX_ANGLE_LIMIT = 11
    MAX_TEMPERATURE = 13
    MAX_VOLTAGE = 14
    MIN_VOLTAGE = 15
    MAX_TORQUE = 16
    TORQUE_ENABLE = 40
    ACCELERATION = 41
    GOAL_POSITION = 42
    GOAL_TIME = 44
    GOAL_SPEED = 46
    TORQUE_LIMIT = 48
    LOCK = 55
    PRESENT_POSITION = 56
    PRESENT_SPEED = 58
    PRESENT_LOAD = 60
    PRESENT_VOLTAGE = 62
    PRESENT_TEMPERATURE = 63
    STATUS = 65
    MOVING = 66
    PRESENT_CURRENT = 69


EEPROM_END = 40
_TWO_BYTE = {
    Address.MODEL_NUMBER,
    Address.MIN_ANGLE_LIMIT,
    Address.MAX_ANGLE_LIMIT,
    Address.MAX_TORQUE,
    Address.GOAL_POSITION,
    Address.GOAL_TIME,
    Address.GOAL_SPEED,
    Address.TORQUE_LIMIT,
    Address.PRESENT_POSITION,
    Address.PRESENT_SPEED,
    Address.PRESENT_LOAD,
    Address.PRESENT_CURRENT,
}
REGISTER_SIZE: dict[Address, int] = {a: 2 if a in _TWO_BYTE else 1 for a in Address}

# Sign-magnitude registers: the bit that carries the sign (lerobot and the Feetech SDK agree).
SPEED_SIGN_BIT = 15
POSITION_SIGN_BIT = 15
LOAD_SIGN_BIT = 10
LOAD_FULL_SCALE = 1000  # present load counts 0.1 % of the maximum torque

BAUD_RATES = {
    0: 1_000_000,
    1: 500_000,
    2: 250_000,
    3: 128_000,
    4: 115_200,
    5: 76_800,
    6: 57_600,
    7: 38_400,
}


class ErrorBit(IntFlag):
    """Bits of the error byte in every status packet."""

    VOLTAGE = 0x01
    ANGLE = 0x02
    OVERHEAT = 0x04
    OVERCURRENT = 0x08
    OVERLOAD = 0x20


def error_names(bits: int) -> tuple[str, ...]:
    """Names of the error bits set in ``bits`` (unknown bits as ``bit<n>``)."""
    names = [e.name.lower() for e in ErrorBit if bits & e and e.name]
    known = sum(int(e) for e in ErrorBit)
    names += [f"bit{i}" for i in range(8) if bits & ~known & (1 << i)]
    return tuple(names)


@dataclass(frozen=True)
class StatusPacket:
    """A servo's reply: its id, the error byte and the parameters (the data read, if any)."""

    servo_id: int
    error: int
    params: bytes


@dataclass(frozen=True)
class InstructionPacket:
    """A host request: target id (``BROADCAST_ID`` for all), instruction code, parameters."""

    servo_id: int
    instruction: int
    params: bytes


def checksum(body: bytes | bytearray) -> int:
    """Checksum over ID, LEN, CODE and PARAMS (everything between header and checksum)."""
    return ~sum(body) & 0xFF


def _frame(servo_id: int, code: int, params: bytes) -> bytes:
    _check_range("id", servo_id, 0, BROADCAST_ID)
    _check_range("instruction/error", code, 0, 0xFF)
    if len(params) > MAX_PARAMS:
        raise ProtocolError(f"{len(params)} parameter bytes; a packet holds at most {MAX_PARAMS}")
    body = bytes((servo_id, len(params) + 2, code)) + bytes(params)
    return HEADER + body + bytes((checksum(body),))


def encode_instruction(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    return _frame(servo_id, instruction, params)


def encode_status(servo_id: int, error: int = 0, params: bytes = b"") -> bytes:
    return _frame(servo_id, error, params)


def ping_packet(servo_id: int) -> bytes:
    return encode_instruction(servo_id, Instruction.PING)


def read_packet(servo_id: int, address: int, length: int) -> bytes:
    _check_range("address", address, 0, 0xFF)
    _check_range("length", length, 1, MAX_PARAMS)
    return encode_instruction(servo_id, Instruction.READ, bytes((address, length)))


def write_packet(servo_id: int, address: int, data: bytes) -> bytes:
    _check_range("address", address, 0, 0xFF)
    if not data:
        raise ProtocolError("WRITE needs at least one data byte")
    return encode_instruction(servo_id, Instruction.WRITE, bytes((address,)) + bytes(data))


def sync_read_packet(address: int, length: int, servo_ids: Iterable[int]) -> bytes:
    ids = _check_ids(servo_ids)
    _check_range("address", address, 0, 0xFF)
    _check_range("length", length, 1, MAX_PARAMS)
    return encode_instruction(BROADCAST_ID, Instruction.SYNC_READ, bytes((address, length, *ids)))


def sync_write_packet(address: int, data_by_id: Mapping[int, bytes]) -> bytes:
    ids = _check_ids(data_by_id)
    lengths = {len(data_by_id[i]) for i in ids}
    if len(lengths) != 1 or 0 in lengths:
        raise ProtocolError(f"SYNC_WRITE needs equal non-empty data per servo, got {lengths}")
    (length,) = lengths
    params = bytearray((address, length))
    for sid in ids:
        params += bytes((sid,)) + bytes(data_by_id[sid])
    return encode_instruction(BROADCAST_ID, Instruction.SYNC_WRITE, bytes(params))


def decode_sync_read(params: bytes) -> tuple[int, int, tuple[int, ...]]:
    """SYNC_READ parameters -> (address, length, servo ids)."""
    if len(params) < 3:
        raise ProtocolError(f"SYNC_READ needs address, length and ids; got {len(params)} bytes")
    return params[0], params[1], tuple(params[2:])


def decode_sync_write(params: bytes) -> tuple[int, dict[int, bytes]]:
    """SYNC_WRITE parameters -> (address, {servo id: data})."""
    if len(params) < 2 or params[1] == 0:
        raise ProtocolError("SYNC_WRITE needs an address and a non-zero data length")
    address, length = params[0], params[1]
    block = length + 1
    rest = params[2:]
    if not rest or len(rest) % block:
        raise ProtocolError(f"SYNC_WRITE data is {len(rest)} bytes, not a multiple of {block}")
    return address, {rest[i]: bytes(rest[i + 1 : i + block]) for i in range(0, len(rest), block)}


def _split_frame(raw: bytes) -> tuple[int, int, bytes]:
    if len(raw) < 6:
        raise ProtocolError(f"packet too short: {len(raw)} bytes, a packet has at least 6")
    if raw[:2] != HEADER:
        raise ProtocolError(f"bad header {raw[:2].hex(' ')}, expected ff ff")
    if raw[3] != len(raw) - 4:
        raise ProtocolError(f"length byte says {raw[3]}, packet carries {len(raw) - 4}")
    expected = checksum(raw[2:-1])
    if raw[-1] != expected:
        raise ProtocolError(f"bad checksum 0x{raw[-1]:02x}, expected 0x{expected:02x}")
    return raw[2], raw[4], bytes(raw[5:-1])


def decode_status(raw: bytes) -> StatusPacket:
    """One complete status packet -> ``StatusPacket``; ``ProtocolError`` says what is wrong."""
    return StatusPacket(*_split_frame(raw))


def decode_instruction(raw: bytes) -> InstructionPacket:
    return InstructionPacket(*_split_frame(raw))


class _FrameParser:
    """Finds frames in a byte stream, skipping garbage and waiting for partial frames.

    A frame with a bad checksum or impossible length is dropped one byte at a time, so a
    good frame hidden behind a corrupt one is still found. Counters say what was thrown away.
    """

    def __init__(self, max_params: int = MAX_PARAMS) -> None:
        self.max_params = max_params
        self._buf = bytearray()
        self.bad_checksum = 0
        self.bad_length = 0
        self.skipped_bytes = 0

    @property
    def corrupt(self) -> int:
        return self.bad_checksum + self.bad_length

    @property
    def pending(self) -> int:
        """Bytes kept for a frame that has not fully arrived."""
        return len(self._buf)

    def reset(self) -> None:
        self._buf.clear()

    def _frames(self, data: bytes) -> list[tuple[int, int, bytes]]:
        buf = self._buf
        buf += data
        out = []
        while True:
            start = buf.find(HEADER)
            if start < 0:
                keep = 1 if buf.endswith(b"\xff") else 0  # may be the first header byte
                self._skip(len(buf) - keep)
                return out
            self._skip(start)
            if len(buf) < 4:
                return out
            servo_id, length = buf[2], buf[3]
            if servo_id == 0xFF:  # a run of 0xFF: the header is the last two of them
                self._skip(1)
                continue
            if length < 2 or length - 2 > self.max_params:
                self.bad_length += 1
                self._skip(1)
                continue
            total = length + 4
            if len(buf) < total:
                return out
            if buf[total - 1] != checksum(buf[2 : total - 1]):
                self.bad_checksum += 1
                self._skip(1)
                continue
            out.append((servo_id, buf[4], bytes(buf[5 : total - 1])))
            del buf[:total]

    def _skip(self, n: int) -> None:
        self.skipped_bytes += n
        del self._buf[:n]


class StatusParser(_FrameParser):
    """Streaming parser for servo replies: ``feed(bytes) -> [StatusPacket, ...]``."""

    def feed(self, data: bytes) -> list[StatusPacket]:
        return [StatusPacket(*f) for f in self._frames(data)]


class InstructionParser(_FrameParser):
    """Streaming parser for host requests (used by the emulator)."""

    def feed(self, data: bytes) -> list[InstructionPacket]:
        return [InstructionPacket(*f) for f in self._frames(data)]


def encode_u16(value: int) -> bytes:
    _check_range("value", value, 0, 0xFFFF)
    return value.to_bytes(2, "little")


def encode_signed(value: int, sign_bit: int, size: int = 2) -> bytes:
    """Sign-magnitude encoding used by the STS speed, load and (multi-turn) position."""
    magnitude = abs(value)
    _check_range("magnitude", magnitude, 0, (1 << sign_bit) - 1)
    raw = magnitude | ((1 << sign_bit) if value < 0 else 0)
    return raw.to_bytes(size, "little")


def decode_signed(data: bytes, sign_bit: int) -> int:
    raw = int.from_bytes(data, "little")
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw & (1 << sign_bit) else magnitude


def ticks_to_radians(ticks: float) -> float:
    """Encoder ticks -> joint angle, 0 rad at the centre tick 2048."""
    return (ticks - CENTER_TICK) * 2.0 * math.pi / TICKS_PER_TURN


def radians_to_ticks(radians: float) -> int:
    """Joint angle -> nearest tick, clipped to 0..4095 (the single-turn range)."""
    ticks = round(radians * TICKS_PER_TURN / (2.0 * math.pi)) + CENTER_TICK
    return min(max(ticks, 0), MAX_TICK)


def _check_ids(servo_ids: Iterable[int]) -> list[int]:
    ids = list(servo_ids)
    if not ids:
        raise ProtocolError("no servo ids given")
    if len(set(ids)) != len(ids):
        raise ProtocolError(f"duplicate servo ids in {ids}")
    for sid in ids:
        _check_range("servo id", sid, 0, MAX_SERVO_ID)
    return ids


def _check_range(what: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ProtocolError(f"{what} {value!r} out of range; valid: integers {lo}..{hi}")
