"""The files a training run writes into its output directory (rank 0 only).

- ``checkpoint.pt``: the training state that ``--resume`` continues from;
- the model directory files (``checkpoint``), refreshed at every checkpoint;
- ``training_log.jsonl`` and ``training.png`` (``plot``);
- ``train_summary.json`` at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from lang2policy.errors import ConfigError
from lang2policy.vla.model.checkpoint import (
    TRAINING_STATE_FILE,
    load_training_state,
    save_model_dir,
    save_training_state,
)
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.train.loop import Trainer
from lang2policy.vla.train.plot import LOG_FILE, PLOT_FILE, TrainLog, plot_training

SUMMARY_FILE = "train_summary.json"


def resume_state(out_dir: Path, resume: bool, device: torch.device) -> dict[str, Any] | None:
    """The saved training state to continue from (``resume``), else None. A fresh run refuses
    a directory that holds another run's checkpoint rather than overwrite it."""
    path = out_dir / TRAINING_STATE_FILE
    if resume:
        return load_training_state(path, str(device))
    if path.exists():
        raise ConfigError(
            f"{out_dir} already holds a training run ({TRAINING_STATE_FILE}): pass --resume to "
            "continue it, or choose another --out"
        )
    return None


class RunOutputs:
    """Writes the log, checkpoints, plot and summary of one run."""

    def __init__(self, out_dir: Path, resume_step: int | None) -> None:
        self.dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.log = TrainLog(out_dir / LOG_FILE, resume_step)

    def save_checkpoint(
        self, step: int, trainer: Trainer, generator: torch.Generator, normalizer: Normalizer
    ) -> None:
        """``checkpoint.pt`` and the model directory as of ``step``, and the plot."""
        state = trainer.state_dict()
        state.update(
            step=step,
            generator=generator.get_state(),
            config=trainer.net.config.to_dict(),
            normalizer=normalizer.to_dict(),
        )
        save_training_state(self.dir / TRAINING_STATE_FILE, state)
        save_model_dir(self.dir, trainer.export_net, normalizer)
        self.plot()

    def plot(self) -> None:
        plot_training(self.log.records, self.dir / PLOT_FILE)

    def write_summary(self, summary: dict[str, Any]) -> None:
        text = json.dumps(summary, indent=2, default=str) + "\n"
        (self.dir / SUMMARY_FILE).write_text(text, encoding="utf-8")


def short_number(value: Any) -> str:
    """A metric for a status line: floats to three significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def flat_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"per_family": {"push": 0.5}}`` → ``{"per_family.push": 0.5}``: one curve each."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            flat.update(flat_metrics(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
