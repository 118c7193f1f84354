"""One joint target per control step from any chunk backend (issue 18): what the VLA node
sends the arm.

``EnsembledActor`` asks its ``PolicyBackend`` for a chunk every ``query_every`` steps and
returns the ACT temporal ensemble of every chunk that covers the current step
(``ensemble.TemporalEnsembler``), the same arithmetic as ``VLAPolicy.act`` (which
closed-loop rollouts use), so a local model behaves in the graph as in ``rollout``, and a
remote chunk server (openpi, OpenVLA) gets the same smoothing. ``query_every = chunk``
executes each chunk open-loop instead (one request per chunk, for slow servers).

``fit_image`` (``vla/spec/image_fit.py``) makes a camera image the size a model takes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends.base import GRIPPER, PolicyBackend
from lang2policy.vla.policy.ensemble import DEFAULT_M, TemporalEnsembler
from lang2policy.vla.spec.image_fit import fit_image

__all__ = ["EnsembledActor", "fit_image"]


class EnsembledActor:
    """A ``PolicyBackend`` stepped one action at a time, with temporal ensembling."""

    def __init__(
        self, backend: PolicyBackend, m: float = DEFAULT_M, query_every: int = 1
    ) -> None:
        if isinstance(query_every, bool) or not isinstance(query_every, int) or query_every < 1:
            raise ConfigError(f"query_every must be an integer >= 1, got {query_every!r}")
        self.backend = backend
        self.query_every = query_every
        self._ensembler = TemporalEnsembler(m)
        self._step = 0

    @property
    def image_size(self) -> int | None:
        """The square image side the backend takes, or None when it resizes itself."""
        return getattr(self.backend, "image_size", None)

    @property
    def reads_images(self) -> bool:
        """Whether the next action reads the cameras: False once a latched backend has
        looked (``VLAPolicy.has_looked``), so an old frame then need not hold the arm."""
        return not getattr(self.backend, "has_looked", False)

    def reset(self) -> None:
        """A new skill: the backend forgets the last episode, the ensemble its chunks."""
        self.backend.reset()
        self.restart()

    def restart(self) -> None:
        """Drop the chunks predicted so far (after a hold, they describe a past scene)."""
        self._ensembler.reset()
        self._step = 0

    def act(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """The joint target ``float32 [6]`` for the next step; ``PolicyBackendError`` when the
        backend fails (nothing is returned then, and the step is not counted)."""
        step = self._step
        if step % self.query_every == 0 or not self._ensembler.covers(step):
            self._ensembler.add(step, self.backend.act_chunk(images, state, instruction))
        action = self._ensembler.action(step).astype(np.float32)
        if not np.all(np.isfinite(action)):
            raise PolicyBackendError(f"{self.backend.name}: a non-finite action {action}")
        self._step += 1
        action[GRIPPER] = np.clip(action[GRIPPER], 0.0, 1.0)
        return action
