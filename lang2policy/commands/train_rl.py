"""``lang2policy train rl``: a goal-conditioned policy for one task family, trained with PPO.

    lang2policy train rl --family reach --out models/rl-reach-so101 [--steps 1500000]
    lang2policy train rl --family reach --out models/rl-reach-so101 --resume   # continue

The run shows a progress bar (return, success, steps/s), checkpoints every
``--checkpoint-every`` steps, and at the end writes the numpy policy, ``curve.json``,
``learning_curve.png``, an evaluation on held-out goals (``eval.json``, ``eval.mp4``) and a
model card (``README.md``) into ``--out``. ``lang2policy.rl`` does the work.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError


def _whole(value: str) -> int:
    try:
        number = int(float(value)) if "e" in value.lower() else int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} must be at least 1")
    return number


def add_arguments(kinds: Any) -> None:
    """Add the ``rl`` subcommand to ``train``'s subparsers."""
    from lang2policy.rl.families import FAMILIES

    rl = kinds.add_parser("rl", help="a goal-conditioned RL policy on a family's reward (PPO)")
    rl.add_argument("--family", required=True, choices=list(FAMILIES),
                    help="the task family the policy serves")
    rl.add_argument("--out", type=Path, required=True, help="model directory")
    rl.add_argument("--steps", type=_whole, default=1_000_000, help="environment steps in all")
    rl.add_argument("--envs", type=_whole, default=8, help="environments stepped together")
    rl.add_argument("--hidden", type=_whole, default=64, help="units per hidden layer (2)")
    rl.add_argument("--checkpoint-every", type=_whole, default=100_000)
    rl.add_argument("--resume", action="store_true", help="continue OUT/checkpoint")
    rl.add_argument("--eval-episodes", type=_whole, default=50,
                    help="held-out goals the finished policy is evaluated on")
    rl.add_argument("--no-video", action="store_true", help="no evaluation video")
    rl.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli_types.add_seed(rl, "seed of the weights and of the training goals")


def _command(args: argparse.Namespace) -> str:
    """The command that reproduces this run (for the model card)."""
    words = ["lang2policy", "train", "rl", "--family", args.family, "--out", str(args.out),
             "--steps", str(args.steps), "--envs", str(args.envs), "--hidden", str(args.hidden),
             "--seed", str(args.seed)]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    """Train, evaluate, write the model card; 130 when interrupted (checkpoint kept)."""
    from lang2policy.rl.card import write_card
    from lang2policy.rl.evaluate import evaluate
    from lang2policy.rl.policy_file import load_policy
    from lang2policy.rl.train import TrainConfig, train

    config = TrainConfig(family=args.family, steps=args.steps, envs=args.envs, seed=args.seed,
                         hidden=args.hidden, checkpoint_every=args.checkpoint_every)
    try:
        summary = train(config, args.out, resume=args.resume, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"lang2policy train rl: interrupted; continue with --resume --out {args.out}",
              file=sys.stderr)
        return 130
    except FileNotFoundError as exc:
        raise Lang2PolicyError(str(exc)) from None
    policy = load_policy(args.out)
    video = None if args.no_video else args.out / "eval.mp4"
    result = evaluate(policy, episodes=args.eval_episodes, video=video)
    command = _command(args)
    write_card(args.out, policy, summary, result, command)
    print(f"trained {summary['timesteps']} steps in {summary['train_seconds']} s "
          f"({summary['steps_per_second']} steps/s)\n"
          f"held-out goals: {result['successes']}/{result['episodes']} succeeded"
          + (f", {result['seconds_to_success']} s to success on average"
             if result["seconds_to_success"] is not None else "") +
          f"\nmodel: {args.out} (policy.npz, policy.json, README.md, learning_curve.png"
          + (", eval.mp4)" if video else ")"))
    return 0
