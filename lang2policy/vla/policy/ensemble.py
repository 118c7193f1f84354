"""ACT-style temporal ensembling of overlapping action chunks.

Every query predicts a chunk of ``k`` actions for steps ``t .. t+k-1``, so at step ``t`` up to
``k`` chunks (made at ``t-k+1 .. t``) hold a prediction for it. The action executed is their
weighted mean with ``w_i = exp(-m * i)``, ``i = 0`` being the *oldest* prediction (ACT, Zhao et
al., RSS 2023: a smaller ``m`` takes in new observations faster). ACT's own code uses
``m = 0.01`` with chunks of 100, so its oldest and newest predictions weigh ``exp(-0.99)`` ≈
0.37 apart; with our 10-step chunks, ``m = 0.1`` keeps that same spread. Averaging many
predictions smooths the motion and hides the jumps where one chunk hands over to the next.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from lang2policy.errors import ConfigError, Lang2PolicyError

DEFAULT_M = 0.1


class TemporalEnsembler:
    """Keeps the chunks that still cover the current step and averages their predictions."""

    def __init__(self, m: float = DEFAULT_M) -> None:
        if not np.isfinite(m) or m < 0:
            raise ConfigError(f"temporal ensembling m must be a finite number >= 0, got {m}")
        self.m = m
        self._chunks: deque[tuple[int, np.ndarray]] = deque()  # (first step, chunk), oldest first

    def reset(self) -> None:
        self._chunks.clear()

    def add(self, step: int, chunk: np.ndarray) -> None:
        """Record a chunk predicted at ``step`` (its row 0 is the action for ``step``)."""
        self._chunks.append((step, np.asarray(chunk, np.float64)))

    def covers(self, step: int) -> bool:
        """Whether a stored chunk predicts ``step``."""
        return any(start <= step < start + len(chunk) for start, chunk in self._chunks)

    def action(self, step: int) -> np.ndarray:
        """The weighted mean of every prediction for ``step``; forgets chunks that ended."""
        while self._chunks and step - self._chunks[0][0] >= len(self._chunks[0][1]):
            self._chunks.popleft()
        predictions = [chunk[step - start] for start, chunk in self._chunks if start <= step]
        if not predictions:
            raise Lang2PolicyError(
                f"no chunk covers step {step}: query the model at least once per chunk length"
            )
        weights = np.exp(-self.m * np.arange(len(predictions)))
        return (weights[:, None] * np.stack(predictions)).sum(0) / weights.sum()
