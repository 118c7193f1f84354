"""LeRobot 0.6.1 async-inference payloads, bytes in and bytes out (no ROS, grpc or lerobot).

``transport.AsyncInference`` carries pickles: we send ``RemotePolicyConfig`` (``PolicySetup``)
and ``TimedObservation`` (``Observation``, 2 MiB chunks); the server answers ``TimedAction`` s
(``Actions``), read by ``lerobot_answer``. Protobuf is coded by hand; our pickles name LeRobot's
classes by opcode (we cannot import lerobot). Every refusal is a ``PolicyBackendError`` (what,
what's allowed).
"""

from __future__ import annotations

import math
import pickle
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
_MAX_PLAIN_DEPTH = 16


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
