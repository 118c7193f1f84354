"""An MCAP file's schemas, channels, messages and metadata, read within limits
(``read_records``).

The ``mcap`` library trusts what a file declares: a chunk's ``uncompressed_size`` becomes the
size of the buffer it decompresses into (a 66 KB file of zstd blocks asks for 2.2 GB), and a
record's length fields become the sizes of its reads. Here every declared size is compared
with ``loader_limits`` before memory is taken for it, decompression stops one byte past the
declared size, and the records of all chunks together may hold only so many bytes and so
many records. The records are parsed with ``mcap``'s own record classes; records the episode
reader does not need (indexes, statistics, attachments) are skipped unread.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import lz4.frame
import zstandard
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import Channel, Message, Metadata, Schema

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.spec.loader_limits import (
    MCAP_MAX_CHUNK_BYTES,
    MCAP_MAX_EXPANSION,
    MCAP_MAX_RECORD_BYTES,
    MCAP_MAX_RECORDS,
    MCAP_MAX_SMALL_RECORD_BYTES,
    MCAP_MIN_BUDGET_BYTES,
    at_most,
)

MAGIC = b"\x89MCAP0\r\n"
Record = Schema | Channel | Message | Metadata
_HEAD = struct.Struct("<BQ")  # opcode, length
_MESSAGE = struct.Struct("<HIQQ")  # channel id, sequence, log time, publish time
_CHUNK = struct.Struct("<QQQII")  # start, end, uncompressed size, crc, compression length
_SMALL = {Opcode.SCHEMA: Schema, Opcode.CHANNEL: Channel, Opcode.METADATA: Metadata}
_WANTED = (Opcode.CHUNK, Opcode.MESSAGE, *_SMALL)


def read_records(path: Path) -> Iterator[Record]:
    """The schemas, channels, messages and metadata of the MCAP file ``path``, in file order.

    ``McapError`` for a file that is not MCAP or is cut short;
    ``Lang2PolicyError`` naming the field and the limit for one that declares too much.
    """
    with open(path, "rb") as stream:
        try:
            yield from _Reader(stream, Path(path).name).records()
        except struct.error as exc:
            raise McapError(f"a record is cut short ({exc})") from exc


class _Reader:
    """One pass over one file, counting what its chunks inflate to and its records."""

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self.stream, self.name = stream, name
        self.size = os.fstat(stream.fileno()).st_size
        self.budget = max(MCAP_MIN_BUDGET_BYTES, MCAP_MAX_EXPANSION * self.size)
        self.inflated = 0
        self.count = 0

    def records(self) -> Iterator[Record]:
        if self.stream.read(len(MAGIC)) != MAGIC:
            raise McapError("not an MCAP file: it does not start with the MCAP magic bytes")
        while True:
            at = self.stream.tell()
            head = self.stream.read(_HEAD.size)
            if len(head) < _HEAD.size:
                raise McapError(f"the file ends at byte {at} without a footer record (cut short?)")
            opcode, length = _HEAD.unpack(head)
            if opcode == Opcode.FOOTER:
                return
            self._counted()
            self._check_left(length, at)
            if opcode not in _WANTED:  # indexes, statistics, attachments ...: not needed
                self.stream.seek(length, io.SEEK_CUR)
                continue
            body = self._body(opcode, length, at)
            if opcode == Opcode.CHUNK:
                yield from self._chunk(body, at)
            else:
                yield _record(opcode, memoryview(body))

    def _body(self, opcode: int, length: int, at: int) -> bytes:
        limit = MCAP_MAX_SMALL_RECORD_BYTES if opcode in _SMALL else MCAP_MAX_RECORD_BYTES
        field = f"the length of a {Opcode(opcode).name.lower()} record"
        at_most(length, limit, field, self._at(at), unit="bytes")
        return self.stream.read(length)

    def _check_left(self, length: int, at: int) -> None:
        left = self.size - self.stream.tell()
        if length > left:
            raise McapError(
                f"the record at byte {at} declares {length} bytes; the file has {left} left"
            )

    def _chunk(self, body: bytes, at: int) -> Iterator[Record]:
        """The records of one chunk, decompressed within its declared size and the budget."""
        view = memoryview(body)
        _, _, declared, _, name_length = _CHUNK.unpack_from(view)
        compression = bytes(view[_CHUNK.size : _CHUNK.size + name_length]).decode()
        offset = _CHUNK.size + name_length
        (data_length,) = struct.unpack_from("<Q", view, offset)
        data = view[offset + 8 : offset + 8 + data_length]
        if len(data) != data_length:
            raise McapError(f"the chunk at byte {at} is shorter than its records field says")
        where = self._at(at)
        at_most(declared, MCAP_MAX_CHUNK_BYTES, "a chunk's uncompressed_size", where, unit="bytes")
        self.inflated += declared
        if self.inflated > self.budget:
            raise Lang2PolicyError(
                f"{where}: the chunks so far hold {self.inflated} bytes uncompressed "
                f"(uncompressed_size); at most {self.budget} bytes are read from this file "
                f"({MCAP_MAX_EXPANSION} times its size, and at least {MCAP_MIN_BUDGET_BYTES})"
            )
        yield from self._chunk_records(_inflate(compression, data, declared, where), where)

    def _chunk_records(self, data: memoryview, where: str) -> Iterator[Record]:
        position = 0
        while position < len(data):
            opcode, length = _HEAD.unpack_from(data, position)
            start, end = position + _HEAD.size, position + _HEAD.size + length
            if end > len(data):
                raise McapError(f"a record in the chunk {where} runs past the chunk's end")
            self._counted()
            if opcode in _SMALL:
                field = f"the length of a {Opcode(opcode).name.lower()} record"
                at_most(length, MCAP_MAX_SMALL_RECORD_BYTES, field, where, unit="bytes")
            if opcode == Opcode.MESSAGE or opcode in _SMALL:
                yield _record(opcode, data[start:end])
            position = end

    def _counted(self) -> None:
        self.count += 1
        if self.count > MCAP_MAX_RECORDS:
            raise Lang2PolicyError(
                f"{self.name}: the file holds more than {MCAP_MAX_RECORDS} records; at most "
                f"{MCAP_MAX_RECORDS} are read (MCAP_MAX_RECORDS)"
            )

    def _at(self, at: int) -> str:
        return f"{self.name} (the record at byte {at})"


def _record(opcode: int, body: memoryview) -> Record:
    if opcode == Opcode.MESSAGE:
        if len(body) < _MESSAGE.size:
            raise McapError(f"a message record of {len(body)} bytes; it needs {_MESSAGE.size}")
        channel, sequence, log_time, publish_time = _MESSAGE.unpack_from(body)
        return Message(
            channel_id=channel,
            log_time=log_time,
            data=bytes(body[_MESSAGE.size :]),
            publish_time=publish_time,
            sequence=sequence,
        )
    return _SMALL[opcode].read(ReadDataStream(io.BytesIO(body)))


def _inflate(compression: str, data: memoryview, declared: int, where: str) -> memoryview:
    """A chunk's records, decompressed: at most ``declared`` + 1 bytes are ever produced."""
    try:
        if compression == "":
            out = data
        elif compression == "zstd":
            reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
            out = _read_at_most(reader, declared + 1)
        elif compression == "lz4":
            out = _lz4_at_most(data, declared + 1)
        else:
            raise McapError(f"unknown chunk compression {compression!r}; expected '', zstd or lz4")
    except (zstandard.ZstdError, RuntimeError) as exc:  # lz4 raises RuntimeError
        raise McapError(f"{where}: the chunk cannot be decompressed ({exc})") from exc
    if len(out) != declared:
        size = f"more than {declared}" if len(out) > declared else str(len(out))
        raise Lang2PolicyError(
            f"{where}: the chunk decompresses to {size} bytes; its uncompressed_size says "
            f"{declared}, and no more is read"
        )
    return out


def _lz4_at_most(data: memoryview, size: int) -> memoryview:
    """Up to ``size`` bytes of one LZ4 frame; a frame cut short is an error."""
    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = decompressor.decompress(bytes(data), max_length=size)
    if len(out) < size and not decompressor.eof:
        raise McapError("an LZ4 frame is cut short")
    return memoryview(out)


def _read_at_most(reader: io.RawIOBase, size: int) -> memoryview:
    """Up to ``size`` bytes of ``reader``, into one buffer of that size."""
    buffer = memoryview(bytearray(size))
    filled = 0
    while filled < size:
        count = reader.readinto(buffer[filled:])
        if not count:
            break
        filled += count
    return buffer[:filled]
