"""The host's handle on one sandbox child: start it, exchange JSON lines, kill it.

Everything read from the child is untrusted: lines are size-capped, decoded as strict JSON
(the constants NaN and Infinity are refused), bounded in nesting
(``MAX_DEPTH``) and in number length (``MAX_NUMBER_CHARS``), and must be objects with a known
``type``. ``decode_message`` raises nothing but ``ProtocolError``, so whatever the child sends
cannot surface as a host error. Reads have deadlines, so a silent or flooding child cannot
stall the host; stderr is drained in a thread into a bounded buffer that only ever serves as
a diagnostic.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, cast

from lang2policy.errors import SandboxError
from lang2policy.skills.spec import nesting_depth

CHILD_SCRIPT = Path(__file__).with_name("child.py")
CHILD_MESSAGE_TYPES = frozenset({"ready", "call", "print", "done", "error"})
# Levels of objects/lists in one message: a call's point argument is 3 (message, args, point);
# the child refuses arguments nested deeper than 8 levels before sending (child.py).
MAX_DEPTH = 16
# Digits of an integer, characters of a float literal (Python's int() slows down past ~4300).
MAX_NUMBER_CHARS = 1000
# The child's whole environment: no inherited variables (API keys, ROS settings, paths).
CHILD_ENV = {
    "PYTHONUTF8": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class ProtocolError(SandboxError):
    """The child sent something that is not a well-formed message."""


class ChildTimeout(SandboxError):
    """The child did not send a message before the deadline."""


class ChildExited(SandboxError):
    """The child closed its output (it exited or was killed)."""


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed in sandbox messages")


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(
            f"an integer of {len(text)} characters (at most {MAX_NUMBER_CHARS} are allowed)"
        )
    return int(text)


def _bounded_float(text: str) -> float:
    # 1e400 parses to inf, which the skill binder refuses as an invalid argument (a reply the
    # program sees); only the length of the literal is the channel's business.
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(
            f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS} are allowed)"
        )
    return float(text)


def decode_message(line: bytes, max_bytes: int) -> dict:
    """One line from the child as a message dict; ProtocolError (and nothing else) when it is
    too long, not UTF-8, not strict JSON, nested deeper than ``MAX_DEPTH``, has a number longer
    than ``MAX_NUMBER_CHARS``, or is not a known message type. Lone surrogates in strings
    become U+FFFD. (A number too large for a float, ``1e400``, arrives as inf: whether it is
    a valid argument is the skill binder's decision.)"""
    if len(line) > max_bytes:
        raise ProtocolError(f"the child sent a message longer than {max_bytes} bytes")
    try:
        message = json.loads(
            line.decode("utf-8"),
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_bounded_float,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"the child sent a line that is not valid JSON: {exc}") from exc
    if nesting_depth(message, MAX_DEPTH) > MAX_DEPTH:
        raise ProtocolError(f"the child sent a message nested more than {MAX_DEPTH} levels deep")
    if not isinstance(message, dict) or message.get("type") not in CHILD_MESSAGE_TYPES:
        kinds = ", ".join(sorted(CHILD_MESSAGE_TYPES))
        raise ProtocolError(f"the child sent an unknown message; expected one of: {kinds}")
    return _valid_unicode(message)


class ChildProcess:
    """One running child. Use as a context manager so it is always killed and reaped."""

    def __init__(self, max_message_bytes: int, stderr_bytes: int = 8192) -> None:
        self.max_message_bytes = max_message_bytes
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(CHILD_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(CHILD_ENV),
            cwd="/",
            close_fds=True,
            start_new_session=True,  # its own process group: killed as a group
        )
        # The three pipes (subprocess.PIPE, buffered: never None; stderr a BufferedReader)
        self._stdin = cast(IO[bytes], self._proc.stdin)
        self._stdout = cast(IO[bytes], self._proc.stdout)
        self._stderr_pipe = cast(io.BufferedReader, self._proc.stderr)
        self._buffer = bytearray()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        os.set_blocking(self._stdout.fileno(), False)
        os.set_blocking(self._stdin.fileno(), False)
        self._stderr: collections.deque[int] = collections.deque(maxlen=stderr_bytes)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.kill()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def kill(self) -> None:
        """SIGKILL the child's process group and reap it (idempotent)."""
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
        self._proc.wait()
        for stream in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self._selector.close()
        self._stderr_thread.join(timeout=1.0)

    def exit_status(self, wait: float = 1.0) -> int | None:
        """The child's return code (negative: killed by that signal), waiting up to ``wait``."""
        try:
            return self._proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None

    def stderr_tail(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    def _drain_stderr(self) -> None:
        stream = self._stderr_pipe
        try:
            for chunk in iter(lambda: stream.read1(4096), b""):
                self._stderr.extend(chunk)
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------ messages
    def send(self, message: dict, timeout: float = 5.0) -> None:
        """Write one message; a child that stops reading cannot block the host past ``timeout``."""
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode() + b"\n"
        view, deadline = memoryview(data), time.monotonic() + timeout
        fd = self._stdin.fileno()
        while view:
            try:
                view = view[os.write(fd, view) :]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:
                raise ChildExited(f"the sandbox child stopped reading ({exc})") from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [fd], [], remaining)[1]:
                raise ProtocolError(f"the child stopped reading its replies for {timeout:g} s")

    def receive(self, deadline: float) -> dict:
        """The next message, or ChildTimeout at ``deadline`` (time.monotonic())."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                return decode_message(line, self.max_message_bytes)
            if len(self._buffer) > self.max_message_bytes:
                raise ProtocolError(
                    f"the child sent a message longer than {self.max_message_bytes} bytes"
                )
            self._fill(deadline)

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._selector.select(timeout=remaining):
            raise ChildTimeout("the sandbox child sent nothing before its deadline")
        try:
            chunk = os.read(self._stdout.fileno(), 65536)
        except BlockingIOError:
            return
        if not chunk:
            raise ChildExited("the sandbox child exited")
        self._buffer.extend(chunk)


def _valid_unicode(value):
    """Replace lone surrogates (valid in JSON escapes, not encodable as UTF-8) with U+FFFD."""
    if isinstance(value, str):
        return _replace_surrogates(value) if _has_surrogate(value) else value
    if isinstance(value, list):
        return [_valid_unicode(item) for item in value]
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    return value


def _replace_surrogates(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
