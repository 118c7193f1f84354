"""The keyboard front end: keys from a file descriptor (the terminal, or a pipe) in a thread.

On a terminal, ``KeyReader`` switches it to cbreak mode (keys arrive one by one, unechoed;
Ctrl-C still interrupts) and restores it on ``stop``. Not a terminal (a pipe, a test's scripted
key sequence), the bytes are read as they come. Keys go through ``KeyDecoder`` into a queue the
caller drains with ``pressed()``; end of input is the key ``"eof"`` (the keyboard is gone: the
caller holds the arm). ``show`` rewrites one status line in place.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import sys
import threading
from typing import Any, TextIO

from lang2policy.teleop.keyboard import KeyDecoder

EOF_KEY = "eof"
POLL = 0.1  # s between checks whether the reader should stop


class KeyReader:
    """Keys from ``fd`` in a daemon thread (see the module docstring)."""

    def __init__(self, fd: int | None = None, out: TextIO | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self.out = out if out is not None else sys.stdout
        self.is_terminal = os.isatty(self.fd)
        self._queue: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._saved: Any = None
        self._thread = threading.Thread(target=self._read, name="teleop-keys", daemon=True)

    def start(self) -> None:
        if self.is_terminal:
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        self._thread.start()

    def pressed(self) -> list[str]:
        """The keys pressed since the last call, in order."""
        found = []
        with contextlib.suppress(queue.Empty):
            while True:
                found.append(self._queue.get_nowait())
        return found

    def _read(self) -> None:
        decoder = KeyDecoder()
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], POLL)
                data = os.read(self.fd, 64) if ready else None
            except (OSError, ValueError):
                data = b""
            if data is None:
                for key in decoder.flush():
                    self._queue.put(key)
                continue
            if not data:
                self._queue.put(EOF_KEY)
                return
            for key in decoder.feed(data):
                self._queue.put(key)

    def show(self, line: str) -> None:
        """Rewrite the status line (a terminal) or print it (anything else)."""
        with contextlib.suppress(OSError, ValueError):
            if self.is_terminal:
                self.out.write("\r\x1b[K" + line[:200])
            else:
                self.out.write(line + "\n")
            self.out.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._saved is not None:
            import termios

            with contextlib.suppress(OSError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None
            self.show("")
