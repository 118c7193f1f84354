"""A trained VLA on disk: a model directory, and the training state that resumes a run.

A model directory holds everything the runtime policy needs and nothing it must trust:

- ``config.json``: the ``VLAConfig`` (every size of the network);
- ``model.safetensors``: the weights (safetensors: no pickle, so loading runs no code);
- ``normalization.json``: state/action mean and std, the action mode, scene-state stats.

The training state (``checkpoint.pt``: weights, optimiser, schedule, step, random state) is a
torch file read with ``weights_only=True``; only training reads it. Every file is written to a
temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from lang2policy.errors import ConfigError
from lang2policy.vla.model.network import VLAConfig, VLANet
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.spec.loader_limits import (
    VLA_CONFIG_MAX_BYTES,
    VLA_MAX_PARAMETERS,
    VLA_NORMALIZATION_MAX_BYTES,
    VLA_WEIGHTS_MAX_BYTES,
    at_most,
)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
NORMALIZATION_FILE = "normalization.json"
TRAINING_STATE_FILE = "checkpoint.pt"
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, NORMALIZATION_FILE)
_FILE_LIMITS = {
    CONFIG_FILE: VLA_CONFIG_MAX_BYTES,
    NORMALIZATION_FILE: VLA_NORMALIZATION_MAX_BYTES,
    WEIGHTS_FILE: VLA_WEIGHTS_MAX_BYTES,
}


@dataclass
class LoadedModel:
    """A model directory, read: the network in eval mode, its config and its normaliser."""

    model: VLANet
    config: VLAConfig
    normalizer: Normalizer


def _replace_atomically(path: Path, write: Any) -> None:
    """Call ``write(temporary_path)`` and rename the result over ``path``."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def save_model_dir(directory: Path, model: VLANet, normalizer: Normalizer) -> None:
    """Write ``config.json``, ``model.safetensors`` and ``normalization.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    config_text = json.dumps(model.config.to_dict(), indent=2) + "\n"
    blob = save(weights, metadata={"format": "pt"})
    _replace_atomically(directory / WEIGHTS_FILE, lambda p: p.write_bytes(blob))
    _replace_atomically(directory / NORMALIZATION_FILE, normalizer.save)
    _replace_atomically(directory / CONFIG_FILE, lambda p: p.write_text(config_text, "utf-8"))


def load_model_dir(directory: Path, device: str = "cpu") -> LoadedModel:
    """Read a model directory written by ``save_model_dir``; errors say what is wrong."""
    directory = Path(directory)
    missing = [name for name in MODEL_FILES if not (directory / name).is_file()]
    if missing:
        raise ConfigError(
            f"{directory} is not a VLA model directory: missing {missing} (it needs "
            f"{list(MODEL_FILES)}, as `lang2policy train vla --out DIR` writes them)"
        )
    for name, limit in _FILE_LIMITS.items():
        path = directory / name
        at_most(path.stat().st_size, limit, "its size", str(path), ConfigError, "bytes")
    try:
        config = VLAConfig.from_dict(json.loads((directory / CONFIG_FILE).read_text("utf-8")))
    except (OSError, ValueError, TypeError, RecursionError, ConfigError) as exc:
        raise ConfigError(f"cannot read {directory / CONFIG_FILE}: {exc}") from exc
    _check_parameters(config, directory / CONFIG_FILE)
    normalizer = Normalizer.load(directory / NORMALIZATION_FILE)
    normalizer.check_dims(config.state_dim, config.action_dim, config.chunk)
    model = VLANet(config)
    try:
        weights = load_file(str(directory / WEIGHTS_FILE), device="cpu")
        model.load_state_dict(weights, strict=True)
    except (OSError, SafetensorError, RuntimeError) as exc:
        raise ConfigError(
            f"the weights in {directory / WEIGHTS_FILE} do not fit its config.json: {exc}"
        ) from exc
    model.use_statistics(normalizer)
    model.to(device).eval()
    return LoadedModel(model, config, normalizer)


def _check_parameters(config: VLAConfig, where: Path) -> None:
    """The network ``config`` describes has at most ``VLA_MAX_PARAMETERS``: counted on
    torch's meta device, which records shapes and allocates nothing."""
    with torch.device("meta"):
        count = sum(p.numel() for p in VLANet(config).parameters())
    at_most(count, VLA_MAX_PARAMETERS, "the network's parameter count", str(where), ConfigError)


def save_training_state(path: Path, state: dict[str, Any]) -> None:
    """Write a training checkpoint (tensors, numbers, strings and containers of them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_atomically(path, lambda p: torch.save(state, p))


def load_training_state(path: Path, device: str = "cpu") -> dict[str, Any]:
    """Read ``save_training_state``'s file, without unpickling arbitrary objects."""
    if not path.is_file():
        raise ConfigError(f"no training checkpoint at {path} to resume from")
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"cannot read training checkpoint {path}: {exc}") from exc
