"""``lang2policy train vla``: train the VLA policy on a recorded demonstration dataset.
(``lang2policy train rl`` is in ``train_rl.py``.)

    lang2policy train vla --dataset data/demos --out models/vla    # the shipped model's recipe
    lang2policy train vla --finetune models/vla-so101-tiny --dataset data/corrections-lift \
        --out models/vla-corrected [--steps 300 --lr 1e-4]    # from a model, on corrections
    torchrun --nproc_per_node 4 -m lang2policy.cli train vla ...   # data-parallel on 4 GPUs
    accelerate launch --multi_gpu --num_processes 4 -m lang2policy.cli train vla ...  # the same
    lang2policy train vla --design plain --dataset ~/.cache/huggingface/lerobot/me/so101_pick \
        --cameras front --out models/vla-from-lerobot \
        --calibration ~/.cache/huggingface/lerobot/calibration/robots/so_follower/arm.json
        # a dataset lerobot-record wrote (640x480, degrees)

With no other option a run trains the recipe of ``models/vla-so101-tiny``
(``vla.train.settings.DESIGNS``): its network and every training setting. ``--design plain``
is the image-features network for datasets that record no scene state (LeRobot's, teleoperated
ones). Arguments are parsed here; ``lang2policy.vla.train.run`` does the work. Heavy imports
(torch, the dataset reader) happen only when the command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.spec.schema import IMAGE_SIZE

DESIGNS = ("shipped", "plain")  # vla.train.settings.DESIGNS, named here without importing torch


def _count(value: str) -> int:
    """A whole number >= 0."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a whole number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{number} is negative")
    return number


def _positive(value: str) -> int:
    number = _count(value)
    if number == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _cameras(value: str) -> tuple[str, ...]:
    """Comma-separated camera names of the dataset (``front`` or ``front,wrist``)."""
    from lang2policy.vla.spec.schema import CAMERAS

    names = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = [name for name in names if name not in CAMERAS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"cameras must be some of {', '.join(CAMERAS)}, got {value[:60]!r}"
        )
    return names


def _rate(value: str) -> float:
    """A positive learning rate."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a number") from None
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"{number} is not a learning rate (0 < lr < 1)")
    return number


def _add_foreign_arguments(vla: argparse.ArgumentParser) -> None:
    """Datasets recorded elsewhere: LeRobot's cameras and units (``ForeignData``)."""
    vla.add_argument("--cameras", type=_cameras, default=None,
                     help="cameras the network reads, comma-separated (default: the design's)")
    vla.add_argument("--image-size", type=_positive, metavar="PX",
                     help="fit every camera's frames to this square (centre crop, then area "
                     f"resize); default: square frames as recorded, others {IMAGE_SIZE} px")
    vla.add_argument("--calibration", type=Path, metavar="FILE",
                     help="a LeRobot-recorded dataset's arm calibration (lerobot-calibrate's "
                     "JSON, or ours): converts its degrees and gripper 0..100 to our units")
    vla.add_argument("--lerobot-units", choices=("degrees", "range100"), default="degrees",
                     help="LeRobot's body-joint units in that dataset: degrees (use_degrees, "
                     "LeRobot 0.6's default) or -100..100 (range100)")


def add_parser(commands: Any) -> None:
    """Add ``train`` (with its ``vla``, ``rl`` and ``distill`` subcommands) to the
    ``lang2policy`` subparsers."""
    train = commands.add_parser("train", help="train a learned policy from recorded data")
    kinds = train.add_subparsers(dest="train_kind", required=True)
    vla = kinds.add_parser(
        "vla", help="the vision-language-action policy (FiLM CNN + action chunks)",
        description="With no option but --dataset and --out: the network and training of "
        "models/vla-so101-tiny.",
    )  # fmt: skip
    vla.add_argument("--dataset", type=Path, required=True, nargs="+",
                     help="recorded datasets (demonstrations, and scene views), trained on as one")
    vla.add_argument("--out", type=Path, required=True, help="model directory, e.g. models/vla")
    vla.add_argument("--design", choices=DESIGNS, default="shipped",
                     help="shipped (default): models/vla-so101-tiny's network and training, "
                     "which learn from the scene state and task family `record demos` records; "
                     "plain: image features straight into the action head, for datasets "
                     "without them (LeRobot's, teleoperated ones)")
    _add_foreign_arguments(vla)
    recipe = "default: the design's recipe (vla/train/settings.py)"
    vla.add_argument("--steps", type=_positive,
                     help=f"optimiser steps in all ({recipe}; a fine-tuning's is short)")
    vla.add_argument("--batch-size", type=_positive,
                     help=f"frames per process and step ({recipe}); a step trains on this times "
                     "the processes; --resume keeps the saved run's frames a step")
    vla.add_argument("--lr", type=_rate, help=f"peak learning rate of AdamW ({recipe}; a "
                     "fine-tuning's is lower)")
    vla.add_argument("--finetune", type=Path, metavar="MODEL",
                     help="start from this model directory's network, weights and normalisation")
    vla.add_argument("--resume", action="store_true",
                     help="continue OUT's checkpoint.pt (on any number of processes that divides "
                     "its frames a step; --steps: where to end)")
    vla.add_argument(
        "--threads", type=_positive, default=1, help="torch CPU threads (1: best on 2 busy cores)"
    )
    vla.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    cli_types.add_seed(vla, "seed of the initial weights and the batches")
    from lang2policy.commands import train_rl

    train_rl.add_arguments(kinds)


def settings_from_args(args: argparse.Namespace) -> Any:
    """The ``TrainSettings`` the command line asks for: the ``--design``'s recipe (made a short
    run by ``--finetune``), with the options given on top."""
    from lang2policy.vla.train.settings import DESIGNS as RECIPES
    from lang2policy.vla.train.settings import for_finetuning

    if args.finetune is not None and args.resume:
        raise Lang2PolicyError(
            "--finetune and --resume exclude each other: --finetune starts a new run from a "
            "model's weights, --resume continues OUT's checkpoint.pt"
        )
    settings = RECIPES[args.design]
    if args.finetune is not None:
        settings = for_finetuning(settings, _grounds(args.finetune))
    model = settings.model
    if args.cameras:
        model = replace(model, cameras=args.cameras)
    optim = settings.optim if args.lr is None else replace(settings.optim, lr=args.lr)
    return replace(
        settings,
        steps=args.steps or settings.steps,
        batch_size=args.batch_size or settings.batch_size,
        optim=optim,
        model=model,
        seed=args.seed,
        threads=args.threads,
        device=args.device,
        resume=args.resume,
        progress=sys.stderr.isatty(),
        finetune=None if args.finetune is None else str(args.finetune),
    )


def _grounds(model_dir: Path) -> bool:
    """Whether the model in ``model_dir`` grounds image positions (no random shift then); an
    unreadable one is reported when its weights are loaded."""
    try:
        return bool(json.loads((Path(model_dir) / "config.json").read_text()).get("grounding"))
    except (OSError, ValueError, AttributeError):
        return False


def check_data(args: argparse.Namespace, data: Any) -> None:
    """A fresh run of the shipped design learns to see the scene state and holds the look by
    the task family: refuse a dataset without them, saying what to train on it instead."""
    if args.design != "shipped" or args.finetune is not None or args.resume:
        return
    missing = []
    if getattr(data, "environment", None) is None:
        missing.append("the scene state (sim.environment_state)")
    if any(episode.get("family") is None for episode in data.episodes):
        missing.append("each episode's task family")
    if missing:
        raise Lang2PolicyError(
            f"the shipped design learns from {' and '.join(missing)}, which `record demos` "
            f"records and {' '.join(str(path) for path in args.dataset)} does not: train the "
            "plain design on it (--design plain)"
        )


def run(args: argparse.Namespace) -> int:
    """Train; 0 when the run finished, 130 when interrupted (the last checkpoint is kept)."""
    if args.train_kind in ("rl", "distill"):
        from lang2policy.commands import train_rl

        return train_rl.run(args)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch starts its thread pool
    settings = settings_from_args(args)
    from lang2policy.vla.train.distributed import check_launcher

    check_launcher(os.environ)
    try:
        from lang2policy.vla.dataset.combine import ForeignData, load_datasets
    except ImportError as exc:
        raise Lang2PolicyError(f"the demo dataset reader is not available: {exc}") from exc
    from lang2policy.vla.train.run import train_vla

    foreign = ForeignData(args.image_size, args.calibration, args.lerobot_units)
    fresh = args.finetune is None and not args.resume  # else the model's own cameras are read
    cameras = args.cameras or (settings.model.cameras if fresh else None)
    data = load_datasets(args.dataset, cameras, foreign=foreign)
    check_data(args, data)
    source = {
        "finetuned_from": None if args.finetune is None else str(args.finetune),
        "dataset": " ".join(str(path) for path in args.dataset),
        "dataset_episodes": len(data.episodes),
        "command": shlex.join(["lang2policy", *sys.argv[1:]]),
    }
    try:
        summary = train_vla(data, args.out, settings, source=source)
    except KeyboardInterrupt:
        print(
            f"lang2policy train vla: interrupted; continue from the last checkpoint with "
            f"--resume --out {args.out}",
            file=sys.stderr,
        )
        return 130
    if summary:  # rank 0 of a distributed run, or a plain run
        print(format_summary(summary, args.out))
    return 0


def format_summary(summary: dict[str, Any], out: Path) -> str:
    """The end of a run in three lines."""
    loss, val = summary.get("final_train_loss"), summary.get("final_val_loss")
    val_text = f", validation {val:.4f}" if val is not None else ""
    loss_text = f"{loss:.4f}" if loss is not None else "n/a"
    return (
        f"trained {summary['steps']} steps in {summary['wall_time_s']} s "
        f"({summary['samples_per_s']} samples/s)\n"
        f"final L1 loss: train {loss_text}{val_text}\n"
        f"model: {out} (config.json, model.safetensors, normalization.json)"
    )
