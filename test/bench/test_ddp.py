"""``lang2policy bench ddp``: the two command lines it runs and its report (the training under
the real launcher is tested in test/vla/test_train_launchers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lang2policy.bench import ddp
from lang2policy.bench.registry import BENCHES, parser
from lang2policy.errors import Lang2PolicyError


def test_both_runs_train_the_same_global_batch_one_through_torchrun():
    args = parser("ddp").parse_args(["--processes", "4", "--batch", "32", "--steps", "10"])
    one = ddp.train_command(args, Path("d"), Path("o1"), 1)
    many = ddp.train_command(args, Path("d"), Path("o4"), 4)
    assert one[1:3] == ["-m", "lang2policy.bench.ddp"] and "torch.distributed.run" not in one
    assert many[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    batch = [words[words.index("--batch-size") + 1] for words in (one, many)]
    assert batch == ["32", "8"]  # frames per process
    args.processes = 3
    with pytest.raises(Lang2PolicyError, match="divide --batch"):
        ddp.run_args(args)


def test_the_report_shows_both_curves_and_the_data_loaders_share():
    run = {"samples_per_s": 100.0, "data_share": 0.012, "final_val_loss": 0.5, "wall_s": 9.0}
    report = {
        "processes": 2, "global_batch": 32, "steps": 10, "device": "cpu", "dataset": "d",
        "curves": [{"step": 5, "one": 0.6, "many": 0.61}], "largest_gap": 0.01,
        "one_process": run, "data_parallel": {**run, "samples_per_s": 150.0},
    }  # fmt: skip
    text = BENCHES["ddp"].format_text(report)
    assert "     5     0.6000       0.6100  +0.0100" in text
    assert "2 processes: 150.0 samples/s" in text and "data loader 1.2 %" in text
