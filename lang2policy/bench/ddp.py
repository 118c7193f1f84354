"""``lang2policy bench ddp``: the same ``train vla`` training in one process and in several
(``torchrun``, gloo on the CPU, NCCL on GPUs), side by side.

Both runs are ``train_vla`` with the plain design's recipe on the same dataset (read as
``train vla`` reads it), with the same seed, schedule and global batch (``--batch`` frames a
step: ``--batch`` in the one process, ``--batch / --processes`` in each of the others), so they
train on the same frames step by step (``vla.train.batches.batch_indices``) and their loss
curves should agree within noise (the augmentation's random streams differ by process). Each
run is this module started as a program (``python -m lang2policy.bench.ddp``, through
``python -m torch.distributed.run`` for the data-parallel one), which trains with the bench's
short schedule (``--warmup-steps``, a log record every ``--log-every`` steps). The report: both
curves (the logged loss: in the data-parallel run the mean over its processes), the train
samples/s of each (optimiser steps only, not start-up or validation), the wall time of each
command, and the share of step time that gathering the batches took (the data loader's share,
rank 0's). Without ``--dataset`` a small one is recorded first (``record demos``: lift and push,
6 episodes each, about 20 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError

LOG_FILE = "training_log.jsonl"  # vla.train.plot.LOG_FILE, named here without importing torch
SUMMARY_FILE = "train_summary.json"  # vla.train.outputs.SUMMARY_FILE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", type=Path, help="a recorded dataset (default: record a "
                        "small one into a temporary folder: lift and push, 6 episodes each)")
    parser.add_argument("--processes", type=cli_types.positive_int, default=2,
                        help="processes of the data-parallel run (default 2)")
    parser.add_argument("--batch", type=cli_types.positive_int, default=32,
                        help="frames a step, all processes together (default 32)")
    parser.add_argument("--steps", type=cli_types.positive_int, default=60)
    parser.add_argument("--log-every", type=cli_types.positive_int, default=5)
    parser.add_argument("--lr", type=cli_types.positive_float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--seed", type=int, default=0)  # fmt: skip


def train_command(args: argparse.Namespace, dataset: Path, out: Path, processes: int) -> list:
    """The command line of one run: this module as a program, plain or through ``torchrun``."""
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone",
                     f"--nproc_per_node={processes}"]  # fmt: skip
    return [
        *launcher, "-m", "lang2policy.bench.ddp", "--dataset", str(dataset), "--out", str(out),
        "--steps", str(args.steps), "--batch-size", str(args.batch // processes),
        "--log-every", str(args.log_every), "--lr", str(args.lr),
        "--warmup-steps", str(args.warmup_steps), "--device", args.device,
        "--seed", str(args.seed),
    ]  # fmt: skip


def train(argv: list[str]) -> int:
    """One run (``python -m lang2policy.bench.ddp ...``, in each process of a launcher): the
    plain design's recipe with the bench's schedule, on a dataset read as ``train vla`` reads
    it; validation and the checkpoint at the end only."""
    from dataclasses import replace

    from lang2policy.vla.dataset.combine import load_datasets
    from lang2policy.vla.train.run import train_vla
    from lang2policy.vla.train.settings import DESIGNS

    parser = argparse.ArgumentParser(prog="python -m lang2policy.bench.ddp")
    for name in ("--steps", "--batch-size", "--log-every", "--warmup-steps", "--seed"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", required=True)
    args = parser.parse_args(argv)
    recipe = DESIGNS["plain"]
    settings = replace(
        recipe, steps=args.steps, batch_size=args.batch_size, log_every=args.log_every,
        val_every=args.steps, checkpoint_every=args.steps, seed=args.seed, device=args.device,
        progress=False, optim=replace(recipe.optim, lr=args.lr, warmup_steps=args.warmup_steps),
    )  # fmt: skip
    data = load_datasets([args.dataset], settings.model.cameras)
    train_vla(data, args.out, settings)
    return 0


def run_training(command: list, out: Path, quiet: bool) -> dict:
    """Run one training; its loss curve (step -> loss) and summary figures."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0 or not (out / SUMMARY_FILE).is_file():
        raise Lang2PolicyError(
            f"training failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}"
        )
    if not quiet:
        print(done.stdout.strip().splitlines()[0], file=sys.stderr)
    records = [json.loads(line) for line in (out / LOG_FILE).read_text().splitlines() if line]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    return {
        "curve": {r["step"]: r["loss"] for r in records if r["kind"] == "train"},
        "samples_per_s": summary["samples_per_s"],
        "data_share": summary["data_share"],
        "world_size": summary["world_size"],
        "global_batch": summary["global_batch"],
        "final_val_loss": summary["final_val_loss"],
        "wall_s": round(wall, 1),
    }


def record_dataset(root: Path) -> Path:
    """A small dataset recorded by ``record demos``."""
    out = root / "demos"
    command = [sys.executable, "-m", "lang2policy.cli", "record", "demos", "--task-family",
               "lift,push", "--episodes", "6", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Lang2PolicyError(f"recording the dataset failed: {done.stderr[-2000:]}")
    return out


def run_args(args: argparse.Namespace) -> dict:
    if args.processes < 2 or args.batch % args.processes:
        raise Lang2PolicyError(
            f"--processes must be 2 or more and divide --batch ({args.batch}), "
            f"got {args.processes}"
        )
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as folder:
        root = Path(folder)
        dataset = args.dataset or record_dataset(root)
        runs = {}
        for processes in (1, args.processes):
            out = root / f"x{processes}"
            runs[processes] = run_training(train_command(args, dataset, out, processes), out,
                                           args.json)  # fmt: skip
    one, many = runs[1], runs[args.processes]
    steps = sorted(set(one["curve"]) & set(many["curve"]))
    gaps = [abs(one["curve"][s] - many["curve"][s]) for s in steps]
    return {
        "dataset": str(args.dataset) if args.dataset else "recorded: lift, push x 6",
        "processes": args.processes,
        "global_batch": args.batch,
        "steps": args.steps,
        "device": args.device,
        "curves": [{"step": s, "one": one["curve"][s], "many": many["curve"][s]} for s in steps],
        "largest_gap": max(gaps, default=None),
        "one_process": {k: v for k, v in one.items() if k != "curve"},
        "data_parallel": {k: v for k, v in many.items() if k != "curve"},
    }


def format_text(report: dict) -> str:
    count = report["processes"]
    lines = [
        f"train_vla, plain design, {report['steps']} steps of {report['global_batch']} frames "
        f"on {report['device']}, dataset {report['dataset']}",
        f"{'step':>6} {'1 process':>10} {f'{count} processes':>12} {'gap':>8}",
    ]
    for point in report["curves"]:
        one, many = point["one"], point["many"]
        lines.append(f"{point['step']:>6} {one:>10.4f} {many:>12.4f} {many - one:>+8.4f}")
    lines.append(f"largest gap {report['largest_gap']:.4f}")
    for label, run in (("1 process", report["one_process"]),
                       (f"{count} processes", report["data_parallel"])):  # fmt: skip
        lines.append(
            f"{label}: {run['samples_per_s']} samples/s in the steps, data loader "
            f"{100 * run['data_share']:.1f} % of step time, validation L1 "
            f"{run['final_val_loss']:.4f}, command {run['wall_s']} s"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(train(sys.argv[1:]))
