"""Whether the safety node cut a running skill's commands at a keep-out zone.

The safety node's status lines (``/lang2policy/safety``) count the commands it cut since it
started, ``detail.cuts``: ``{"keep_out": n, "workspace": n}``, and say the last violation
(``detail.last_violation``, ``"keep-out: ..."`` for a zone). The safety node stops the gripper
at the zone's edge; a learned policy would push against it for the rest of its time budget, so
the VLA node ends the skill ``stopped`` with the reason ``"keep-out: ..."`` as soon as the count
grows past its value at the skill's start (``KeepOutWatch``). Lines without ``cuts`` (a safety
node from before the count) change nothing: the safety node still cuts, the skill runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KEEP_OUT = "keep-out"
MAX_REASON = 300  # characters of the safety node's text quoted in the reason


def keep_out_cuts(line: Mapping[str, Any]) -> int | None:
    """``detail.cuts.keep_out`` of a safety status line; None when it has none (or not a
    count)."""
    detail = line.get("detail")
    cuts = detail.get("cuts") if isinstance(detail, Mapping) else None
    count = cuts.get("keep_out") if isinstance(cuts, Mapping) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return None
    return count


def keep_out_reason(line: Mapping[str, Any], new_cuts: int) -> str:
    """The reason a skill ends with: ``keep-out: `` and the safety node's last violation."""
    detail = line.get("detail")
    violation = detail.get("last_violation") if isinstance(detail, Mapping) else None
    text = violation.strip()[:MAX_REASON] if isinstance(violation, str) else ""
    if not text.startswith(KEEP_OUT):  # a later workspace cut, or no text: say what happened
        cut = f"the safety node cut {new_cuts} command{'s' if new_cuts != 1 else ''}"
        text = f"{KEEP_OUT}: {cut} at a keep-out zone" + (f" (last: {text})" if text else "")
    return text


class KeepOutWatch:
    """Hears every safety status line; while armed (a skill runs), says when a keep-out cut
    happened since ``arm``."""

    def __init__(self) -> None:
        self.latest: int | None = None  # the last count heard
        self._baseline: int | None = None
        self._armed = False

    def arm(self) -> None:
        """A skill starts: cuts from now on end it."""
        self._armed, self._baseline = True, self.latest

    def disarm(self) -> None:
        self._armed = False

    def heard(self, line: Mapping[str, Any]) -> str:
        """Take a safety status line; the reason to end the running skill ("" for none)."""
        count = keep_out_cuts(line)
        if count is None:
            return ""
        self.latest = count
        if not self._armed:
            return ""
        if self._baseline is None or count < self._baseline:  # first count, or a restarted node
            self._baseline = count
            return ""
        if count == self._baseline:
            return ""
        new, self._baseline = count - self._baseline, count
        return keep_out_reason(line, new)
