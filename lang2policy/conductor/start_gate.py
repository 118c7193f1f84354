"""Instructions that arrive while the planner is still starting: held in order, not lost.

The planner node warms its LLM's prompts before it says ``ready`` (a minute or more on a
loaded 2-core machine). An instruction typed in that time used to race the warm-up for the
LLM server; now it is held, the person is told it is queued and why, and it is planned as
soon as the planner is ready. At most ``MAX_HELD`` are held; more are refused with a reason.
"""

from __future__ import annotations

import threading

MAX_HELD = 4


class StartGate:
    """Closed until ``open``: ``hold`` keeps instructions (in order) while it is closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[str] | None = []  # None once open

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._held is None

    def hold(self, text: str) -> str:
        """"" when the gate is open (plan ``text`` now); else "queued" or "full"."""
        with self._lock:
            if self._held is None:
                return ""
            if len(self._held) >= MAX_HELD:
                return "full"
            self._held.append(text)
            return "queued"

    def open(self) -> list[str]:
        """Open the gate; the instructions held until now, in the order they came."""
        with self._lock:
            held, self._held = self._held or [], None
            return held
