"""An ``.npz`` file's arrays, read only after every size it declares is checked (``read_npz``).

``np.load`` trusts an archive: a member's ``.npy`` header can declare any shape, and numpy
allocates that much before it reads a byte of data, so 2 MB of deflated zeros become a 2 GB
array. Here each member's uncompressed size (from the zip directory) and its header's shape
and dtype are checked against the caller's limits first; the data are then read, never past
the size the zip directory gives, and must match the header exactly.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

from lang2policy.errors import Lang2PolicyError

_KINDS = "fiu"  # real numbers only: no objects (pickles), strings or structured dtypes
_HEADER_MAX_BYTES = 10_000  # numpy's own limit for a safe header


@dataclass(frozen=True)
class NpzLimits:
    """At most ``arrays`` members, each of at most ``array_bytes``, ``total_bytes`` together."""

    arrays: int
    array_bytes: int
    total_bytes: int


def read_npz(
    path: Path, limits: NpzLimits, error: type[Lang2PolicyError] = Lang2PolicyError
) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path`` by name; ``error`` naming the member, the field
    and the limit for anything too large, and for anything that is not plain numbers."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            _check_sizes(path, members, limits, error)
            return {_name(path, m, error): _array(archive, m, path, error) for m in members}
    except (OSError, EOFError, zipfile.BadZipFile, ValueError, NotImplementedError) as exc:
        raise error(f"cannot read {path} as an .npz file: {exc}") from exc


def _check_sizes(
    path: Path,
    members: list[zipfile.ZipInfo],
    limits: NpzLimits,
    error: type[Lang2PolicyError],
) -> None:
    """The zip directory's member count and uncompressed sizes, before anything is inflated."""
    if len(members) > limits.arrays:
        raise error(f"{path}: it holds {len(members)} arrays; at most {limits.arrays} are read")
    for member in members:
        if member.file_size > limits.array_bytes:
            raise error(
                f"{path}: {member.filename} is {member.file_size} bytes uncompressed "
                f"(file_size); at most {limits.array_bytes} bytes per array are read"
            )
    total = sum(member.file_size for member in members)
    if total > limits.total_bytes:
        raise error(
            f"{path}: its arrays are {total} bytes uncompressed (file_size); at most "
            f"{limits.total_bytes} bytes are read"
        )


def _name(path: Path, member: zipfile.ZipInfo, error: type[Lang2PolicyError]) -> str:
    if not member.filename.endswith(".npy"):
        raise error(f"{path}: member {member.filename!r:.80} is not an .npy array")
    return member.filename.removesuffix(".npy")


def _array(
    archive: zipfile.ZipFile, member: zipfile.ZipInfo, path: Path, error: type[Lang2PolicyError]
) -> np.ndarray:
    """One member: its header checked against its zip size, then exactly that many bytes."""
    where = f"{path}: {member.filename}"
    with archive.open(member) as stream:
        version = npy.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(stream, _HEADER_MAX_BYTES)
        else:
            shape, fortran, dtype = npy.read_array_header_2_0(stream, _HEADER_MAX_BYTES)
        if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise error(f"{where}: dtype {dtype} is not allowed; arrays hold real numbers")
        size = math.prod(shape) * dtype.itemsize
        if size != member.file_size - stream.tell():
            raise error(
                f"{where}: its header declares shape {shape} of {dtype} ({size} bytes); the "
                f"member holds {member.file_size - stream.tell()} bytes of data"
            )
        data = stream.read(size)
    if len(data) != size:
        raise error(f"{where}: the data end after {len(data)} of {size} bytes")
    order = "F" if fortran else "C"
    return np.frombuffer(data, dtype=dtype).reshape(shape, order=order).copy()  # writable
