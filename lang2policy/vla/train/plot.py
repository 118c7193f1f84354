"""The record of a training run: ``training_log.jsonl`` (one JSON object per line) and its plot
``training.png`` (losses on the left, closed-loop evaluation on the right).

Records carry ``kind``: ``train`` (running loss, learning rate, samples/s), ``val`` (held-out
loss) or ``eval`` (whatever the evaluation callback returned). A resumed run first drops the
records past its checkpoint's step, so the log reads as one run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LOG_FILE = "training_log.jsonl"
PLOT_FILE = "training.png"


class TrainLog:
    """Appends records to ``training_log.jsonl`` and keeps them for the plot and summary."""

    def __init__(self, path: Path, resume_step: int | None = None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        if resume_step is not None and path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            self.records = [json.loads(line) for line in lines if line.strip()]
            self.records = [r for r in self.records if r.get("step", 0) <= resume_step]
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r) + "\n" for r in self.records)
        path.write_text(text, encoding="utf-8")

    def add(self, kind: str, step: int, **values: Any) -> dict[str, Any]:
        record = {"kind": kind, "step": step, **values}
        self.records.append(record)
        with self.path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
        return record

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.records) if r["kind"] == kind), None)


def _series(records: list[dict[str, Any]], kind: str, key: str) -> tuple[list, list]:
    points = [(r["step"], r[key]) for r in records if r["kind"] == kind and _number(r.get(key))]
    return [p[0] for p in points], [p[1] for p in points]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def eval_metrics(records: list[dict[str, Any]]) -> list[str]:
    """The evaluation results worth a curve: fractions (floats from 0 to 1, success rates)."""
    names: dict[str, bool] = {}
    for record in records:
        if record["kind"] != "eval":
            continue
        for key, value in record.items():
            if key not in ("kind", "step", "eval_seconds") and _number(value):
                fraction = isinstance(value, float) and 0.0 <= value <= 1.0
                names[key] = names.get(key, True) and fraction
    return [name for name, fraction in names.items() if fraction]


LOSS_SERIES = (
    ("train", "loss", "train L1 (actions)"),
    ("val", "val_loss", "validation L1 (actions)"),
    ("train", "aux_loss", "train L1 (scene state)"),
    ("val", "val_aux_loss", "validation L1 (scene state)"),
)


def plot_training(records: list[dict[str, Any]], path: Path) -> None:
    """Draw the losses (log scale) and the evaluation fractions over steps to ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, (losses, evals) = plt.subplots(1, 2, figsize=(11, 4))
    for kind, key, label in LOSS_SERIES:
        steps, values = _series(records, kind, key)
        if steps:
            losses.plot(steps, values, label=label, marker="." if kind == "val" else None)
    losses.set(xlabel="step", ylabel="L1 loss (normalised)", title="Loss")
    losses.set_yscale("log")
    losses.grid(True, alpha=0.3)
    for name in eval_metrics(records):
        evals.plot(*_series(records, "eval", name), marker="o", label=name)
    evals.set(xlabel="step", ylim=(-0.02, 1.02), title="Closed-loop evaluation")
    evals.grid(True, alpha=0.3)
    for axes in (losses, evals):
        if axes.get_legend_handles_labels()[0]:
            axes.legend()
    if not eval_metrics(records):
        evals.text(0.5, 0.5, "no evaluation yet", ha="center", va="center")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
