"""``lang2policy train rl`` and ``train distill``: a goal-conditioned policy for one task family,
trained with PPO (``rl``) or distilled from the family's expert with DAgger (``distill``).

    lang2policy train rl --family reach --out models/rl-reach-so101 [--steps 1500000]
    lang2policy train rl --family reach --out models/rl-reach-so101 --resume   # continue
    lang2policy train distill --family lift --out models/rl-lift-distilled-so101
    lang2policy train rl --family place --init models/rl-place-distilled-so101 \
        --out models/rl-place-finetuned-so101 --steps 200000   # RL fine-tuning

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


def add_arguments(kinds: Any) -> None:
    """Add the ``rl`` subcommand to ``train``'s subparsers."""
    from lang2policy.rl.families import FAMILIES

    rl = kinds.add_parser("rl", help="a goal-conditioned RL policy on a family's reward (PPO)")
    rl.add_argument("--family", required=True, choices=list(FAMILIES),
                    help="the task family the policy serves")
    rl.add_argument("--out", type=Path, required=True, help="model directory")
    whole = cli_types.positive_int
    rl.add_argument("--steps", type=whole, default=1_000_000, help="environment steps in all")
    rl.add_argument("--envs", type=whole, default=8, help="environments stepped together")
    rl.add_argument("--hidden", type=whole, default=None,
                    help="units per hidden layer (2); default 64, or the --init policy's")
    rl.add_argument("--checkpoint-every", type=whole, default=100_000)
    rl.add_argument("--resume", action="store_true", help="continue OUT/checkpoint")
    rl.add_argument("--init", type=Path, default=None,
                    help="fine-tune this policy directory (a distilled one) instead of starting "
                         "from random weights")
    rl.add_argument("--learning-rate", type=cli_types.positive_float, default=3e-4,
                    help="PPO's learning rate (lower it for fine-tuning, e.g. 1e-4)")
    rl.add_argument("--log-std", type=log_std, default=None,
                    help="log std of the actions explored at the start (default: the family's; "
                         "-1.6 with --init)")
    rl.add_argument("--eval-episodes", type=whole, default=50,
                    help="held-out goals the finished policy is evaluated on")
    rl.add_argument("--no-video", action="store_true", help="no evaluation video")
    rl.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli_types.add_seed(rl, "seed of the weights and of the training goals")
    _add_distill(kinds)


def log_std(value: str) -> float:
    """``--log-std``: a number from -5 to 1 (action std 0.007 to 2.7)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a number") from None
    if not -5.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"{value[:40]} is not from -5 to 1")
    return number


def _add_distill(kinds: Any) -> None:
    from lang2policy.rl.dagger import EXPERT_KINDS
    from lang2policy.rl.families import FAMILIES

    distill = kinds.add_parser("distill", help="a goal-conditioned policy imitating the "
                               "family's expert (DAgger)")
    distill.add_argument("--family", required=True, choices=list(FAMILIES),
                         help="the task family the policy serves")
    distill.add_argument("--expert", choices=EXPERT_KINDS, default="scripted",
                         help="the family's scripted expert (lift, place) or the MPC (any)")
    distill.add_argument("--out", type=Path, required=True, help="model directory")
    distill.add_argument("--iterations", type=cli_types.positive_int, default=8,
                         help="DAgger iterations (the first one the expert drives)")
    distill.add_argument("--episodes", type=cli_types.positive_int, default=40,
                         help="episodes per iteration")
    distill.add_argument("--hidden", type=cli_types.positive_int, default=64,
                         help="units per hidden layer (2)")
    distill.add_argument("--epochs", type=cli_types.positive_int, default=20,
                         help="passes over the data after each iteration")
    distill.add_argument("--eval-episodes", type=cli_types.positive_int, default=50,
                         help="held-out goals the finished policy is evaluated on")
    distill.add_argument("--no-video", action="store_true", help="no evaluation video")
    distill.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli_types.add_seed(distill, "seed of the weights and of the training goals (below 100)")


def _command(args: argparse.Namespace) -> str:
    """The command that reproduces this run (for the model card)."""
    words = ["lang2policy", "train", args.train_kind, "--family", args.family,
             "--out", str(args.out)]
    names = (("steps", "envs") if args.train_kind == "rl"
             else ("expert", "iterations", "episodes", "epochs"))
    for name in (*names, "hidden", "seed"):
        words += [f"--{name}", str(getattr(args, name))]
    if args.train_kind == "rl" and args.init is not None:
        words += ["--init", str(args.init), "--learning-rate", f"{args.learning_rate:g}"]
    if args.train_kind == "rl" and args.log_std is not None:
        words += ["--log-std", f"{args.log_std:g}"]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    """Train (or distil), evaluate, write the model card; 130 when interrupted."""
    summary = _train(args) if args.train_kind == "rl" else _distill(args)
    if summary is None:
        return 130
    _evaluate_and_card(args, summary)
    return 0


def _distill(args: argparse.Namespace) -> dict | None:
    from lang2policy.rl.dagger import DistillConfig, distill

    config = DistillConfig(family=args.family, expert=args.expert, iterations=args.iterations,
                           episodes=args.episodes, seed=args.seed, hidden=args.hidden,
                           epochs=args.epochs)
    try:
        return distill(config, args.out, progress=not args.no_progress)
    except KeyboardInterrupt:
        print("lang2policy train distill: interrupted; nothing written", file=sys.stderr)
        return None


def _train(args: argparse.Namespace) -> dict | None:
    from lang2policy.rl.train import TrainConfig, train

    if args.init is not None and args.resume:
        raise Lang2PolicyError("--init starts a run and --resume continues one: give one")
    if args.hidden is None:
        args.hidden = _hidden_of(args.init) if args.init is not None else 64
    config = TrainConfig(family=args.family, steps=args.steps, envs=args.envs, seed=args.seed,
                         hidden=args.hidden, checkpoint_every=args.checkpoint_every,
                         init=str(args.init or ""), learning_rate=args.learning_rate,
                         log_std=args.log_std)
    try:
        summary = train(config, args.out, resume=args.resume, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"lang2policy train rl: interrupted; continue with --resume --out {args.out}",
              file=sys.stderr)
        return None
    except FileNotFoundError as exc:
        raise Lang2PolicyError(str(exc)) from None
    return summary


def _hidden_of(directory: Path) -> int:
    """The width of the first hidden layer of the policy in ``directory``."""
    from lang2policy.rl.policy_file import load_policy

    return int(load_policy(directory).weights[0].shape[0])


def _evaluate_and_card(args: argparse.Namespace, summary: dict) -> None:
    """Evaluate the written policy on held-out goals, write its card, say where it is."""
    from lang2policy.rl.card import write_card
    from lang2policy.rl.evaluate import evaluate
    from lang2policy.rl.policy_file import load_policy

    policy = load_policy(args.out)
    video = None if args.no_video else args.out / "eval.mp4"
    result = evaluate(policy, episodes=args.eval_episodes, video=video)
    command = _command(args)
    write_card(args.out, policy, summary, result, command)
    print(f"trained on {summary['timesteps']} steps in {summary['train_seconds']} s "
          f"({summary['steps_per_second']} steps/s)\n"
          f"held-out goals: {result['successes']}/{result['episodes']} succeeded"
          + (f", {result['seconds_to_success']} s to success on average"
             if result["seconds_to_success"] is not None else "") +
          f"\nmodel: {args.out} (policy.npz, policy.json, README.md, learning_curve.png"
          + (", eval.mp4)" if video else ")"))
