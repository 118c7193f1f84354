"""The backend that runs our own trained VLA in this process (``VLAPolicy``, torch on CPU).

It imports torch, so it is imported only when chosen (``select.open_backend("local")``), not
by ``lang2policy.vla.backends`` itself. Its images must already be the model's size
(``image_size`` square, the size it was trained on); unlike a remote server's input, they
are not resized here, because the training frames were rendered at that size, not padded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from lang2policy.errors import Lang2PolicyError, PolicyBackendError
from lang2policy.paths import share_dir
from lang2policy.vla.backends.base import validate_chunk
from lang2policy.vla.backends.observation import check_observation
from lang2policy.vla.policy.runtime import VLAPolicy

DEFAULT_MODEL = "vla-so101-tiny"  # the checkpoint shipped in models/


def default_model_dir() -> Path:
    """The shipped model directory, ``models/vla-so101-tiny`` of the data directories."""
    return share_dir() / "models" / DEFAULT_MODEL


class LocalBackend:
    """``VLAPolicy.act_chunk`` behind the backend interface: one raw chunk per call."""

    name = "local"

    def __init__(self, policy: VLAPolicy) -> None:
        self.policy = policy

    @classmethod
    def load(
        cls, model_dir: Path | str | None = None, *, device: str = "cpu", threads: int | None = 1
    ) -> LocalBackend:
        """The policy in ``model_dir`` (default: the shipped one); ``ConfigError`` if it
        cannot be read. ``threads``: torch CPU threads (one is fastest beside a simulation)."""
        directory = default_model_dir() if model_dir is None else Path(model_dir)
        return cls(VLAPolicy.load(directory, device, threads))

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.policy.config.cameras)

    @property
    def image_size(self) -> int:
        """The side of the square images the model takes."""
        return self.policy.config.image_size

    @property
    def fps(self) -> int:
        """The frame rate the model was trained at: one action per ``1 / fps`` s."""
        return self.policy.config.fps

    @property
    def has_looked(self) -> bool:
        """A latched network that holds this episode's scene reads no more images."""
        return self.policy.has_looked

    def reset(self) -> None:
        self.policy.reset()

    def close(self) -> None:
        """Nothing to release: the model stays loaded while the backend exists."""

    def act_chunk(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """The model's next chunk ``float32 [chunk, 6]``; ``PolicyBackendError`` for inputs it
        cannot take (a missing camera, a wrong image size, NaN in the state) or a failed run."""
        selected, state, instruction = check_observation(
            images, state, instruction, self.cameras, self.name
        )
        try:
            chunk = self.policy.act_chunk(selected, state, instruction)
        except (Lang2PolicyError, RuntimeError, ValueError) as exc:
            raise PolicyBackendError(f"{self.name}: {exc}") from exc
        return validate_chunk(chunk, self.name)
