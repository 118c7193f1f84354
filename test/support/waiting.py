"""Polling helper shared by the tests that wait on threads, nodes and DDS traffic."""

from __future__ import annotations

import time


def wait_for(predicate, timeout: float, what: str, poll: float = 0.02, detail=None):
    """The first truthy value of ``predicate()`` within ``timeout`` s, else an AssertionError
    naming ``what`` was awaited (and, with ``detail``, what ``detail()`` says of the state then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    message = f"timed out after {timeout} s waiting for {what}"
    raise AssertionError(f"{message}: {detail()}" if detail else message)
