"""The running plan's keep-out zones, announced to the safety node through a ``ZonePort``.

A plan's zones go out before it moves anything (``start``: the keep-out zones of the policy
that gates it, ``sandbox.policy_keep_out``) and are withdrawn (``None``, ``{}``) when it ends,
unless its motion goes on without it: a reward spec handed to the controller node runs until
it is cancelled, so its zones stay until then (the conductor withdraws them at the stop).
Without a port (``lang2policy run``: no safety node) nothing is sent.

One lock orders every message, and a withdrawal checks its condition under it: a stop's
withdrawal that races a new plan's start never withdraws that plan's zones.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from lang2policy.conductor.ports import ZonePort
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.policy_keep_out import keep_out_zones


class ZoneAnnouncer:
    """Sends each plan's keep-out zones at its start and withdraws them at its end."""

    def __init__(self, port: ZonePort | None) -> None:
        self.port = port
        self.plan_id: str | None = None  # the plan whose zones are out
        self._lock = threading.Lock()

    def start(self, policy: PrivilegePolicy) -> str:
        """A new plan gated by ``policy``: its id, once its zones went out."""
        plan_id = uuid.uuid4().hex[:12]
        with self._lock:
            self.plan_id = plan_id
            if self.port is not None:
                self.port.send_plan_zones(plan_id, keep_out_zones(policy))
        return plan_id

    def withdraw(self, unless: Callable[[], bool] = lambda: False) -> None:
        """No plan's zones are out any more, unless ``unless()`` holds (asked under the lock);
        nothing is sent when none were."""
        with self._lock:
            if self.plan_id is None or unless():
                return
            self.plan_id = None
            if self.port is not None:
                self.port.send_plan_zones(None, {})
