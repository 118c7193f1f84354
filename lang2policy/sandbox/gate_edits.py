"""What the privilege gate needs to know of a person's live edits of a code plan's calls.

The sandbox runner decides every call with the edits applied (``ArgumentEdits``, implemented by
``lang2policy.planning.correcting.ArgEdits``), so an edit can never make a call run that the
policy was not asked about. When new edits make an allowed call denied, a speed edit is capped
at the highest speed the policy allows (``speed_cap``, found by asking the policy itself, so any
rule that limits speed caps it, not the skill catalog's range) and any other edit is refused.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Protocol

from lang2policy.sandbox.policy_types import PolicyRequest

if TYPE_CHECKING:
    from lang2policy.sandbox.policy import PrivilegePolicy


class ArgumentEdits(Protocol):
    """Edits of a plan's skill calls: accepted ones in force, pending ones awaiting the gate."""

    @property
    def pending(self) -> bool: ...

    def apply(self, skill: str, bound: dict, *, pending: bool = True) -> dict:
        """``bound`` with the accepted (and pending) edits applied."""
        ...

    def pending_kinds(self) -> set[str]: ...

    def accept_pending(self, note: str = "") -> None: ...

    def refuse_pending(self, reason: str) -> None: ...

    def cap_pending_speed(self, speed: float, reason: str) -> None: ...


def speed_cap(
    policy: PrivilegePolicy, wanted: PolicyRequest, allowed: PolicyRequest
) -> PolicyRequest | None:
    """``wanted`` with its speed lowered to the highest the policy allows, or None.

    ``wanted`` (denied) and ``allowed`` must differ only in their ``speed`` argument, with the
    wanted speed higher; the speed moves neither the targets nor the sweep, so the policy is
    asked again about the same path (bisection), and the cap is rounded down to mm/s.
    """
    differing = {
        k
        for k in wanted.args.keys() | allowed.args.keys()
        if wanted.args.get(k) != allowed.args.get(k)
    }
    if differing != {"speed"}:
        return None
    low, high = float(allowed.args["speed"]), float(wanted.args["speed"])
    if not high > low:
        return None
    while high - low > 1e-6:  # about 20 decisions of microseconds each
        middle = (low + high) / 2.0
        if policy.decide(_with_speed(wanted, middle)).allowed:
            low = middle
        else:
            high = middle
    for speed in (round(low, 3), math.floor(low * 1000) / 1000):  # 0.25, not 0.2499
        capped = _with_speed(wanted, speed)
        if speed > float(allowed.args["speed"]) and policy.decide(capped).allowed:
            return capped
    return None  # nothing faster than before is allowed: refuse the edit


def _with_speed(request: PolicyRequest, speed: float) -> PolicyRequest:
    return dataclasses.replace(request, args={**request.args, "speed": speed})
