"""``lang2policy train vla``: train the VLA policy on a recorded demonstration dataset.
(``lang2policy train rl`` is in ``train_rl.py``.)

    lang2policy train vla --dataset data/demos --out models/vla-pick [--steps 10000]
    lang2policy train vla --finetune models/vla-so101-tiny --dataset data/corrections-lift \
        --out models/vla-corrected [--steps 300 --lr 1e-4]    # from a model, on corrections
    torchrun --nproc_per_node 4 -m lang2policy.cli train vla ...   # data-parallel on 4 GPUs
    lang2policy train vla --dataset ~/.cache/huggingface/lerobot/me/so101_pick --cameras front \
        --calibration ~/.cache/huggingface/lerobot/calibration/robots/so_follower/arm.json \
        --out models/vla-from-lerobot       # a dataset lerobot-record wrote (640x480, degrees)

Arguments are parsed here; ``lang2policy.vla.train`` does the work. Heavy imports (torch, the
dataset reader, the simulation for closed-loop evaluation) happen only when the command runs.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.schema import IMAGE_SIZE

FRESH_DEFAULTS = {"steps": 10_000, "lr": 3e-4, "warmup": 500}
FINETUNE_DEFAULTS = {"steps": 300, "lr": 1e-4, "warmup": 30}  # a nudge, not a new training


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


def _stages(value: str) -> tuple[int, ...]:
    """Comma-separated conv stage numbers (``1`` or ``0,1``); the model checks their range."""
    return tuple(_count(part.strip()) for part in value.split(",") if part.strip())


def _cameras(value: str) -> tuple[str, ...]:
    """Comma-separated camera names of the dataset (``front`` or ``front,wrist``)."""
    from lang2policy.vla.schema import CAMERAS

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


def _add_bottleneck_arguments(vla: argparse.ArgumentParser) -> None:
    """The network's shape and the perception/motor bottleneck's training (issue 17)."""
    vla.add_argument("--head-reads", choices=("features", "scene"), default="features",
                     help="what the action head reads: the image features and scene prediction, "
                     "or only the state, the words and the scene state (a bottleneck)")
    vla.add_argument("--fine-keypoints", type=_stages, default=(),
                     help="earlier conv stages that give keypoints too, e.g. 1 (24 x 24 at 96 px)")
    vla.add_argument("--motor-batch", type=_count, default=0,
                     help="--head-reads scene: image-free frames per step for the action head")
    vla.add_argument("--motor-steps", type=_count, default=0,
                     help="--head-reads scene: image-free steps fitting the action head first")
    vla.add_argument("--motor-lr", type=_rate, default=1e-3, help="their peak learning rate")
    vla.add_argument("--head-layers", type=_positive, default=2,
                     help="hidden layers of the action head (512 wide)")
    vla.add_argument("--slots", action="store_true",
                     help="give the instruction's block and bowl colour and side as one-hot "
                     "slots beside its MiniLM embedding")
    vla.add_argument("--grounding", action="store_true",
                     help="heatmaps of the named block and the goal in the front camera, taught "
                     "by their recorded positions (needs --shift 0)")
    vla.add_argument("--grounding-state", type=_stages, default=(),
                     help="--grounding: state dimensions its scene head reads too, e.g. 5 (the "
                     "gripper opening); none by default")
    vla.add_argument("--grounding-weight", type=float, default=1.0,
                     help="weight of the heatmaps' loss beside the action L1")
    vla.add_argument("--scene-noise", type=float, default=0.1,
                     help="std of the noise added to the recorded scene state the action head "
                     "reads in training (normalised units; 0: none)")
    vla.add_argument("--scene-latch", action="store_true",
                     help="look once, then act (needs --head-reads scene): the action head "
                     "reads the scene estimated on the episode's first frame, held")
    vla.add_argument("--keyframes", action="store_true",
                     help="--scene-latch: the action head also reads the held scene lifted into "
                     "joints by the arm's IK (above the block, its grasp, the drop, the push)")
    vla.add_argument("--keyframe-anchors", action="store_true",
                     help="--keyframes: the action head picks among the keyframes and adds a "
                     "residual, so it reaches a keyframe's joints exactly")
    vla.add_argument("--perception-words", choices=("sentence", "slots"), default="sentence",
                     help="what the perception part reads of the instruction: the whole "
                     "sentence vector, or only its colour and side slots (needs --slots)")
    vla.add_argument("--cameras", type=_cameras, default=None,
                     help="cameras the network reads, comma-separated (default: front,wrist)")


def _add_foreign_arguments(vla: argparse.ArgumentParser) -> None:
    """Datasets recorded elsewhere: LeRobot's cameras and units (``ForeignData``)."""
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
    """Add ``train`` (with its ``vla`` subcommand) to the ``lang2policy`` subparsers."""
    train = commands.add_parser("train", help="train a learned policy from recorded data")
    kinds = train.add_subparsers(dest="train_kind", required=True)
    vla = kinds.add_parser(
        "vla", help="the vision-language-action policy (FiLM CNN + action chunks)"
    )
    vla.add_argument("--dataset", type=Path, required=True, nargs="+",
                     help="recorded datasets (demonstrations, and scene views), trained on as one")
    vla.add_argument("--out", type=Path, required=True, help="model directory, e.g. models/vla")
    _add_foreign_arguments(vla)
    vla.add_argument("--steps", type=_positive, help="optimiser steps in all (10000; "
                     f"fine-tuning {FINETUNE_DEFAULTS['steps']})")
    vla.add_argument("--batch-size", type=_positive, default=64, help="per process")
    vla.add_argument("--lr", type=_rate, help="peak learning rate (AdamW; 3e-4, fine-tuning "
                     f"{FINETUNE_DEFAULTS['lr']:g})")
    vla.add_argument("--warmup", type=_count, help="linear warm-up steps (500; fine-tuning "
                     f"{FINETUNE_DEFAULTS['warmup']})")
    vla.add_argument("--finetune", type=Path, metavar="MODEL",
                     help="start from this model directory's weights and normalisation")
    vla.add_argument("--mix", type=float, default=0.0,
                     help="fraction of training frames from the first --dataset (0: as they come)")
    vla.add_argument("--from-first-correction", action="store_true",
                     help="corrected datasets (record corrections): each episode from its "
                     "first correction on, as HG-DAgger trains on the expert's interventions")
    vla.add_argument("--ema", type=float, default=0.0, help="EMA decay of the weights (0: off)")
    vla.add_argument(
        "--threads", type=_positive, default=1, help="torch CPU threads (1: best on 2 busy cores)"
    )
    vla.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    vla.add_argument("--resume", action="store_true", help="continue OUT's checkpoint.pt")
    vla.add_argument("--eval-every", type=_count, default=0, help="closed-loop eval period")
    vla.add_argument(
        "--eval-episodes", type=_positive, default=12, help="episodes per eval (all families)"
    )
    vla.add_argument("--val-episodes", type=_count, default=2, help="held-out episodes")
    vla.add_argument("--val-every", type=_count, default=500, help="validation loss period")
    vla.add_argument("--checkpoint-every", type=_positive, default=1000)
    vla.add_argument("--shift", type=_count, default=4, help="random-shift pixels (0: off)")
    vla.add_argument("--jitter", type=float, default=0.0, help="brightness/contrast jitter")
    vla.add_argument("--action-mode", choices=("delta", "absolute"), default="delta",
                     help="predict actions relative to the frame's state (delta) or absolute")
    vla.add_argument("--aux-weight", type=float, default=1.0,
                     help="weight of the scene-state auxiliary loss (0: no auxiliary head)")
    vla.add_argument("--scene-forcing", type=float, default=0.5,
                     help="fraction of samples whose action head reads the recorded scene state")
    vla.add_argument("--scene-forcing-from", type=_count, default=0,
                     help="the step at which scene forcing starts (before it: none)")
    _add_bottleneck_arguments(vla)
    vla.add_argument("--view-repeat", type=_positive, default=1,
                     help="draw each scene view this many times per epoch")
    vla.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli_types.add_seed(vla, "seed of the initial weights, the batches and the evaluation")
    from lang2policy.commands import train_rl

    train_rl.add_arguments(kinds)


def settings_from_args(args: argparse.Namespace) -> Any:
    """The ``TrainSettings`` the command line asks for."""
    from lang2policy.vla.augment import AugmentConfig
    from lang2policy.vla.train import TrainSettings
    from lang2policy.vla.train_loop import OptimConfig

    if args.finetune is not None and args.resume:
        raise Lang2PolicyError(
            "--finetune and --resume exclude each other: --finetune starts a new run from a "
            "model's weights, --resume continues OUT's checkpoint.pt"
        )
    defaults = FINETUNE_DEFAULTS if args.finetune is not None else FRESH_DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if not 0.0 <= args.ema < 1.0:
        raise Lang2PolicyError(f"--ema must be in [0, 1), got {args.ema}")
    if not 0.0 <= args.aux_weight <= 100.0:
        raise Lang2PolicyError(f"--aux-weight must be in [0, 100], got {args.aux_weight}")
    if not 0.0 <= args.scene_forcing <= 1.0:
        raise Lang2PolicyError(f"--scene-forcing must be in [0, 1], got {args.scene_forcing}")
    if not 0.0 <= args.scene_noise <= 10.0:
        raise Lang2PolicyError(f"--scene-noise must be in [0, 10], got {args.scene_noise}")
    if not 0.0 <= args.grounding_weight <= 100.0:
        raise Lang2PolicyError(
            f"--grounding-weight must be in [0, 100], got {args.grounding_weight}"
        )
    optim = OptimConfig(
        lr=args.lr, warmup_steps=args.warmup, ema_decay=args.ema, aux_weight=args.aux_weight,
        scene_forcing=args.scene_forcing, scene_forcing_from=args.scene_forcing_from,
        scene_noise=args.scene_noise,
        motor_batch=args.motor_batch, motor_steps=args.motor_steps, motor_lr=args.motor_lr,
        grounding_weight=args.grounding_weight,
    )  # fmt: skip
    return TrainSettings(
        steps=args.steps,
        batch_size=args.batch_size,
        optim=optim,
        action_mode=args.action_mode,
        view_repeat=args.view_repeat,
        auxiliary=args.aux_weight > 0,
        model=model_config_from_args(args),
        augment=AugmentConfig(shift=args.shift, brightness=args.jitter, contrast=args.jitter),
        val_episodes=args.val_episodes,
        val_every=args.val_every,
        eval_every=args.eval_every,
        checkpoint_every=args.checkpoint_every,
        seed=args.seed,
        threads=args.threads,
        device=args.device,
        resume=args.resume,
        progress=not args.no_progress,
        finetune=None if args.finetune is None else str(args.finetune),
        mix=args.mix,
    )


def model_config_from_args(args: argparse.Namespace) -> Any:
    """The network's config the command line asks for (the dataset fills in its sizes)."""
    from lang2policy.vla.language import MINILM_SLOTS, language_dim
    from lang2policy.vla.model import VLAConfig

    chosen: dict[str, Any] = {}
    if args.slots:
        chosen.update(language_model=MINILM_SLOTS, language_dim=language_dim(MINILM_SLOTS))
    if args.cameras:
        chosen["cameras"] = args.cameras
    return VLAConfig(
        head_reads=args.head_reads, fine_keypoints=args.fine_keypoints,
        head_layers=args.head_layers, grounding=args.grounding,
        grounding_state=args.grounding_state, scene_latch=args.scene_latch,
        perception_words=args.perception_words, keyframes=args.keyframes,
        keyframe_anchors=args.keyframe_anchors, **chosen,
    )  # fmt: skip


def closed_loop_evaluator(args: argparse.Namespace, data: Any) -> Any:
    """``evaluate(policy) -> dict``: about ``--eval-episodes`` simulated episodes spread over
    the task families the dataset holds. None when not asked for, or when the rollout module
    is not available (training then goes on with the validation loss alone)."""
    if args.eval_every <= 0:
        return None
    try:
        from lang2policy.vla.rollout import evaluate_policy
        from lang2policy.vla.tasks import FAMILIES
    except ImportError as exc:
        print(
            f"lang2policy train vla: closed-loop evaluation is not available ({exc}); "
            "training with the validation loss only",
            file=sys.stderr,
        )
        return None
    present = {str(episode.get("family")) for episode in data.episodes}
    families = tuple(f for f in FAMILIES if f in present) or tuple(FAMILIES)
    per_family = max(1, math.ceil(args.eval_episodes / len(families)))

    def evaluate(policy: Any) -> dict[str, Any]:
        return evaluate_policy(policy, per_family=per_family, seed=args.seed, families=families)

    return evaluate


def run(args: argparse.Namespace) -> int:
    """Train; 0 when the run finished, 130 when interrupted (the last checkpoint is kept)."""
    if args.train_kind in ("rl", "distill"):
        from lang2policy.commands import train_rl

        return train_rl.run(args)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch starts its thread pool
    settings = settings_from_args(args)
    try:
        from lang2policy.vla.dataset.combine import ForeignData, load_datasets
    except ImportError as exc:
        raise Lang2PolicyError(f"the demo dataset reader is not available: {exc}") from exc
    from lang2policy.vla.train import train_vla

    foreign = ForeignData(args.image_size, args.calibration, args.lerobot_units)
    data = load_datasets(
        args.dataset,
        args.cameras,
        from_first_correction=args.from_first_correction,
        foreign=foreign,
    )
    source = {
        "finetuned_from": None if args.finetune is None else str(args.finetune),
        "dataset": " ".join(str(path) for path in args.dataset),
        "dataset_episodes": len(data.episodes),
        "command": shlex.join(["lang2policy", *sys.argv[1:]]),
    }
    try:
        summary = train_vla(
            data, args.out, settings, evaluate=closed_loop_evaluator(args, data), source=source
        )
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
