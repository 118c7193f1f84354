"""A trained goal-conditioned policy as a small file: numpy weights, no torch at run time.

A model directory holds ``policy.npz`` (the actor's layers and the observation normaliser)
and ``policy.json`` (family, robot, layer sizes, action scale, control period, training
summary). ``MLPPolicy.act`` is a few matrix products in numpy: thousands of actions per second
on one core, so the controller node can run it at the control rate beside everything else.
Loading validates shapes and finiteness; a bad file gets a ``PolicyFileError`` that says what
is wrong, never a half-loaded policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.rl.bounded_npz import NpzLimits, read_npz

WEIGHTS_FILE = "policy.npz"
CONFIG_FILE = "policy.json"
FORMAT = "lang2policy-rl-mlp/1"
OBS_CLIP = 10.0  # normalised observations are clipped to +- this, as in training
# What a policy directory may declare (ours: 3 layers of 64, a few KiB of weights).
CONFIG_MAX_BYTES = 1 << 20  # policy.json
MAX_LAYERS = 16
WEIGHTS_LIMITS = NpzLimits(arrays=2 * MAX_LAYERS + 2, array_bytes=16 << 20, total_bytes=64 << 20)


class PolicyFileError(Lang2PolicyError):
    """A policy directory that cannot be used (missing, malformed or inconsistent)."""


@dataclass
class MLPPolicy:
    """A tanh MLP actor with its observation normaliser; ``act`` returns actions in [-1, 1]."""

    family: str
    robot: str
    weights: list[np.ndarray]
    biases: list[np.ndarray]
    obs_mean: np.ndarray
    obs_var: np.ndarray
    action_scale: float
    control_period: float
    summary: dict = field(default_factory=dict)

    @property
    def observation_size(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def action_size(self) -> int:
        return int(self.weights[-1].shape[0])

    def act(self, observation: np.ndarray) -> np.ndarray:
        """The deterministic action (the Gaussian's mean, clipped) for one observation."""
        x = (np.asarray(observation, np.float64) - self.obs_mean) / np.sqrt(self.obs_var + 1e-8)
        x = np.clip(x, -OBS_CLIP, OBS_CLIP)
        for w, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            x = np.tanh(w @ x + b)
        return np.clip(self.weights[-1] @ x + self.biases[-1], -1.0, 1.0)

    def save(self, directory: str | Path) -> Path:
        """Write ``policy.npz`` and ``policy.json`` into ``directory`` (created)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        arrays = {"obs_mean": self.obs_mean, "obs_var": self.obs_var}
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            arrays[f"w{i}"], arrays[f"b{i}"] = w.astype(np.float32), b.astype(np.float32)
        np.savez(out / WEIGHTS_FILE, **arrays)
        config = {
            "format": FORMAT,
            "family": self.family,
            "robot": self.robot,
            "layers": len(self.weights),
            "observation_size": self.observation_size,
            "action_size": self.action_size,
            "action_scale": self.action_scale,
            "control_period": self.control_period,
            "summary": self.summary,
        }
        (out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        return out


def load_policy(directory: str | Path) -> MLPPolicy:
    """Read a policy directory written by ``MLPPolicy.save``; ``PolicyFileError`` if bad.
    Every size is checked before memory is taken for it (``CONFIG_MAX_BYTES``,
    ``WEIGHTS_LIMITS``, ``MAX_LAYERS``): a small deflated file cannot inflate to gigabytes."""
    path = Path(directory)
    try:
        size = (path / CONFIG_FILE).stat().st_size
        if size > CONFIG_MAX_BYTES:
            raise PolicyFileError(
                f"{path / CONFIG_FILE}: its size is {size} bytes; at most "
                f"{CONFIG_MAX_BYTES} bytes are read"
            )
        config = json.loads((path / CONFIG_FILE).read_text())
        arrays = read_npz(path / WEIGHTS_FILE, WEIGHTS_LIMITS, PolicyFileError)
    except (OSError, ValueError, RecursionError) as exc:
        raise PolicyFileError(
            f"cannot read the RL policy in {path}: {exc} (expected "
            f"{CONFIG_FILE} and {WEIGHTS_FILE} from 'train rl')"
        ) from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise PolicyFileError(f"{path / CONFIG_FILE} is not a {FORMAT} policy")
    layers = config.get("layers")
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= MAX_LAYERS:
        raise PolicyFileError(
            f"{path / CONFIG_FILE}: layers is {layers!r:.40}; it must be a "
            f"whole number 1..{MAX_LAYERS}"
        )
    data = {name: np.asarray(array, np.float64) for name, array in arrays.items()}
    try:
        policy = MLPPolicy(
            family=str(config["family"]),
            robot=str(config["robot"]),
            weights=[data[f"w{i}"] for i in range(layers)],
            biases=[data[f"b{i}"] for i in range(layers)],
            obs_mean=data["obs_mean"],
            obs_var=data["obs_var"],
            action_scale=float(config["action_scale"]),
            control_period=float(config["control_period"]),
            summary=dict(config.get("summary", {})),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PolicyFileError(f"{path} is missing or has a bad entry: {exc}") from None
    _check_shapes(policy, path)
    return policy


def _check_shapes(policy: MLPPolicy, path: Path) -> None:
    """Layers chain, the normaliser matches the input, and every number is finite."""
    size = policy.observation_size
    for w, b in zip(policy.weights, policy.biases, strict=True):
        if w.ndim != 2 or w.shape[1] != size or b.shape != (w.shape[0],):
            raise PolicyFileError(f"{path}: layer shapes do not chain ({w.shape}, {b.shape})")
        size = w.shape[0]
    if (
        policy.obs_mean.shape != (policy.observation_size,)
        or policy.obs_var.shape != policy.obs_mean.shape
    ):
        raise PolicyFileError(f"{path}: the normaliser does not match the input size")
    arrays = [*policy.weights, *policy.biases, policy.obs_mean, policy.obs_var]
    if not all(np.isfinite(a).all() for a in arrays) or (policy.obs_var < 0).any():
        raise PolicyFileError(f"{path}: weights or normaliser hold non-finite values")
    if not 0.0 < policy.action_scale <= 1.0 or not 0.0 < policy.control_period <= 1.0:
        raise PolicyFileError(f"{path}: action_scale and control_period must be in (0, 1]")
