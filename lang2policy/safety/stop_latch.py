"""The stop latch: once stopped, the arm stays stopped until someone explicitly resumes.

No timeout, no LLM, no automatic resume. Resume is refused (with the reason) while something
makes moving unsafe, e.g. stale joint states: the caller passes that reason in.
"""

from __future__ import annotations


class StopLatch:
    def __init__(self) -> None:
        self.stopped = False
        self.since: float | None = None
        self.reason = ""
        self.stops = 0

    def stop(self, now: float, reason: str = "stop requested") -> str:
        """Latch the stop at ``now``; returns what happened, for the caller to report."""
        again = self.stopped
        if not again:
            self.stopped, self.since, self.reason = True, now, reason
        self.stops += 1
        return "already stopped; the arm holds" if again else f"stopped ({reason}); the arm holds"

    def resume(self, now: float, blocker: str | None = None) -> tuple[bool, str]:
        """Release the latch unless ``blocker`` says why it must not; (released, message)."""
        if not self.stopped:
            return True, "not stopped; nothing to resume"
        if blocker:
            return False, f"resume refused: {blocker}; still stopped"
        held = now - self.since if self.since is not None else 0.0
        self.stopped, self.since, self.reason = False, None, ""
        return True, f"resumed after {held:.3f} s stopped; the arm holds until the next command"
