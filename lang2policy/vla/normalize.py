"""Mean/std normalisation of state and action, stored with a model as ``normalization.json``.

The network sees zero-mean, unit-variance joints so that radians and the 0..1 gripper weigh
alike in the L1 loss. A joint that barely moves in the demonstrations (a wrist roll held
still) would get a tiny std and blow its noise up, so every std is clamped from below.
Images need no statistics: they are scaled to 0..1 (``images_to_float``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.vla.schema import ACTION_KEY, STATE_KEY

MIN_STD = 1e-2  # rad (or gripper fraction): below this a feature counts as constant

Array = Any  # a numpy array or a torch tensor: both support the arithmetic used here


@dataclass(frozen=True)
class Normalizer:
    """``(x - mean) / std`` for state and action, and its inverse for actions."""

    state_mean: np.ndarray
    state_std: np.ndarray
    action_mean: np.ndarray
    action_std: np.ndarray

    @classmethod
    def from_stats(cls, stats: dict[str, dict[str, Any]], min_std: float = MIN_STD) -> Normalizer:
        """From a dataset's ``stats`` (``{feature: {"mean", "std", ...}}``)."""
        missing = [key for key in (STATE_KEY, ACTION_KEY) if key not in stats]
        if missing:
            raise ConfigError(f"dataset stats lack {missing}; they have {sorted(stats)}")

        def vector(key: str, name: str) -> np.ndarray:
            return np.asarray(stats[key][name], np.float32).reshape(-1)

        return cls(
            state_mean=vector(STATE_KEY, "mean"),
            state_std=np.maximum(vector(STATE_KEY, "std"), min_std),
            action_mean=vector(ACTION_KEY, "mean"),
            action_std=np.maximum(vector(ACTION_KEY, "std"), min_std),
        )

    @classmethod
    def from_arrays(
        cls, state: np.ndarray, action: np.ndarray, min_std: float = MIN_STD
    ) -> Normalizer:
        """From the frames themselves (``[N, dim]`` each)."""
        return cls(
            state_mean=state.mean(0).astype(np.float32),
            state_std=np.maximum(state.std(0), min_std).astype(np.float32),
            action_mean=action.mean(0).astype(np.float32),
            action_std=np.maximum(action.std(0), min_std).astype(np.float32),
        )

    def normalize_state(self, state: Array) -> Array:
        return (state - self._like(self.state_mean, state)) / self._like(self.state_std, state)

    def normalize_action(self, action: Array) -> Array:
        return (action - self._like(self.action_mean, action)) / self._like(self.action_std, action)

    def denormalize_action(self, action: Array) -> Array:
        return action * self._like(self.action_std, action) + self._like(self.action_mean, action)

    @staticmethod
    def _like(vector: np.ndarray, other: Array) -> Array:
        """``vector`` as the same kind of array as ``other`` (numpy, or torch on its device)."""
        if isinstance(other, np.ndarray):
            return vector
        import torch

        return torch.as_tensor(vector, dtype=other.dtype, device=other.device)

    def to_dict(self) -> dict[str, dict[str, list[float]]]:
        return {
            STATE_KEY: {"mean": self.state_mean.tolist(), "std": self.state_std.tolist()},
            ACTION_KEY: {"mean": self.action_mean.tolist(), "std": self.action_std.tolist()},
        }

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Normalizer:
        """Read ``save``'s file; the stds are stored already clamped."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read normalisation file {path}: {exc}") from exc
        return cls.from_stats(data, min_std=0.0)

    def check_dims(self, state_dim: int, action_dim: int) -> None:
        """Raise unless the statistics fit a model with these dimensions."""
        dims = {
            "state_mean": (self.state_mean.size, state_dim),
            "state_std": (self.state_std.size, state_dim),
            "action_mean": (self.action_mean.size, action_dim),
            "action_std": (self.action_std.size, action_dim),
        }
        bad = {name: have for name, (have, want) in dims.items() if have != want}
        if bad:
            raise ConfigError(
                f"normalisation sizes {bad} do not match state_dim={state_dim}, "
                f"action_dim={action_dim}"
            )


def images_to_float(images: Array) -> Array:
    """uint8 ``[..., H, W, 3]`` → float ``[..., 3, H, W]`` in 0..1 (torch tensors)."""
    return images.movedim(-1, -3).float() / 255.0
