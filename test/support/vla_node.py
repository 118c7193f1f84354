"""A policy backend stand-in for the VLA node's core (node runner and keep-out stop tests)."""

from __future__ import annotations

import numpy as np

from lang2policy.errors import PolicyBackendError


class FakeBackend:
    """Chunks of ``[base + row]`` per joint; raises when told to; records what it saw."""

    name, cameras, image_size = "fake", ("front", "wrist"), 96

    def __init__(self) -> None:
        self.calls: list[dict[str, tuple[int, ...]]] = []
        self.fail = False
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        """Nothing to release."""

    def act_chunk(self, images, state, instruction) -> np.ndarray:
        if self.fail:
            raise PolicyBackendError("fake: the server went away")
        self.calls.append({c: image.shape for c, image in images.items()})
        rows = np.arange(10, dtype=np.float32)[:, None] * np.ones(6, np.float32)
        return 0.01 * rows + state
