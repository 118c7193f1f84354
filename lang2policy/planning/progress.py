"""Progress while the planner waits for the LLM: one status line every few seconds.

On a loaded 2-core machine a plan can take tens of seconds; a person who sees nothing for
that long types the instruction again or gives up. ``waiting(status, what, budget_s)`` runs a
timer thread that says ``planning: waiting for the LLM (writing the program) … 8 s of at
most 120 s`` every ``EVERY_S`` seconds until the block ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EVERY_S = 4.0  # seconds between progress lines


@contextmanager
def waiting(
    status: Callable[[str], None], what: str, budget_s: float | None, every: float | None = None
) -> Iterator[None]:
    """Say every ``every`` s (``EVERY_S``) how long ``what`` has been waited for (and its
    budget)."""
    every = every or EVERY_S
    done = threading.Event()
    started = time.monotonic()
    limit = f" of at most {budget_s:.0f} s" if budget_s else ""

    def tick() -> None:
        while not done.wait(every):
            status(f"planning: waiting for {what} … {time.monotonic() - started:.0f} s{limit}")

    ticker = threading.Thread(target=tick, name="planning-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join(timeout=1.0)


def llm_budget(llm: object) -> float | None:
    """The LLM client's time-out per call in seconds, when it has one."""
    config = getattr(llm, "config", None)
    value = getattr(config, "timeout_s", None)
    return float(value) if isinstance(value, int | float) else None
