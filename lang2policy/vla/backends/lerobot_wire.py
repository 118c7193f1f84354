"""LeRobot 0.6.1 async-inference payloads, bytes in and bytes out (no ROS, grpc or lerobot).

``transport.AsyncInference`` carries pickles: we send ``RemotePolicyConfig`` (``PolicySetup``)
and ``TimedObservation`` (``Observation``, 2 MiB chunks); the server answers ``TimedAction`` s
(``Actions``). Protobuf is coded by hand; our pickles name LeRobot's classes by opcode (we cannot
import lerobot); an answer is opcode-scanned, unpickled only through an allow-list of our own
bounded stand-ins, then checked. Every refusal is a ``PolicyBackendError`` (what, what's allowed).
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
from collections.abc import Mapping

import numpy as np

from lang2policy.errors import PolicyBackendError

CHUNK_SIZE = 2 * 1024 * 1024  # lerobot.transport.utils.CHUNK_SIZE
MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # lerobot.transport.utils.MAX_MESSAGE_SIZE (gRPC limit)
TRANSFER_BEGIN, TRANSFER_MIDDLE, TRANSFER_END = 1, 2, 3  # transport.TransferState
SUPPORTED_POLICIES = ("act", "smolvla", "diffusion", "tdmpc", "vqbet", "pi0", "pi05", "groot")
HELPERS = "lerobot.async_inference.helpers"
SETUP_FIELDS = ("policy_type", "pretrained_name_or_path", "lerobot_features")
SETUP_FIELDS += ("actions_per_chunk", "device", "rename_map")  # RemotePolicyConfig's, in order
MAX_PICKLE_DEPTH = 64  # stack + marks, plus max_rows for an answer's list (one APPENDS batch)
_MAX_PLAIN_DEPTH = 16
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
_LEGACY_PROTOCOL = 1001
_STORAGES = {"FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2"}
_STORAGE = object()  # tags the storages load_from_bytes made
_PUTS, _GETS = ("PUT", "BINPUT", "LONG_BINPUT"), ("GET", "BINGET", "LONG_BINGET")
_SET_OPS = ("EMPTY_SET", "ADDITEMS", "FROZENSET")
_STR_OPS = ("UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8")


def _fail(message: str) -> PolicyBackendError:
    """The module's one error type, with the message it is given (raise the result)."""
    return PolicyBackendError(f"LeRobot wire: {message}")


def _varint(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf base-128 varint."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes([*out, value])


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; at most 10 bytes, as protobuf allows."""
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(buf):
            raise _fail(f"protobuf message ends inside a varint at byte {pos}")
        value, pos = value | (buf[pos] & 0x7F) << shift, pos + 1
        if not buf[pos - 1] & 0x80:
            return value, pos
    raise _fail("protobuf varint longer than 10 bytes (at most 10 are allowed)")


def _bytes_field(number: int, data: bytes) -> bytes:
    """A length-delimited field; proto3 leaves out an empty one, as LeRobot's messages do."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data if data else b""


def encode_policy_setup(data: bytes) -> bytes:
    """A serialized ``PolicySetup{bytes data = 1}`` carrying ``policy_setup_pickle``'s bytes."""
    return _bytes_field(1, bytes(data))


def encode_observation_chunks(payload: bytes, chunk_size: int = CHUNK_SIZE) -> list[bytes]:
    """Serialized ``Observation{TransferState transfer_state = 1; bytes data = 2}`` messages,
    those LeRobot's ``send_bytes_in_chunks`` yields for ``payload``:
    a chunk reaching the end is END (a one-chunk payload is a lone END), else the first BEGIN,
    else MIDDLE. Empty is refused (LeRobot sends nothing; its server fails on loads(None))."""
    if type(chunk_size) is not int or chunk_size <= 0:
        raise _fail(f"chunk size {chunk_size!r}; a positive int is required")
    if not payload:
        raise _fail("empty observation payload; a non-empty pickle is required")
    messages = []
    for sent in range(0, len(payload), chunk_size):
        state = TRANSFER_BEGIN if sent == 0 else TRANSFER_MIDDLE
        state = TRANSFER_END if sent + chunk_size >= len(payload) else state
        data = _bytes_field(2, bytes(payload[sent : sent + chunk_size]))
        messages.append(_varint(1 << 3) + _varint(state) + data)
    return messages


def decode_fields(message: bytes, max_bytes: int) -> dict[int, int | bytes]:
    """Fields of a serialized protobuf message, number -> value (the last one wins, as in
    protobuf); only varint and length-delimited fields, the kinds LeRobot's messages have."""
    if len(message) > max_bytes:
        raise _fail(f"protobuf message of {len(message)} bytes; at most {max_bytes} allowed")
    fields: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(message):
        key, pos = _read_varint(message, pos)
        number, wire = key >> 3, key & 7
        if number == 0 or wire not in (0, 2):
            raise _fail(f"protobuf field {number} of wire type {wire}; allowed: 1.., type 0, 2")
        if wire == 0:
            fields[number], pos = _read_varint(message, pos)
            continue
        length, pos = _read_varint(message, pos)
        if pos + length > len(message):
            raise _fail(f"protobuf field {number} claims {length} bytes past the end")
        fields[number], pos = bytes(message[pos : pos + length]), pos + length
    return fields


def decode_actions(message_bytes: bytes, max_bytes: int) -> bytes:
    """The pickle in a serialized ``Actions{bytes data = 1}``; ``b""`` for ``Empty`` (no chunk)."""
    data = decode_fields(bytes(memoryview(message_bytes)), max_bytes).get(1, b"")
    if not isinstance(data, bytes):
        raise _fail("Actions.data is a varint; a bytes field (wire type 2) is required")
    return data


def _check_plain(value: object, where: str, depth: int = 0) -> None:
    """Refuse what LeRobot's env could not unpickle or should not get: only None, bool, int,
    finite float, str, list/tuple, dict with str keys and real-number numpy arrays/scalars."""
    if depth > _MAX_PLAIN_DEPTH:
        raise _fail(f"{where} nests deeper than {_MAX_PLAIN_DEPTH} levels")
    kind = type(value)
    if value is None or kind in (bool, int, str) or (kind is float and math.isfinite(value)):
        return
    if kind in (list, tuple):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]", depth + 1)
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise _fail(f"{where} has key {key!r}; keys must be str")
            _check_plain(item, f"{where}[{key!r}]", depth + 1)
    elif (kind is np.ndarray or isinstance(value, np.generic)) and value.dtype.kind in "biuf":
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise _fail(f"{where} holds NaN or inf; finite numbers are required")
    else:
        allowed = "None, bool, int, finite float, str, list, tuple, dict, real numpy arrays"
        raise _fail(f"{where} is {kind.__name__} {value!r:.40}; allowed: {allowed}")


def _class_pickle(name: str, state: dict[str, object]) -> bytes:
    """Protocol 3 pickle of LeRobot's dataclass ``helpers.<name>`` with ``state`` as __dict__:
    GLOBAL, EMPTY_TUPLE, NEWOBJ (``cls.__new__(cls)``), the dict pickled normally, BUILD."""
    body = pickle.dumps(state, protocol=3)[2:-1]  # less PROTO 3 and STOP; memo starts at 0
    return b"\x80\x03c" + f"{HELPERS}\n{name}\n".encode() + b")\x81" + body + b"b."


def policy_setup_pickle(
    policy_type: str,
    pretrained_name_or_path: str,
    lerobot_features: Mapping[str, Mapping[str, object]],
    actions_per_chunk: int,
    device: str = "cpu",
    rename_map: Mapping[str, str] | None = None,
) -> bytes:
    """Bytes LeRobot's ``pickle.loads`` turns into ``RemotePolicyConfig`` (``PolicySetup.data``).

    ``lerobot_features`` is what ``hw_to_dataset_features(..., "observation", use_video=False)``
    makes: ``{"observation.state": {"dtype", "shape" (tuple), "names"}, ...}``."""
    if policy_type not in SUPPORTED_POLICIES:
        raise _fail(f"policy type {policy_type!r}; LeRobot serves {', '.join(SUPPORTED_POLICIES)}")
    for name, text in (("pretrained_name_or_path", pretrained_name_or_path), ("device", device)):
        if type(text) is not str or not text:
            raise _fail(f"{name} {text!r}; a non-empty str is required")
    if type(actions_per_chunk) is not int or actions_per_chunk <= 0:
        raise _fail(f"actions_per_chunk {actions_per_chunk!r}; a positive int is required")
    features = {k: dict(v) for k, v in lerobot_features.items()}
    renames = dict(rename_map or {})
    _check_plain(features, "lerobot_features")
    if not all(type(k) is str and type(v) is str for k, v in renames.items()):
        raise _fail("rename_map must map str to str")
    values = (policy_type, pretrained_name_or_path, features, actions_per_chunk, device, renames)
    return _class_pickle("RemotePolicyConfig", dict(zip(SETUP_FIELDS, values, strict=True)))


def timed_observation_pickle(
    timestamp: float, timestep: int, observation: Mapping[str, object], must_go: bool = False
) -> bytes:
    """Bytes LeRobot's server unpickles into ``TimedObservation`` (``Observation.data``).

    ``observation`` is a robot's raw observation: ``"<motor>.pos"`` floats, camera name ->
    ``HxWx3`` uint8 array, ``"task"`` str; ``timestamp`` is ``time.time()`` of the capture."""
    if type(timestamp) not in (int, float) or not math.isfinite(timestamp):
        raise _fail(f"timestamp {timestamp!r}; a finite number of seconds is required")
    if type(timestep) is not int or timestep < 0 or type(must_go) is not bool:
        raise _fail(f"timestep {timestep!r}, must_go {must_go!r}; an int >= 0 and a bool")
    obs = dict(observation)
    _check_plain(obs, "observation")
    state = {"timestamp": float(timestamp), "timestep": timestep, "observation": obs}
    return _class_pickle("TimedObservation", {**state, "must_go": must_go})


def _what(value: object) -> str:
    """``value`` shown without ever running repr on a nested (maybe huge or cyclic) object."""
    if value is None or type(value) in (bool, int, float):
        return repr(value)
    return repr(value[:40]) if type(value) is str else f"a {type(value).__name__}"


def _scan(stream: io.BytesIO, max_memo: int, max_depth: int) -> None:
    """Walk one pickle's opcodes to STOP, running none, tracking which stack items are str:
    refuse sets and dict keys that are not str (hashing a shared-tuple bomb takes 2**depth
    steps), a stack deeper than ``max_depth`` and memo indices over ``max_memo``."""
    stack: list[bool] = []  # per item: is it a str?
    marks: list[int] = []
    memo: dict[int, bool] = {}
    for op, arg, pos in pickletools.genops(stream):  # ValueError when malformed
        name, before, mark = op.name, op.stack_before, pickletools.markobject
        if name in _SET_OPS or (name in _PUTS and arg > max_memo):
            raise _fail(f"{name} {arg} at byte {pos}; no sets and memo indices <= {max_memo}")
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

    def __init__(self, stream: io.BytesIO, max_elements: int, outer: bool) -> None:
        super().__init__(stream)
        self.max_elements, self.pid, self.outer = max_elements, None, outer
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
        _scan(stream, 64, MAX_PICKLE_DEPTH)
        stream.seek(start)
        unpickler = _Unpickler(stream, self.max_elements, outer=False)
        return unpickler.load(), unpickler.pid

    def load_from_bytes(self, blob: object) -> tuple[object, np.ndarray]:
        """``torch.storage._load_from_bytes``: parse a legacy ``torch.save`` of one CPU storage
        (magic, protocol 1001, sys info, storage record, key list, int64 numel, raw bytes)."""
        if type(blob) is not bytes:
            raise _fail(f"storage payload is a {type(blob).__name__}; bytes are required")
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

    def rebuild_tensor_v2(self, *args: object) -> np.ndarray:
        """``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
        hooks[, metadata])`` for the 1-D rows LeRobot sends: a checked slice, copied."""
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
        if type(step) is not int or step < 0:
            raise _fail(f"item {row} timestep {_what(step)}; an int >= 0 is required")
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
        _scan(stream, len(data), MAX_PICKLE_DEPTH + max_rows)
        if stream.tell() != len(data):
            raise _fail(f"{len(data) - stream.tell()} bytes follow the pickle's STOP; none allowed")
        stream.seek(0)
        obj = _Unpickler(stream, max_rows * action_dim, outer=True).load()
    except PolicyBackendError:
        raise
    except Exception as exc:  # malformed (pickletools' ValueError) or failing to unpickle
        raise _fail(f"the answer is not a valid pickle: {type(exc).__name__}: {exc}") from exc
    return _validate(obj, max_rows, action_dim)
