"""Mean/std normalisation of state and action, stored with a model as ``normalization.json``.

The network sees zero-mean, unit-variance joints so that radians and the 0..1 gripper weigh
alike in the L1 loss. A joint that barely moves in the demonstrations (a wrist roll held
still) would get a tiny std and blow its noise up, so every std is clamped from below.
Images need no statistics: they are scaled to 0..1 (``images_to_float``).

Two action modes:

- ``absolute``: each action is normalised by the dataset's action mean/std. Since a joint
  target is the current joint plus a small step, the network must copy the state through its
  layers to within a fraction of one step, and its error is then as large as the motion itself
  (the first checkpoint's open-loop error was one frame's motion).
- ``delta`` (the default for training): the network predicts ``action[t + k] - state[t]``,
  normalised per chunk position ``k`` by the statistics of those differences in the training
  frames (``delta_from_frames``). The loss then weighs the motion, not the posture, and the
  runtime adds the state back (``denormalize_chunk``).

Optionally the privileged scene state (``observation.environment_state``) has statistics too,
for the auxiliary target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.vla.spec.schema import ACTION_KEY, ENV_KEY, STATE_KEY

MIN_STD = 1e-2  # rad (or gripper fraction): below this a feature counts as constant
MIN_DELTA_STD = 1e-3  # rad: the same floor for one-step differences, which are small
ACTION_MODES = ("absolute", "delta")
MODE_KEY = "action_mode"

Array = Any  # a numpy array or a torch tensor: both support the arithmetic used here


@dataclass(frozen=True)
class Normalizer:
    """``(x - mean) / std`` for state, action (chunks) and scene state, and the inverse for
    action chunks. In ``delta`` mode the action statistics are ``[chunk, dim]``."""

    state_mean: np.ndarray
    state_std: np.ndarray
    action_mean: np.ndarray
    action_std: np.ndarray
    action_mode: str = "absolute"
    env_mean: np.ndarray | None = None
    env_std: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.action_mode not in ACTION_MODES:
            raise ConfigError(
                f"action_mode must be one of {ACTION_MODES}, got {self.action_mode!r}"
            )

    @classmethod
    def from_stats(cls, stats: dict[str, dict[str, Any]], min_std: float = MIN_STD) -> Normalizer:
        """From a dataset's ``stats`` (``{feature: {"mean", "std", ...}}``)."""
        missing = [key for key in (STATE_KEY, ACTION_KEY) if key not in stats]
        if missing:
            raise ConfigError(f"dataset stats lack {missing}; they have {sorted(stats)}")

        def vector(key: str, name: str) -> np.ndarray:
            return np.asarray(stats[key][name], np.float32).reshape(-1)

        env = {}
        if ENV_KEY in stats:
            env = {
                "env_mean": vector(ENV_KEY, "mean"),
                "env_std": np.maximum(vector(ENV_KEY, "std"), min_std),
            }
        return cls(
            state_mean=vector(STATE_KEY, "mean"),
            state_std=np.maximum(vector(STATE_KEY, "std"), min_std),
            action_mean=vector(ACTION_KEY, "mean"),
            action_std=np.maximum(vector(ACTION_KEY, "std"), min_std),
            **env,
        )

    def with_delta_actions(
        self,
        state: np.ndarray,
        action: np.ndarray,
        frames: np.ndarray,
        frame_end: np.ndarray,
        chunk: int,
        min_std: float = MIN_DELTA_STD,
    ) -> Normalizer:
        """This normaliser in ``delta`` mode: per chunk position ``k``, the mean/std of
        ``action[t + k] - state[t]`` over the training ``frames`` (a chunk running past its
        episode's end, ``frame_end``, repeats the last action, as training pads it)."""
        ahead = frames[:, None] + np.arange(chunk)[None, :]
        targets = np.minimum(ahead, frame_end[frames, None] - 1)
        deltas = np.asarray(action)[targets] - np.asarray(state)[frames][:, None, :]
        return replace(
            self,
            action_mode="delta",
            action_mean=deltas.mean(0).astype(np.float32),
            action_std=np.maximum(deltas.std(0), min_std).astype(np.float32),
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
        """One absolute action (``absolute`` mode only; see ``normalize_chunk``)."""
        self._require_absolute()
        return (action - self._like(self.action_mean, action)) / self._like(self.action_std, action)

    def denormalize_action(self, action: Array) -> Array:
        self._require_absolute()
        return action * self._like(self.action_std, action) + self._like(self.action_mean, action)

    def normalize_chunk(self, actions: Array, state: Array) -> Array:
        """Actions ``[..., chunk, dim]`` taken from the frame whose state is ``[..., dim]``,
        as the network predicts them."""
        if self.action_mode == "delta":
            actions = actions - state[..., None, :]
        mean, std = self._like(self.action_mean, actions), self._like(self.action_std, actions)
        return (actions - mean) / std

    def denormalize_chunk(self, predicted: Array, state: Array) -> Array:
        """The network's ``[..., chunk, dim]`` output as absolute targets (``state``: the
        frame's measured state, ``[..., dim]``)."""
        mean, std = self._like(self.action_mean, predicted), self._like(self.action_std, predicted)
        actions = predicted * std + mean
        return actions + state[..., None, :] if self.action_mode == "delta" else actions

    @property
    def has_environment(self) -> bool:
        return self.env_mean is not None and self.env_std is not None

    def normalize_environment(self, env: Array) -> Array:
        if not self.has_environment:
            raise ConfigError("this normaliser has no environment-state statistics")
        return (env - self._like(self.env_mean, env)) / self._like(self.env_std, env)

    def _require_absolute(self) -> None:
        if self.action_mode != "absolute":
            raise ConfigError(
                f"single actions have no normalisation in {self.action_mode!r} mode; "
                "use normalize_chunk / denormalize_chunk with the frame's state"
            )

    @staticmethod
    def _like(vector: np.ndarray, other: Array) -> Array:
        """``vector`` as the same kind of array as ``other`` (numpy, or torch on its device)."""
        if isinstance(other, np.ndarray):
            return vector
        import torch

        return torch.as_tensor(vector, dtype=other.dtype, device=other.device)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            STATE_KEY: {"mean": self.state_mean.tolist(), "std": self.state_std.tolist()},
            ACTION_KEY: {"mean": self.action_mean.tolist(), "std": self.action_std.tolist()},
            MODE_KEY: self.action_mode,
        }
        if self.has_environment:
            data[ENV_KEY] = {"mean": self.env_mean.tolist(), "std": self.env_std.tolist()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Normalizer:
        """``to_dict``'s output (stds stored already clamped); no mode means ``absolute``."""
        mode = data.get(MODE_KEY, "absolute")
        if mode not in ACTION_MODES:
            raise ConfigError(f"{MODE_KEY} must be one of {ACTION_MODES}, got {mode!r}")
        if mode == "absolute":
            return replace(cls.from_stats(data, min_std=0.0), action_mode=mode)
        flat = {**data, ACTION_KEY: {"mean": [0.0], "std": [1.0]}}
        base = cls.from_stats(flat, min_std=0.0)
        return replace(
            base,
            action_mode=mode,
            action_mean=np.asarray(data[ACTION_KEY]["mean"], np.float32),
            action_std=np.asarray(data[ACTION_KEY]["std"], np.float32),
        )

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Normalizer:
        """Read ``save``'s file; the stds are stored already clamped."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read normalisation file {path}: {exc}") from exc
        return cls.from_dict(data)

    def check_dims(self, state_dim: int, action_dim: int, chunk: int = 1) -> None:
        """Raise unless the statistics fit a model with these sizes (``delta`` mode has
        statistics per chunk position: ``[chunk, action_dim]``)."""
        action = (action_dim,) if self.action_mode == "absolute" else (chunk, action_dim)
        shapes = {
            "state_mean": (self.state_mean.shape, (state_dim,)),
            "state_std": (self.state_std.shape, (state_dim,)),
            "action_mean": (self.action_mean.shape, action),
            "action_std": (self.action_std.shape, action),
        }
        bad = {name: have for name, (have, want) in shapes.items() if have != want}
        if bad:
            raise ConfigError(
                f"normalisation shapes {bad} do not match state_dim={state_dim}, "
                f"action_dim={action_dim}, chunk={chunk} ({self.action_mode} actions)"
            )


def images_to_float(images: Array) -> Array:
    """uint8 ``[..., H, W, 3]`` → float ``[..., 3, H, W]`` in 0..1 (torch tensors)."""
    return images.movedim(-1, -3).float() / 255.0
