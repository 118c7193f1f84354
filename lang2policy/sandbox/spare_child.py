"""One sandbox child started ahead of need, so that a program does not wait for a Python start.

A sandbox child (``process.ChildProcess``) is a fresh interpreter that imports numpy and the
guards before it reads its ``start`` message: 0.2-0.4 s on two cores, paid twice per
instruction in the graph (the check on a simulated copy, then the run on the arm), on the way
from the instruction to the arm's first motion. ``SpareChild.take`` hands over the child it
started earlier and starts the next one in a background thread, while the program it handed
over runs.

A spare child has read nothing yet: it is confined (namespaces, rlimits, seccomp) only once its
``start`` message arrives, exactly as a child started on demand. It is killed when the spare is
closed, when the host exits (``atexit``; its stdin then ends, which also ends a child whose
host was killed), or when it is not the kind asked for (another message bound).
"""

from __future__ import annotations

import atexit
import logging
import threading

from lang2policy.sandbox.process import ChildProcess

log = logging.getLogger(__name__)


class SpareChild:
    """Keeps one started sandbox child for the next program (``take``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: ChildProcess | None = None
        self._closed = False
        atexit.register(self.close)

    def take(self, max_message_bytes: int) -> ChildProcess:
        """A started child for ``max_message_bytes`` (the spare when it is alive and of that
        kind, else a new one); the next spare starts in the background."""
        with self._lock:
            child, self._spare = self._spare, None
        if child is not None and (
            child.max_message_bytes != max_message_bytes or child.exit_status(wait=0.0) is not None
        ):
            child.kill()
            child = None
        if child is None:
            child = ChildProcess(max_message_bytes)
        self.prepare(max_message_bytes)
        return child

    def prepare(self, max_message_bytes: int) -> None:
        """Start a spare child in the background (nothing when one is there or closed)."""
        with self._lock:
            if self._closed or self._spare is not None:
                return
        threading.Thread(
            target=self._start, args=(max_message_bytes,), name="spare-sandbox-child", daemon=True
        ).start()

    def close(self) -> None:
        """Kill the spare child; later ``take`` calls start children on demand."""
        with self._lock:
            self._closed = True
            child, self._spare = self._spare, None
        if child is not None:
            child.kill()

    def _start(self, max_message_bytes: int) -> None:
        try:
            child = ChildProcess(max_message_bytes)
        except OSError as exc:  # the next take starts one on demand and reports the error
            log.warning("could not start a spare sandbox child: %s", exc)
            return
        with self._lock:
            keep = not self._closed and self._spare is None
            if keep:
                self._spare = child
        if not keep:
            child.kill()
