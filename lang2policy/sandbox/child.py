"""The sandbox child: runs one policy program, talking to the host in JSON lines.

Started by the host as ``python -I -B child.py`` with an empty environment and only three
pipes (stdin, stdout, stderr). It reads one ``start`` message, loads everything it will need,
confines itself (namespaces, rlimits, seccomp: see ``confine.py``), installs the Python guards,
then runs the program. Every skill the program calls becomes a ``call`` message on stdout; the
host answers on stdin with a ``result``. Nothing but JSON crosses the pipe, in either direction.

Protocol (one JSON object per line):
  host  -> child: {"type": "start", "code", "skills": [{"name", "params", "returns", "doc"}],
                   "limits": {"cpu_seconds", "memory_mb", "max_output_bytes"}}
  child -> host : {"type": "ready", "layers": {...}}
  child -> host : {"type": "call", "id", "skill", "args"}     host -> child: {"type": "result",
                   "id", "ok": true, "value"} or {"ok": false, "error": {"kind", "message"}}
  child -> host : {"type": "print", "text"}
  child -> host : {"type": "done"} or {"type": "error", "kind", "exc_type", "message", "line"}

Uses only the standard library and numpy.
"""

from __future__ import annotations

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import unicodedata  # noqa: F401  (the compiler imports it for non-ASCII identifiers)

import confine
import guards
import numpy
import numpy.fft
import numpy.linalg
import numpy.random

_MESSAGE_LIMIT = 1 << 20  # longest line the child sends or accepts
_TEXT_LIMIT = 2000  # longest error message or exception text sent to the host
# What the host's channel accepts in an argument (process.MAX_DEPTH, MAX_NUMBER_CHARS): a value
# beyond it is refused here as an "invalid" skill call instead of breaking the protocol.
_MAX_NESTING = 8
_MAX_INT_BITS = 3300  # about 990 decimal digits
_MAX_ITEMS = 64
_ARGUMENTS = "skill arguments are numbers, strings, True/False, None and lists of them"


class SkillError(Exception):
    """A skill call failed: denied by the privilege policy, bad arguments, or the motion failed.

    ``kind`` is "denied", "invalid", "skill" or "limit"; the message says what and why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Channel:
    """JSON lines over the inherited stdin/stdout file descriptors."""

    def __init__(self) -> None:
        self._in = os.fdopen(0, "rb", buffering=0)
        self._pending = b""
        self._next_id = 0

    def send(self, message: dict) -> None:
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode() + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]

    def receive(self) -> dict:
        while b"\n" not in self._pending:
            chunk = os.read(0, 65536)
            if not chunk:
                raise SystemExit(3)  # host went away
            self._pending += chunk
            if len(self._pending) > _MESSAGE_LIMIT:
                raise SystemExit(4)
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def call(self, skill: str, args: dict):
        self._next_id += 1
        self.send({"type": "call", "id": self._next_id, "skill": skill, "args": args})
        reply = self.receive()
        if reply.get("type") != "result" or reply.get("id") != self._next_id:
            raise SystemExit(5)
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise SkillError(str(error.get("kind", "skill")), str(error.get("message", "")))
        return reply.get("value")


def _plain(value, where: str, depth: int = 0):
    """Convert an argument to plain JSON data (numpy arrays and scalars included).

    A value the host's channel would refuse as a protocol error (nested too deep, an integer
    with too many digits) is a SkillError of kind "invalid", as the host's own refusal of a
    bad argument is; a value JSON cannot carry at all (NaN, another type, a list longer than
    64 items) is a ValueError or TypeError in the program."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | numpy.integer):
        number = int(value)
        if number.bit_length() > _MAX_INT_BITS:
            raise SkillError(
                "invalid",
                f"{where}: an integer of about "
                f"{int(number.bit_length() * 0.30103)} digits is too large; "
                "numbers must be finite, of magnitude below 1.8e308",
            )
        return number
    if isinstance(value, float | numpy.floating):
        real = float(value)
        if not math.isfinite(real):
            raise ValueError(f"{where}: {real} is not a finite number")
        return real
    if isinstance(value, numpy.ndarray):
        return _plain(value.tolist(), where, depth)
    if isinstance(value, list | tuple):
        if depth >= _MAX_NESTING:
            raise SkillError(
                "invalid",
                f"{where}: the value nests lists more than "
                f"{_MAX_NESTING} levels deep; {_ARGUMENTS} (a point is [x, y, z])",
            )
        if len(value) > _MAX_ITEMS:
            raise ValueError(
                f"{where}: a list of {len(value)} items is too long (at most {_MAX_ITEMS})"
            )
        return [_plain(item, where, depth + 1) for item in value]
    raise TypeError(f"{where}: {type(value).__name__} values cannot be passed to skills")


def _typed(value, kind: str):
    """Turn a JSON result into what policy code expects (numpy arrays for positions)."""
    if kind in ("point", "bounds", "bbox"):
        return numpy.array(value, dtype=float)
    if kind == "pose":
        return {key: numpy.array(item, dtype=float) for key, item in value.items()}
    if kind == "names":
        return list(value)
    return value


def _make_skill(channel: _Channel, spec: dict):
    name, params = spec["name"], spec["params"]

    def skill(*args, **kwargs):
        if len(args) > len(params):
            raise TypeError(f"{name}() takes {len(params)} arguments, got {len(args)}")
        bound = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            if key in bound:
                raise TypeError(f"{name}() got two values for '{key}'")
            bound[key] = value
        plain = {str(k): _plain(v, f"{name}({k}=...)") for k, v in bound.items()}
        return _typed(channel.call(name, plain), spec["returns"])

    skill.__name__ = skill.__qualname__ = name
    skill.__doc__ = spec.get("doc", "")
    return skill


def _make_print(channel: _Channel, budget: int):
    remaining = [budget]

    def policy_print(*values, sep=" ", end="\n"):
        text = str(sep).join(str(v) for v in values) + str(end)
        if remaining[0] <= 0:
            return
        if len(text) > remaining[0]:
            text = text[: remaining[0]] + "\n[output truncated]\n"
        remaining[0] -= len(text)
        channel.send({"type": "print", "text": text})

    return policy_print


def _location(exc: BaseException) -> int | None:
    """Line of the innermost frame of the policy program in the traceback."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<policy>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__; the type name is still useful
        text = "<exception text unavailable>"
    return text[:_TEXT_LIMIT]


def _report(channel: _Channel, exc: BaseException) -> None:
    guards.policy_phase(True)
    kind = "runtime"
    if isinstance(exc, SkillError):
        kind = exc.kind
    elif isinstance(exc, MemoryError):
        kind = "memory"
    elif isinstance(exc, RecursionError):
        kind = "recursion"
    elif isinstance(exc, SyntaxError):
        kind = "syntax"
    message, exc_type = _text(exc), type(exc).__name__[:100]
    guards.policy_phase(False)  # frames are read by trusted code only, after the program
    line = exc.lineno if isinstance(exc, SyntaxError) else _location(exc)
    channel.send(
        {"type": "error", "kind": kind, "exc_type": exc_type, "message": message, "line": line}
    )


def main() -> None:
    channel = _Channel()
    start = channel.receive()
    limits = start["limits"]
    modules = guards.curated_modules()
    guards.install_audit_hook()
    layers = confine.confine(limits["cpu_seconds"], limits["memory_mb"])
    channel.send({"type": "ready", "layers": layers})
    namespace = {
        "__name__": "__policy__",
        "__builtins__": guards.restricted_builtins(
            _make_print(channel, limits["max_output_bytes"]), modules
        ),
        "np": modules["numpy"],
        "math": modules["math"],
        "SkillError": SkillError,
    }
    for spec in start["skills"]:
        namespace[spec["name"]] = _make_skill(channel, spec)
    try:
        code = compile(start["code"], "<policy>", "exec", dont_inherit=True)
        guards.start_program()
        exec(code, namespace)
        guards.policy_phase(False)
        channel.send({"type": "done"})
    except BaseException as exc:  # everything the program raised, SystemExit included
        guards.policy_phase(False)
        try:
            _report(channel, exc)
        except BaseException:
            os._exit(6)
    os._exit(0)  # no interpreter shutdown: finalizers of program objects never run


if __name__ == "__main__":
    main()
