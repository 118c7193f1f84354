"""A reward spec as a cost over rollouts, and the success check over the measured state."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lang2policy.rewards.features import Features
from lang2policy.rewards.spec import RewardSpec
from lang2policy.rewards.terms import TERMS


def measures(spec: RewardSpec, features: Features) -> dict[str, np.ndarray]:
    """Each term's unweighted measure, ``[K, T]``, by term id."""
    return {t.id: TERMS[t.term].measure(features, t.params) for t in spec.terms}


def total_cost(spec: RewardSpec, features: Features) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Cost per rollout ``[K]`` = sum of weight x time-mean of each measure; plus the
    per-term weighted costs (for logs and plots)."""
    per_term = {t.id: t.weight * TERMS[t.term].measure(features, t.params).mean(axis=1)
                for t in spec.terms}
    return np.sum(list(per_term.values()), axis=0), per_term


@dataclass
class SuccessTracker:
    """Follows a spec's success conditions over an episode, one measured state at a time.

    Success: every ``below`` condition holds continuously for ``hold`` seconds. Failure: an
    ``always_below`` condition broke once. A spec without conditions never succeeds by itself
    (it runs for its duration, like a "keep doing this" behaviour).
    """

    spec: RewardSpec
    since: float | None = None
    broken: str = ""

    def update(self, time: float, features: Features) -> str:
        """Feed one state; returns 'running', 'success' or 'failed'."""
        values = {i: float(v.reshape(-1)[0]) for i, v in measures(self.spec, features).items()}
        for c in self.spec.conditions:
            if c.always and values[c.term] > c.tolerance and not self.broken:
                self.broken = f"{c.term} reached {values[c.term]:.3f} (limit {c.tolerance:g})"
        if self.broken:
            return "failed"
        final = [c for c in self.spec.conditions if not c.always]
        if not final:
            return "running"
        if all(values[c.term] <= c.tolerance for c in final):
            self.since = time if self.since is None else self.since
            if time - self.since >= self.spec.hold:
                return "success"
        else:
            self.since = None
        return "running"
