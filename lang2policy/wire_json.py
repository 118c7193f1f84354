"""Bounded, total JSON decoding of what arrives from outside: topic payloads and file lines.

``json.loads`` alone is not safe on a message anyone on the graph can publish: its C scanner
recurses once per nesting level (``[[[[...`` 100000 deep raises ``RecursionError``), an integer
of more than 4300 digits raises a plain ``ValueError`` (not ``JSONDecodeError``), ``NaN`` and
``1e999`` come back as non-finite floats, and a 10 MB string is parsed whole. A node callback
that lets any of these escape ends the node.

``decode_json`` checks, in this order and before any parsing: the size in UTF-8 bytes, then the
nesting depth (a cheap scan of the brackets outside strings, so the parser never recurses deeper
than ``max_depth``); it then parses with hooks that refuse number literals longer than
``max_digits`` characters, ``NaN``/``Infinity`` and numbers that overflow to infinity (unless
``finite=False``), and refuses text that holds an unpaired surrogate (``"\\ud800"``: it cannot
be logged or re-encoded as UTF-8). Every refusal is one exception type, ``MessageError``, whose
message says what was wrong and what is allowed, so a caller catches exactly one thing, logs the
reason and drops the message. ``decode_json_object`` also requires an object at the top;
``decode_status`` an object with a text ``state`` (every ``/lang2policy/status`` and
``/lang2policy/safety`` line).
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import TypedDict, Unpack

from lang2policy.errors import Lang2PolicyError

MAX_BYTES = 1 << 20  # 1 MiB: far above any status line or reward spec the graph sends
MAX_DEPTH = 64  # a reward spec nests 5 levels, a status line with its detail about 10
MAX_DIGITS = 100  # characters of one number literal (a float prints in at most 24)

# A JSON string: a quote, runs of plain characters and escapes, then the closing quote or the
# end of the text (an unterminated string). Possessive: no backtracking, so the scan is linear
# (a pattern that needs the closing quote is quadratic on \"\"\"...: every quote is retried).
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class Limits(TypedDict, total=False):
    """The size limits ``decode_json`` takes (each defaults to the module's constant)."""

    max_bytes: int
    max_depth: int
    max_digits: int


class MessageError(Lang2PolicyError):
    """A message (a topic payload, a line of a file) was refused by its decoder: too big, too
    deep, a number too long or not finite, not JSON, or not the expected shape. It is dropped."""


def decode_json(
    text: str | bytes,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_digits: int = MAX_DIGITS,
    what: str = "the message",
    finite: bool = True,
) -> object:
    """The JSON value of ``text`` within the limits; ``MessageError`` for anything else.

    ``what`` names the source in the error ("/lang2policy/reward_spec"). Bytes must be UTF-8.
    ``finite=False`` lets ``NaN``, ``Infinity`` and ``1e999`` through as floats, for a caller
    that checks every number itself and can say where the bad one is (``validate_spec``).
    """
    text = _checked_text(text, max_bytes, what)
    depth = nesting_depth(text)
    if depth > max_depth:
        raise MessageError(
            f"{what}: JSON nested {depth} levels deep; at most {max_depth} levels are allowed"
        )
    try:
        value = json.loads(
            text,
            parse_int=lambda s: _number(s, int, max_digits, what),
            parse_float=lambda s: _number(s, float, max_digits, what, finite),
            parse_constant=lambda s: _constant(s, what, finite),
        )
    except ValueError as exc:  # JSONDecodeError and the few other parse errors
        raise MessageError(f"{what}: not valid JSON ({exc}); expected a JSON text") from exc
    except RecursionError as exc:  # not reachable after the depth scan; kept total anyway
        raise MessageError(f"{what}: JSON nested too deep for the parser") from exc
    if _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(value, what)
    return value


def decode_json_object(
    text: str | bytes, *, what: str = "the message", **limits: Unpack[Limits]
) -> dict:
    """Like ``decode_json`` (``limits``: its ``max_bytes``, ``max_depth``, ``max_digits``),
    and the value must be a JSON object."""
    value = decode_json(text, what=what, **limits)
    if not isinstance(value, dict):
        raise MessageError(f"{what}: expected a JSON object, got {_kind(value)}")
    return value


def decode_status(text: str | bytes, *, what: str = "the status line") -> dict:
    """A status line (``/lang2policy/status``, ``/lang2policy/safety``): a JSON object whose
    ``state`` is text; ``MessageError`` otherwise (see ``decode_json`` for the limits)."""
    message = decode_json_object(text, what=what)
    state = message.get("state")
    if not isinstance(state, str):
        raise MessageError(f"{what}: expected a text 'state', got {_kind(state)}")
    return message


def nesting_depth(text: str) -> int:
    """The deepest nesting of brackets outside JSON strings (0 for a scalar).

    An upper bound on how deep ``json.loads`` would recurse on ``text``: up to the first syntax
    error (where the parser stops) the strings found here are exactly the parser's strings.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets))))


def _checked_text(text: object, max_bytes: int, what: str) -> str:
    """``text`` as a str of at most ``max_bytes`` UTF-8 bytes (bytes are decoded as UTF-8)."""
    if isinstance(text, bytes | bytearray):
        if len(text) > max_bytes:
            raise MessageError(f"{what}: {len(text)} bytes; at most {max_bytes} are allowed")
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageError(f"{what}: not UTF-8 ({exc}); expected UTF-8 JSON text") from exc
    if not isinstance(text, str):
        raise MessageError(f"{what}: expected JSON text, got {_kind(text)}")
    if len(text) > max_bytes:  # a character is at least one byte: no need to encode
        raise MessageError(f"{what}: {len(text)} characters; at most {max_bytes} bytes allowed")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise MessageError(f"{what}: holds an unpaired surrogate; expected UTF-8 text") from exc
    if size > max_bytes:
        raise MessageError(f"{what}: {size} bytes; at most {max_bytes} are allowed")
    return text


def _number(
    literal: str, kind: type, max_digits: int, what: str, finite: bool = True
) -> int | float:
    if len(literal) > max_digits:
        raise MessageError(
            f"{what}: a number of {len(literal)} characters; at most {max_digits} are allowed"
        )
    value = kind(literal)
    if finite and kind is float and not math.isfinite(value):
        raise MessageError(f"{what}: {literal} overflows to infinity; numbers must be finite")
    return value


def _constant(name: str, what: str, finite: bool) -> float:
    """``NaN``, ``Infinity``, ``-Infinity``: refused unless the caller checks numbers itself."""
    if finite:
        raise MessageError(f"{what}: {name} is not allowed; numbers must be finite")
    return float(name)


def _refuse_lone_surrogates(value: object, what: str) -> None:
    """Unpaired ``\\udXXX`` escapes decode to text that cannot be encoded as UTF-8 again (a
    logger or a publisher would fail on it later); refuse them here, once."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MessageError(
            f"{what}: a string holds an unpaired surrogate escape; expected valid Unicode"
        ) from exc


def _kind(value: object) -> str:
    """The JSON name of ``value``'s type, for error messages (never the value: it may be huge)."""
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)
