"""The two array encodings that VLA policy servers speak, written here (no pickle anywhere).

msgpack-numpy, as openpi's ``openpi_client.msgpack_numpy`` packs it (msgpack with binary
type on, so the marker keys are msgpack *bin* and come back as ``bytes``):

- an array is the map ``{b"__ndarray__": True, b"data": <raw C-order bytes>,
  b"dtype": dtype.str (e.g. "<f4", "|u1"), b"shape": [dims]}``;
- a numpy scalar is ``{b"__npgeneric__": True, b"data": <Python value>, b"dtype": ...}``;
- object, void and complex dtypes are refused on both sides.

json-numpy, as ``json_numpy`` 2.x writes it (``default`` / ``object_hook``; what OpenVLA's
``deploy.py`` server and its ``requests`` clients exchange):

- an array or scalar is the object ``{"__numpy__": <base64 of the raw C-order bytes>,
  "dtype": <numpy descr, e.g. "|u1", "<f4">, "shape": [dims]}`` (shape ``[]`` is a scalar).

Decoding is bounded: the answer's size is capped, JSON nesting and numbers are limited
(``wire_json.decode_json``), and an array is built only from a real-number or boolean dtype
whose byte count matches its shape. Every refusal is a ``PolicyBackendError``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math

import msgpack
import numpy as np

from lang2policy.errors import PolicyBackendError
from lang2policy.wire_json import MessageError, decode_json

_REFUSED_KINDS = "VOc"  # void (structured), object, complex: never packed
_DECODED_KINDS = "biuf"  # what an answer's arrays may hold
_MAX_DIMS = 8


# ------------------------------------------------------------------ msgpack-numpy
def _pack_numpy(obj: object) -> object:
    """msgpack's ``default`` hook: numpy arrays and scalars in openpi's layout."""
    if isinstance(obj, np.ndarray | np.generic) and obj.dtype.kind in _REFUSED_KINDS:
        raise TypeError(f"cannot send numpy dtype {obj.dtype} (object/void/complex)")
    if isinstance(obj, np.ndarray):
        return {
            b"__ndarray__": True,
            b"data": np.ascontiguousarray(obj).tobytes(),
            b"dtype": obj.dtype.str,
            b"shape": list(obj.shape),
        }
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot send a {type(obj).__name__} over msgpack")


def pack_msgpack(obj: object) -> bytes:
    """``obj`` (dicts, lists, str, numbers, numpy arrays) as one msgpack-numpy message."""
    return msgpack.packb(obj, default=_pack_numpy, use_bin_type=True)


def _field(obj: dict, name: str) -> object:
    """A marker map's field, whether its keys came as bin (openpi) or as str (some ports)."""
    if name.encode() in obj:
        return obj[name.encode()]
    return obj.get(name)


def _unpack_numpy(obj: dict) -> object:
    """msgpack's ``object_hook``: marker maps back to arrays and scalars, checked."""
    if _field(obj, "__ndarray__") is True:
        data = _field(obj, "data")
        if not isinstance(data, bytes):
            raise ValueError("an __ndarray__ map without bytes in 'data'")
        return array_from_bytes(data, _field(obj, "dtype"), _field(obj, "shape"))
    if _field(obj, "__npgeneric__") is True:
        dtype = _dtype(_field(obj, "dtype"))
        value = _field(obj, "data")
        if not isinstance(value, bool | int | float):
            raise ValueError(f"an __npgeneric__ holding {type(value).__name__}")
        return dtype.type(value)
    return obj


def unpack_msgpack(data: bytes, source: str) -> object:
    """The value of one msgpack-numpy message; ``PolicyBackendError`` if it is not one."""
    try:
        return msgpack.unpackb(data, object_hook=_unpack_numpy, raw=False)
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        detail = str(exc) or type(exc).__name__
        raise PolicyBackendError(f"{source}: not a valid msgpack-numpy message ({detail})") from exc


# ------------------------------------------------------------------ json-numpy
def _json_numpy_default(obj: object) -> dict:
    """``json.dumps``' ``default`` hook: numpy arrays and scalars in json-numpy's layout."""
    if not isinstance(obj, np.ndarray | np.generic) or obj.dtype.kind in _REFUSED_KINDS:
        raise TypeError(f"cannot send a {type(obj).__name__} as json-numpy")
    array = np.ascontiguousarray(obj)
    return {
        "__numpy__": base64.b64encode(array.tobytes()).decode("ascii"),
        "dtype": array.dtype.str,  # equals numpy's descr for these simple dtypes
        "shape": list(np.shape(obj)),
    }


def encode_json_numpy(obj: object) -> bytes:
    """``obj`` as json-numpy UTF-8 text (NaN and infinity in plain floats are refused)."""
    return json.dumps(obj, default=_json_numpy_default, allow_nan=False).encode("utf-8")


def decode_json_numpy(data: bytes, source: str, max_bytes: int) -> object:
    """The value of a json-numpy text of at most ``max_bytes``, every ``{"__numpy__": ...}``
    object turned into an array; ``PolicyBackendError`` for anything malformed."""
    try:
        value = decode_json(data, max_bytes=max_bytes, what=source)
        return _arrays_in(value)
    except MessageError as exc:
        raise PolicyBackendError(str(exc)) from exc
    except (ValueError, TypeError, binascii.Error) as exc:
        raise PolicyBackendError(f"{source}: a malformed json-numpy array ({exc})") from exc


def _arrays_in(value: object) -> object:
    """``value`` with json-numpy objects replaced by arrays (nesting is already bounded)."""
    if isinstance(value, list):
        return [_arrays_in(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "__numpy__" not in value:
        return {key: _arrays_in(item) for key, item in value.items()}
    encoded = value["__numpy__"]
    if not isinstance(encoded, str):
        raise ValueError("'__numpy__' must be a base64 string")
    raw = base64.b64decode(encoded, validate=True)
    array = array_from_bytes(raw, value.get("dtype"), value.get("shape"))
    return array if array.ndim else array[()]


# ------------------------------------------------------------------ shared
def _dtype(name: object) -> np.dtype:
    """A plain real-number or boolean dtype from its string; ``ValueError`` otherwise."""
    if isinstance(name, bytes):
        name = name.decode("ascii", "replace")
    if not isinstance(name, str) or len(name) > 16:
        raise ValueError(f"dtype must be a short string, got {name!r:.40}")
    dtype = np.dtype(name)  # TypeError for an unknown name
    if dtype.kind not in _DECODED_KINDS or dtype.fields is not None or dtype.subdtype:
        raise ValueError(f"arrays of dtype {dtype} are not accepted; expected real numbers")
    return dtype


def array_from_bytes(data: bytes, dtype_name: object, shape: object) -> np.ndarray:
    """A read-only array over ``data``, after checking that ``dtype`` and ``shape`` agree
    with its length (so a lying header cannot make numpy read past the buffer)."""
    dtype = _dtype(dtype_name)
    if (
        not isinstance(shape, list | tuple)
        or len(shape) > _MAX_DIMS
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise ValueError(f"shape must be a list of at most {_MAX_DIMS} sizes, got {shape!r:.60}")
    count = math.prod(shape)
    if count * dtype.itemsize != len(data):
        raise ValueError(
            f"{len(data)} bytes do not make an array of shape {list(shape)} and dtype {dtype}"
        )
    return np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
