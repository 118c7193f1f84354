"""Decoding the few ROS 2 messages a demonstration needs from their CDR bytes, in pure Python.

The core may not import ROS (rclpy, the message packages, ``mcap_ros2``: see
test/project/test_import_boundaries.py), so the bytes an MCAP file holds are read here, by the
rules of plain CDR as ROS 2's rmw writes it (Fast-CDR, XCDR1): a 4-byte encapsulation header
(byte 1: 0 big-endian, 1 little-endian), then every primitive aligned to its size counted from
the end of that header; a string is a uint32 length (with its NUL) and the bytes; a sequence a
uint32 count and its elements, aligned to the element size only when there is one (an empty
``float64[]`` adds no padding). Trailing bytes are ignored.

Messages: std_msgs/String, sensor_msgs/JointState, sensor_msgs/Image and
trajectory_msgs/JointTrajectory, decoded into the small tuples below (times in seconds).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from lang2policy.errors import Lang2PolicyError

_HEADER = 4  # encapsulation bytes before the payload


class CdrError(Lang2PolicyError):
    """The bytes are not a well-formed CDR message of the expected type."""


class JointStateMsg(NamedTuple):
    stamp: float
    names: list[str]
    positions: list[float]


class ImageMsg(NamedTuple):
    stamp: float
    height: int
    width: int
    encoding: str
    step: int
    data: bytes


class TrajectoryMsg(NamedTuple):
    stamp: float
    names: list[str]
    points: list[tuple[float, list[float]]]  # (time_from_start s, positions)


class CdrReader:
    """Reads primitives, strings and sequences off a CDR buffer, in order."""

    def __init__(self, data: bytes) -> None:
        if len(data) < _HEADER or data[0] != 0 or data[1] not in (0, 1):
            raise CdrError(f"not a plain CDR message (header {bytes(data[:_HEADER]).hex()})")
        self._data = bytes(data)
        self._order = "<" if data[1] == 1 else ">"
        self._pos = _HEADER

    def _take(self, fmt: str, size: int, count: int = 1) -> tuple[Any, ...]:
        if count:
            self._pos += (-(self._pos - _HEADER)) % size
        end = self._pos + size * count
        if end > len(self._data):
            raise CdrError(f"message ends at byte {len(self._data)}, needed {end}")
        values = struct.unpack_from(f"{self._order}{count}{fmt}", self._data, self._pos)
        self._pos = end
        return values

    def uint32(self) -> int:
        return self._take("I", 4)[0]

    def int32(self) -> int:
        return self._take("i", 4)[0]

    def uint8(self) -> int:
        return self._take("B", 1)[0]

    def string(self) -> str:
        raw = self.raw_bytes()
        return raw.rstrip(b"\0").decode("utf-8", errors="replace")

    def raw_bytes(self) -> bytes:
        """A ``uint8[]`` (or a string's bytes): count, then the bytes."""
        count = self.uint32()
        end = self._pos + count
        if end > len(self._data):
            raise CdrError(f"a {count}-byte field runs past the message end ({len(self._data)})")
        value = self._data[self._pos : end]
        self._pos = end
        return value

    def float64s(self) -> list[float]:
        return list(self._take("d", 8, self.uint32()))

    def strings(self) -> list[str]:
        return [self.string() for _ in range(self.uint32())]

    def time(self) -> float:
        """builtin_interfaces/Time or Duration in seconds."""
        sec = self.int32()
        return sec + self.uint32() * 1e-9

    def header(self) -> float:
        """std_msgs/Header: its stamp in seconds (the frame id is read past)."""
        stamp = self.time()
        self.string()
        return stamp


def decode_string(data: bytes) -> str:
    return CdrReader(data).string()


def decode_joint_state(data: bytes) -> JointStateMsg:
    reader = CdrReader(data)
    stamp = reader.header()
    names = reader.strings()
    return JointStateMsg(stamp, names, reader.float64s())


def decode_image(data: bytes) -> ImageMsg:
    reader = CdrReader(data)
    stamp = reader.header()
    height, width = reader.uint32(), reader.uint32()
    encoding = reader.string()
    reader.uint8()  # is_bigendian: irrelevant for 8-bit encodings
    step = reader.uint32()
    return ImageMsg(stamp, height, width, encoding, step, reader.raw_bytes())


def decode_trajectory(data: bytes) -> TrajectoryMsg:
    reader = CdrReader(data)
    stamp = reader.header()
    names = reader.strings()
    points = []
    for _ in range(reader.uint32()):
        positions = reader.float64s()
        for _unused in range(3):  # velocities, accelerations, effort
            reader.float64s()
        points.append((reader.time(), positions))
    return TrajectoryMsg(stamp, names, points)


DECODERS: dict[str, Callable[[bytes], Any]] = {
    "std_msgs/msg/String": decode_string,
    "sensor_msgs/msg/JointState": decode_joint_state,
    "sensor_msgs/msg/Image": decode_image,
    "trajectory_msgs/msg/JointTrajectory": decode_trajectory,
}
