"""Hostile answers a red team built against ``lerobot_answer.read_action_chunk`` (issue 35):
each is refused with ``PolicyBackendError``, quickly and without a memory spike. Before the
fixes they hung the process for hours (a POP of a mark desynchronised the opcode scan, so a
shared-tuple dict key reached ``hash``), raised ``OverflowError``/``ValueError`` past the VLA
node, allocated 820 MB from 1 MiB, or re-parsed one memoized storage 90,000 times."""

from __future__ import annotations

import pickle
import resource
import struct
import time

import numpy as np
import pytest

from lang2policy.errors import PolicyBackendError
from lang2policy.vla.backends import lerobot_answer as answer

pytestmark = pytest.mark.timeout(60)

MAX_BYTES, ROWS, DIM = 1 << 20, 100, 6


def sbu(text: str) -> bytes:  # SHORT_BINUNICODE
    return b"\x8c" + bytes([len(text)]) + text.encode()


def glob(module: str, name: str) -> bytes:  # STACK_GLOBAL
    return sbu(module) + sbu(name) + b"\x93"


def get(i: int) -> bytes:
    return b"h" + bytes([i])


def put(i: int) -> bytes:
    return b"q" + bytes([i])


def int4(n: int) -> bytes:
    if -(2**31) <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8b" + struct.pack("<i", len(raw)) + raw  # LONG4


def storage_blob(values: list[float], kind: str = "DoubleStorage", code: str = "<f8") -> bytes:
    """A legacy ``torch.save`` of one CPU storage, as LeRobot's tensors carry it."""

    def p2(obj: object) -> bytes:
        return pickle.dumps(obj, protocol=2)

    head = p2(answer._LEGACY_MAGIC) + p2(answer._LEGACY_PROTOCOL) + p2({"little_endian": True})
    text = lambda s: b"X" + struct.pack("<I", len(s)) + s.encode()  # noqa: E731
    record = (b"\x80\x02(" + text("storage") + b"ctorch\n" + kind.encode() + b"\n" + text("k")
              + text("cpu") + int4(len(values)) + b"Nt" + b"Q.")  # fmt: skip
    raw = np.asarray(values, dtype=code).tobytes()
    return head + record + p2(["k"]) + struct.pack("<q", len(values)) + raw


def tensor(blob: bytes, n: int) -> bytes:
    rebuild = glob("torch._utils", "_rebuild_tensor_v2")
    load = glob("torch.storage", "_load_from_bytes")
    storage = load + b"B" + struct.pack("<I", len(blob)) + blob + b"\x85R"
    size = int4(0) + int4(n) + b"\x85" + int4(1) + b"\x85\x89"
    return rebuild + b"(" + storage + size + glob("collections", "OrderedDict") + b")R" + b"tR"


def timed(action: bytes, step: bytes, stamp: bytes) -> bytes:
    return (glob(answer.HELPERS, "TimedAction") + b")\x81}(" + sbu("timestamp") + stamp
            + sbu("timestep") + step + sbu("action") + action + b"ub")  # fmt: skip


def float8(x: float) -> bytes:
    return b"G" + struct.pack(">d", x)


def refused_fast(data: bytes, match: str = "LeRobot wire") -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(PolicyBackendError, match=match):
        answer.read_action_chunk(data, MAX_BYTES, ROWS, DIM)
    assert time.perf_counter() - start < 5.0
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 200


def test_a_genuine_row_built_here_is_read():
    from lang2policy.vla.backends import lerobot_wire

    assert answer.HELPERS == lerobot_wire.HELPERS  # the class our writers name, read back
    row = timed(tensor(storage_blob([1.0, 2, 3, 4, 5, 6]), 6), b"K\x00", float8(1.0))
    actions, steps, _ = answer.read_action_chunk(b"\x80\x04](" + row + b"e.", MAX_BYTES, ROWS, DIM)
    assert actions.tolist() == [[1, 2, 3, 4, 5, 6]] and steps == [0]


def test_a_pop_of_a_mark_cannot_smuggle_a_tuple_key_into_a_dict():
    depth = 40  # hashing the key would take 2**40 steps with the GIL held
    build = b")\x94" + b"".join(get(i) + get(i) + b"\x86\x940" for i in range(depth))
    data = (b"\x80\x04" + build + b"}(" + get(depth) + sbu("v") + sbu("a") + b"(0"
            + sbu("b") + sbu("c") + sbu("e") + b"u.")  # fmt: skip
    refused_fast(data, "POP of a mark")


@pytest.mark.parametrize(
    ("step", "stamp"),
    [(b"K\x00", int4(2**1024)), (int4(-(10**5000)), float8(1.0)), (int4(10**5000), float8(1.0))],
)
def test_huge_ints_are_refused_as_such_not_as_overflow_or_value_errors(step, stamp):
    row = timed(tensor(storage_blob([0.0] * 6), 6), step, stamp)
    refused_fast(b"\x80\x04](" + row + b"e.")


def test_one_memoized_storage_cannot_be_rebuilt_into_a_memory_bomb():
    blob = storage_blob([0.5] * 600, "HalfStorage", "<f2")
    head = (b"\x80\x04" + glob("torch._utils", "_rebuild_tensor_v2") + put(0) + b"0" + b"("
            + glob("torch.storage", "_load_from_bytes") + b"B" + struct.pack("<I", len(blob))
            + blob + b"\x85R" + int4(0) + int4(600) + b"\x85" + int4(1) + b"\x85\x89"
            + glob("collections", "OrderedDict") + b")R" + b"t" + put(1) + b"0" + b"]")  # fmt: skip
    repeat = get(0) + get(1) + b"Ra"
    refused_fast(head + repeat * ((MAX_BYTES - len(head) - 1) // len(repeat)) + b".")


def test_one_memoized_storage_blob_cannot_be_parsed_over_and_over():
    blob = storage_blob([0.0] * 6)
    head = (b"\x80\x04" + glob("torch.storage", "_load_from_bytes") + put(0) + b"0"
            + b"B" + struct.pack("<I", len(blob)) + blob + put(1) + b"0")  # fmt: skip
    refused_fast(head + (get(0) + get(1) + b"\x85R0") * 150_000 + b"N.")


def test_a_long_run_of_cheap_opcodes_is_cut_off():
    refused_fast(b"\x80\x04" + b"N0" * 500_000 + b"N.", "opcodes")
