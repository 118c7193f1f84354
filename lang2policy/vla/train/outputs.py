"""The files a training run writes into its output directory (rank 0 only).

- ``checkpoint.pt``: the training state that ``--resume`` continues from;
- the model directory files (``checkpoint``), refreshed at every checkpoint;
- ``training_log.jsonl`` and ``training.png`` (``plot``);
- ``train_summary.json`` at the end.
"""

from __future__ import annotations

import json
from dataclasses import replace
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
from lang2policy.vla.train.distributed import per_process_batch
from lang2policy.vla.train.loop import Trainer
from lang2policy.vla.train.plot import LOG_FILE, PLOT_FILE, TrainLog, plot_training
from lang2policy.vla.train.settings import TrainSettings

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


def resumed_settings(
    settings: TrainSettings, state: dict[str, Any], world_size: int
) -> TrainSettings:
    """``settings`` with the saved run's global batch shared between ``world_size`` processes
    (a checkpoint from before it was saved keeps the batch asked for)."""
    saved = state.get("global_batch")
    if saved is None:
        return settings
    return replace(settings, batch_size=per_process_batch(int(saved), world_size))


def process_generator(
    seed: int, rank: int, start: int, state: dict[str, Any] | None
) -> torch.Generator:
    """A process's random stream (augmentation, motor frames): its rank's saved one when
    resuming (a checkpoint from before every rank's was saved holds rank 0's), else a fresh
    one of its rank and start step."""
    generator = torch.Generator().manual_seed(seed * 1009 + rank + 7919 * start)
    saved = [] if state is None else state.get("generators") or [state["generator"]]
    if rank < len(saved):
        generator.set_state(saved[rank])
    return generator


class RunOutputs:
    """Writes the log, checkpoints, plot and summary of one run."""

    def __init__(self, out_dir: Path, resume_step: int | None) -> None:
        self.dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.log = TrainLog(out_dir / LOG_FILE, resume_step)

    def save_checkpoint(
        self,
        step: int,
        trainer: Trainer,
        generators: list[torch.Tensor],
        normalizer: Normalizer,
        global_batch: int,
    ) -> None:
        """``checkpoint.pt`` and the model directory as of ``step``, and the plot.

        ``generators``: every process's random state, by rank (``generator``, rank 0's, is
        what checkpoints held before); ``global_batch``: the frames of one step, all processes
        together, which a resumed run keeps whatever its number of processes."""
        state = trainer.state_dict()
        state.update(
            step=step,
            generator=generators[0],
            generators=generators,
            global_batch=global_batch,
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
