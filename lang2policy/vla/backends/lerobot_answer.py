"""LeRobot's answer to ``GetActions`` (a pickled ``list[TimedAction]``) read without running
any code of the sender's: ``read_action_chunk``.

A policy server may be wrong or hostile. The answer is bounded in size, opcode-scanned first
(no sets, only str dict keys, bounded stack, memo and opcode count: hashing a shared-tuple key
takes 2**depth steps, a long run of cheap opcodes takes seconds), then unpickled through an
allow-list that maps each allowed global to our own bounded stand-in (calls and storage bytes
counted, so memoized storages cannot be rebuilt over and over), then checked row by row. Every
refusal is a ``PolicyBackendError``, whatever went wrong inside. Standalone (numpy and
``lang2policy.errors``), so LeRobot's environment can load it by path to cross-check it.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools

import numpy as np

from lang2policy.errors import PolicyBackendError

HELPERS = "lerobot.async_inference.helpers"  # as lerobot_wire.HELPERS (a test keeps them equal)
MAX_PICKLE_DEPTH = 64  # stack + marks, plus max_rows for an answer's list (one APPENDS batch)
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
_LEGACY_PROTOCOL = 1001
_STORAGES = {"FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2"}
_STORAGE = object()  # tags the storages load_from_bytes made
_PUTS, _GETS = ("PUT", "BINPUT", "LONG_BINPUT"), ("GET", "BINGET", "LONG_BINGET")
_SET_OPS = ("EMPTY_SET", "ADDITEMS", "FROZENSET")
_STR_OPS = ("UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8")

_MAX_INT = 2**63  # timesteps are int64 in LeRobot; a bigger int is an attack, not a step
_MAX_STAMP_INT = 2**53  # an int timestamp beyond this is not a float a clock gives
OPS_PER_ROW, OPS_BASE, OPS_INNER = 64, 1000, 1000  # the real answer: ~42 opcodes per row


def _fail(message: str) -> PolicyBackendError:
    """The module's one error type, with the message it is given (raise the result)."""
    return PolicyBackendError(f"LeRobot wire: {message}")


def _what(value: object) -> str:
    """``value`` shown without ever running repr on a nested (maybe huge or cyclic) object."""
    if type(value) is int and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    if value is None or type(value) in (bool, int, float):
        return repr(value)
    return repr(value[:40]) if type(value) is str else f"a {type(value).__name__}"


def _scan(stream: io.BytesIO, max_memo: int, max_depth: int, max_ops: int) -> None:
    """Walk one pickle's opcodes to STOP, running none, tracking which stack items are str:
    refuse sets and dict keys that are not str (hashing a shared-tuple bomb takes 2**depth
    steps), a POP of a mark (CPython pops the mark, which would desync this walk), a stack
    deeper than ``max_depth``, memo indices over ``max_memo`` and more than ``max_ops``
    opcodes."""
    stack: list[bool] = []  # per item: is it a str?
    marks: list[int] = []
    memo: dict[int, bool] = {}
    for count, (op, arg, pos) in enumerate(pickletools.genops(stream)):  # ValueError: malformed
        name, before, mark = op.name, op.stack_before, pickletools.markobject
        if name in _SET_OPS or (name in _PUTS and arg > max_memo) or count >= max_ops:
            limits = f"no sets, memo indices <= {max_memo}, at most {max_ops} opcodes"
            raise _fail(f"{name} {_what(arg)} at byte {pos} (opcode {count}); {limits}")
        if name == "POP" and marks and marks[-1] == len(stack):
            raise _fail(f"POP of a mark at byte {pos}; a POP must pop an object")
        if name in _PUTS or name == "MEMOIZE":  # memoizes the top item, pops nothing
            memo[len(memo) if name == "MEMOIZE" else arg] = stack[-1]
            continue
        top = (marks.pop() if marks else -1) if mark in before else len(stack) - len(before)
        low = top - before.index(mark) if mark in before else top
        if low < 0:
            raise _fail(f"{name} at byte {pos} pops more than the stack holds")
        keys = stack[top + 1 :: 2] if name == "SETITEM" else stack[top::2]
        if name in ("SETITEM", "SETITEMS", "DICT") and not all(keys):
            raise _fail(f"{name} at byte {pos} sets a dict key that is not a str; only str")
        del stack[low:]
        if name == "MARK":
            marks.append(len(stack))
        elif name in _GETS:
            stack.append(memo.get(arg, False))
        else:
            stack += [name in _STR_OPS] * len(op.stack_after)
        if len(stack) + len(marks) > max_depth:
            raise _fail(f"pickle stack deeper than {max_depth} at byte {pos}; nested too deep")


class _NoHooks:
    """``collections.OrderedDict()`` stand-in: a tensor's empty backward hooks, nothing else."""

    __slots__ = ()


class _TimedAction:
    """``helpers.TimedAction`` stand-in: takes exactly its three fields from BUILD."""

    __slots__ = ("action", "timestamp", "timestep")

    def __setstate__(self, state: object) -> None:
        """BUILD: the dataclass's ``__dict__``; any other key or shape is refused."""
        if not isinstance(state, dict) or set(state) != {"timestamp", "timestep", "action"}:
            raise _fail(f"TimedAction state {_what(state)}; a dict of action, timestamp, timestep")
        self.action, self.timestamp, self.timestep = (state[k] for k in self.__slots__)


class _Unpickler(pickle.Unpickler):
    """Unpickles through an allow-list of our stand-ins (storage pickles: storage types only)."""

    def __init__(
        self, stream: io.BytesIO, max_elements: int, outer: bool, max_rows: int = 0
    ) -> None:
        super().__init__(stream)
        self.max_elements, self.pid, self.outer = max_elements, None, outer
        self.max_rows = max_rows
        # one storage and one tensor per row; their bytes at most the answer's own
        self.calls_left = {"storages": max_rows, "tensors": max_rows}
        self.bytes_left = len(stream.getbuffer())
        self.allowed = {("torch", name): name for name in _STORAGES}
        if outer:
            self.allowed = {
                (HELPERS, "TimedAction"): _TimedAction,
                ("torch._utils", "_rebuild_tensor_v2"): self.rebuild_tensor_v2,
                ("torch.storage", "_load_from_bytes"): self.load_from_bytes,
                ("collections", "OrderedDict"): _NoHooks,
            }

    def find_class(self, module: str, name: str) -> object:
        """Our stand-in for ``module.name``, or a refusal naming what is allowed."""
        if (module, name) not in self.allowed:
            names = ", ".join(sorted(f"{m}.{n}" for m, n in self.allowed))
            raise _fail(f"the pickle names the global {module}.{name}; allowed: {names}")
        return self.allowed[(module, name)]

    def persistent_load(self, pid: object) -> object:
        """A legacy storage record ``('storage', type, key, location, numel, None)``, once."""
        ok = not self.outer and self.pid is None and type(pid) is tuple and len(pid) == 6
        ok = ok and pid[0] == "storage" and pid[1] in tuple(_STORAGES) and type(pid[2]) is str
        if not ok or type(pid[4]) is not int or pid[5] is not None:
            names = "|".join(_STORAGES)
            raise _fail(f"persistent id {_what(pid)}; one ('storage', {names}, key, device, numel)")
        self.pid = pid
        return pid

    def inner(self, stream: io.BytesIO) -> tuple[object, tuple | None]:
        """The next pickle of a legacy ``torch.save`` stream (scanned first) and its record."""
        start = stream.tell()
        _scan(stream, 64, MAX_PICKLE_DEPTH, OPS_INNER)
        stream.seek(start)
        unpickler = _Unpickler(stream, self.max_elements, outer=False)
        return unpickler.load(), unpickler.pid

    def load_from_bytes(self, blob: object) -> tuple[object, np.ndarray]:
        """``torch.storage._load_from_bytes``: parse a legacy ``torch.save`` of one CPU storage
        (magic, protocol 1001, sys info, storage record, key list, int64 numel, raw bytes)."""
        if type(blob) is not bytes:
            raise _fail(f"storage payload is a {type(blob).__name__}; bytes are required")
        self._spend("storages")
        self.bytes_left -= len(blob)
        if self.bytes_left < 0:
            raise _fail("storage payloads add up to more bytes than the answer; each is used once")
        stream = io.BytesIO(blob)
        head = [self.inner(stream)[0] for _ in range(3)]
        ok = head[:2] == [_LEGACY_MAGIC, _LEGACY_PROTOCOL] and type(head[2]) is dict
        if not ok or head[2].get("little_endian") is not True:
            raise _fail("storage bytes are not a little-endian legacy torch.save (magic, 1001)")
        record, pid = self.inner(stream)
        if pid is None or record is not pid or self.inner(stream)[0] != [pid[2]]:
            raise _fail("storage bytes do not hold exactly one storage record and its key")
        numel = int.from_bytes(stream.read(8), "little", signed=True)
        if numel != pid[4] or not 0 <= numel <= self.max_elements:
            limit = f"they must agree, at most {self.max_elements} (max_rows * action_dim)"
            raise _fail(f"storage of {numel} elements (its record: {pid[4]}); {limit}")
        raw, code = stream.read(), _STORAGES[pid[1]]
        if len(raw) != numel * np.dtype(code).itemsize:
            raise _fail(f"storage holds {len(raw)} bytes for {numel} elements of {code}")
        return (_STORAGE, np.frombuffer(raw, code).astype(np.float64))  # a tag no pickle makes

    def _spend(self, what: str) -> None:
        """Count one more storage or tensor; more than one per allowed row is refused."""
        self.calls_left[what] -= 1
        if self.calls_left[what] < 0:
            raise _fail(f"the answer builds more {what} than its at most {self.max_rows} rows")

    def rebuild_tensor_v2(self, *args: object) -> np.ndarray:
        """``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
        hooks[, metadata])`` for the 1-D rows LeRobot sends: a checked slice, copied."""
        self._spend("tensors")
        if len(args) not in (6, 7):
            raise _fail(f"_rebuild_tensor_v2 got {len(args)} arguments; 6 or 7 are allowed")
        storage, offset, shape, stride, requires_grad, hooks, *metadata = args
        if type(storage) is not tuple or len(storage) != 2 or storage[0] is not _STORAGE:
            raise _fail("a tensor needs a storage made by torch.storage._load_from_bytes")
        ok = type(shape) is tuple and type(stride) is tuple and len(shape) == len(stride) == 1
        if not ok or not all(type(n) is int and n >= 0 for n in (offset, *shape, *stride)):
            raise _fail(f"tensor size {_what(shape)}, stride {_what(stride)}; 1-D, ints >= 0")
        if shape[0] > self.max_elements:
            raise _fail(f"tensor of {shape[0]} elements; at most {self.max_elements} allowed")
        if type(requires_grad) is not bool or type(hooks) is not _NoHooks or any(metadata):
            raise _fail("a tensor must have a bool requires_grad, no hooks and no metadata")
        end = offset + (shape[0] - 1) * stride[0] + 1 if shape[0] else offset
        if end > storage[1].size or (shape[0] > 1 and stride[0] == 0):
            raise _fail(f"tensor {shape} reaches element {end} of {storage[1].size} (stride > 0)")
        return storage[1][offset : end : max(stride[0], 1)].copy()


def _validate(
    obj: object, max_rows: int, action_dim: int
) -> tuple[np.ndarray, list[int], list[float]]:
    """The unpickled answer as (float32 actions, timesteps, timestamps), or a refusal."""
    if type(obj) is not list or not obj:
        what = "an empty list" if type(obj) is list else f"a {type(obj).__name__}"
        raise _fail(f"the answer is {what}; a non-empty list of TimedAction is required")
    if len(obj) > max_rows:
        raise _fail(f"the answer has {len(obj)} actions; at most {max_rows} are allowed")
    rows, steps, stamps = [], [], []
    for row, item in enumerate(obj):
        if type(item) is not _TimedAction or not hasattr(item, "action"):
            raise _fail(f"item {row} is a {type(item).__name__}; a TimedAction is required")
        step, stamp, action = item.timestep, item.timestamp, item.action
        if type(step) is not int or not 0 <= step < _MAX_INT:
            raise _fail(f"item {row} timestep {_what(step)}; an int in 0..2**63-1 is required")
        if type(stamp) is int and abs(stamp) >= _MAX_STAMP_INT:
            raise _fail(f"item {row} timestamp {_what(stamp)}; a clock's seconds are required")
        if type(stamp) not in (int, float) or not math.isfinite(stamp):
            raise _fail(f"item {row} timestamp {_what(stamp)}; a finite float is required")
        if steps and (step <= steps[-1] or stamp < stamps[-1]):
            back = f"item {row} goes back (timestep {step} after {steps[-1]})"
            raise _fail(f"{back}; timesteps must increase, timestamps must not decrease")
        if type(action) is not np.ndarray or action.shape != (action_dim,):
            what = getattr(action, "shape", type(action).__name__)
            raise _fail(f"action {row} has shape {what}; a tensor ({action_dim},) is required")
        with np.errstate(over="ignore", invalid="ignore"):
            rows.append(action.astype(np.float32))
        if not np.all(np.isfinite(rows[-1])):
            raise _fail(f"action {row} holds NaN or inf (or overflows float32); finite only")
        steps.append(step)
        stamps.append(float(stamp))
    return np.stack(rows), steps, stamps


def read_action_chunk(
    data: bytes, max_bytes: int, max_rows: int, action_dim: int
) -> tuple[np.ndarray, list[int], list[float]]:
    """LeRobot's pickled ``list[TimedAction]`` (``Actions.data``) as ``float32 [rows, action_dim]``
    actions, their timesteps and timestamps, read without running any code of the sender's.

    Allowed globals, each mapped to our bounded stand-in: ``helpers.TimedAction`` (the rows),
    ``torch._utils._rebuild_tensor_v2`` and ``torch.storage._load_from_bytes`` (a CPU tensor and
    its storage, legacy-saved; the pickles inside may name only ``torch.FloatStorage``,
    ``DoubleStorage``, ``HalfStorage``) and ``collections.OrderedDict`` (empty tensor hooks)."""
    limits = (max_bytes, max_rows, action_dim)
    if not all(type(n) is int and n > 0 for n in limits):
        raise _fail(f"limits {limits}; positive ints are required")
    data = data if type(data) is bytes else bytes(memoryview(data))  # never bytes(int)
    if not data or len(data) > max_bytes:
        raise _fail(f"answer pickle of {len(data)} bytes; 1 to {max_bytes} are allowed")
    stream = io.BytesIO(data)
    try:
        _scan(stream, len(data), MAX_PICKLE_DEPTH + max_rows, OPS_BASE + OPS_PER_ROW * max_rows)
        if stream.tell() != len(data):
            raise _fail(f"{len(data) - stream.tell()} bytes follow the pickle's STOP; none allowed")
        stream.seek(0)
        obj = _Unpickler(stream, max_rows * action_dim, outer=True, max_rows=max_rows).load()
        return _validate(obj, max_rows, action_dim)
    except PolicyBackendError:
        raise
    except Exception as exc:  # malformed (pickletools' ValueError), or anything unforeseen
        raise _fail(f"the answer is not a valid pickle: {type(exc).__name__}") from exc
