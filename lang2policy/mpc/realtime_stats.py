"""What the real-time MPC reports about itself: status, task, rates, latencies, costs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class RealtimeStats:
    """A snapshot of the loop for status reports (times in ms of wall time)."""

    status: str
    reason: str = ""
    task: str = ""
    time: float = 0.0  # measured time of the latest state
    iterations: int = 0  # planning iterations since the last start from a hold
    rate_hz: float = 0.0  # planning iterations per wall second over the last 2 s (0: stopped)
    plan_ms_mean: float = 0.0
    plan_ms_p95: float = 0.0
    latency_ms_mean: float = 0.0  # state arrival to plan publication
    latency_ms_p95: float = 0.0
    cost: float = float("nan")
    measures: dict[str, float] = field(default_factory=dict)  # unweighted, measured state
    objects: tuple[str, ...] = ()
    rebuilds: int = 0
    rejected_states: int = 0
    stale: bool = False
    backend: str = "mpc"  # what planned the last pass: "mpc", or "rl:<family>" (a policy)

    def as_dict(self) -> dict:
        """JSON-able (non-finite numbers become None)."""
        def clean(value):
            if isinstance(value, float):
                return round(value, 4) if math.isfinite(value) else None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, tuple):
                return list(value)
            return value

        return {k: clean(v) for k, v in self.__dict__.items()}


def add_timing(stats: RealtimeStats, times: Sequence[tuple[float, float, float]], now: float,
               running: bool) -> None:
    """Fill the rate, plan time and latency of ``stats`` from the latest iterations' ``times``
    (monotonic end, planning seconds, seconds from the state's arrival): the rate over the last
    2 s while a task runs, the means and 95th percentiles over all of them."""
    recent = [h for h in times if now - h[0] <= 2.0]
    if running and len(recent) >= 2 and recent[-1][0] > recent[0][0]:
        stats.rate_hz = (len(recent) - 1) / (recent[-1][0] - recent[0][0])
    if times:
        plan_ms = 1000 * np.array([h[1] for h in times])
        latency_ms = 1000 * np.array([h[2] for h in times])
        stats.plan_ms_mean, stats.plan_ms_p95 = plan_ms.mean(), np.percentile(plan_ms, 95)
        stats.latency_ms_mean = latency_ms.mean()
        stats.latency_ms_p95 = np.percentile(latency_ms, 95)
