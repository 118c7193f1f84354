"""``lang2policy train rl`` and ``train distill``: a goal-conditioned policy for one task family,
trained with PPO (``rl``) or distilled from the family's expert with DAgger (``distill``).

    lang2policy train rl --family reach --out models/rl-reach-so101   # the shipped recipe
    lang2policy train rl --family reach --out models/rl-reach-so101 --resume   # continue
    lang2policy train distill --family lift --out models/rl-lift-distilled-so101
    lang2policy train rl --family lift --out models/rl-lift-so101   # fine-tunes the above
    lang2policy train rl --family place --init models/rl-place-distilled-so101 \
        --out models/rl-place-finetuned-so101 --steps 200000 --learning-rate 1e-4

With no other option, ``train rl`` and ``train distill`` train the recipe of the family's
shipped policy (``lang2policy.rl.recipes``).

The run shows a progress bar (return, success, steps/s), checkpoints every
``--checkpoint-every`` steps, and at the end writes the numpy policy, ``curve.json``,
``learning_curve.png``, an evaluation on held-out goals (``eval.json``, ``eval.mp4``) and a
model card (``README.md``) into ``--out``. ``lang2policy.rl`` does the work.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.parallel.executor import EXECUTORS, Executor


def add_arguments(kinds: Any) -> None:
    """Add the ``rl`` subcommand to ``train``'s subparsers."""
    from lang2policy.rl.families import FAMILIES

    rl = kinds.add_parser(
        "rl", help="a goal-conditioned RL policy on a family's reward (PPO)",
        description="With no option but --family and --out: the recipe of the family's shipped "
        "policy (models/rl-FAMILY-so101; lang2policy.rl.recipes).",
    )  # fmt: skip
    rl.add_argument("--family", required=True, choices=list(FAMILIES),
                    help="the task family the policy serves")
    rl.add_argument("--out", type=Path, required=True, help="model directory")
    whole = cli_types.positive_int
    recipe = "default: the family's recipe (lang2policy.rl.recipes)"
    rl.add_argument("--steps", type=whole, help=f"environment steps in all ({recipe})")
    rl.add_argument("--envs", type=whole, help=f"environments stepped together ({recipe})")
    rl.add_argument("--hidden", type=whole,
                    help=f"units per hidden layer (2; {recipe}, or the --init policy's)")
    rl.add_argument("--checkpoint-every", type=whole, help=f"steps between checkpoints ({recipe})")
    rl.add_argument("--resume", action="store_true", help="continue OUT/checkpoint")
    rl.add_argument("--init", type=Path, default=None,
                    help="fine-tune this policy directory (a distilled one) instead of starting "
                         f"from random weights ({recipe})")
    rl.add_argument("--learning-rate", type=cli_types.positive_float,
                    help=f"PPO's learning rate ({recipe})")
    rl.add_argument("--eval-episodes", type=whole, default=50,
                    help="held-out goals the finished policy is evaluated on")
    rl.add_argument("--no-video", action="store_true", help="no evaluation video")
    rl.add_argument("--no-progress", action="store_true", help="no progress bar")
    rl.add_argument("--executor", choices=EXECUTORS, default="local",
                    help="where the --envs environments run: local (in this process, the "
                    "default: fastest on a few cores) or ray (a Ray actor each, on a local Ray "
                    "cluster bound to 127.0.0.1 or the one at --ray-address; the same "
                    "weights; needs the ray extra)")  # fmt: skip
    rl.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="with --executor ray: an existing Ray cluster (HOST:PORT, 'auto' or "
                    "ray://HOST:PORT) instead of a local one")  # fmt: skip
    cli_types.add_seed(rl, "seed of the weights and of the training goals")
    _add_distill(kinds)


def _add_distill(kinds: Any) -> None:
    from lang2policy.rl.dagger import EXPERT_KINDS
    from lang2policy.rl.families import FAMILIES

    distill = kinds.add_parser(
        "distill", help="a goal-conditioned policy imitating the family's expert (DAgger)",
        description="With no option but --family and --out: the recipe of the family's shipped "
        "distilled policy (models/rl-FAMILY-distilled-so101; lang2policy.rl.recipes).",
    )  # fmt: skip
    distill.add_argument("--family", required=True, choices=list(FAMILIES),
                         help="the task family the policy serves")
    recipe = "default: the family's recipe (lang2policy.rl.recipes)"
    distill.add_argument("--expert", choices=EXPERT_KINDS,
                         help=f"the family's scripted expert (lift, place) or the MPC (any; "
                         f"{recipe})")
    distill.add_argument("--out", type=Path, required=True, help="model directory")
    distill.add_argument("--iterations", type=cli_types.positive_int,
                         help=f"DAgger iterations, the first one the expert drives ({recipe})")
    distill.add_argument("--episodes", type=cli_types.positive_int,
                         help=f"episodes per iteration ({recipe})")
    distill.add_argument("--hidden", type=cli_types.positive_int,
                         help=f"units per hidden layer (2; {recipe})")
    distill.add_argument("--epochs", type=cli_types.positive_int,
                         help=f"passes over the data after each iteration ({recipe})")
    distill.add_argument("--eval-episodes", type=cli_types.positive_int, default=50,
                         help="held-out goals the finished policy is evaluated on")
    distill.add_argument("--no-video", action="store_true", help="no evaluation video")
    distill.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli_types.add_seed(distill, "seed of the weights and of the training goals (below 100)")


def _command(kind: str, out: Path, config: Any) -> str:
    """The command that reproduces this run (for the model card), every setting spelled out."""
    words = ["lang2policy", "train", kind, "--family", config.family, "--out", str(out)]
    names = ("steps", "envs") if kind == "rl" else ("expert", "iterations", "episodes", "epochs")
    for name in (*names, "hidden", "seed"):
        words += [f"--{name}", str(getattr(config, name))]
    if kind == "rl" and config.init:
        words += ["--init", config.init, "--learning-rate", f"{config.learning_rate:g}"]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    """Train (or distil), evaluate, write the model card; 130 when interrupted."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # torchrun, accelerate launch
        raise Lang2PolicyError(
            f"train {args.train_kind} runs in one process: its cost is stepping the "
            "simulations, not the small network's gradients, so data-parallel processes would "
            "each train a policy of their own into the same --out. Start it without torchrun "
            "or accelerate launch (train rl steps --envs environments together)"
        )
    trained = _train(args) if args.train_kind == "rl" else _distill(args)
    if trained is None:
        return 130
    summary, config = trained
    _evaluate_and_card(args, summary, _command(args.train_kind, args.out, config))
    return 0


def _distill(args: argparse.Namespace) -> tuple[dict, Any] | None:
    from lang2policy.rl.dagger import distill
    from lang2policy.rl.recipes import distill_config

    config = distill_config(args.family, expert=args.expert, iterations=args.iterations,
                            episodes=args.episodes, seed=args.seed, hidden=args.hidden,
                            epochs=args.epochs)
    try:
        return distill(config, args.out, progress=not args.no_progress), config
    except KeyboardInterrupt:
        print("lang2policy train distill: interrupted; nothing written", file=sys.stderr)
        return None


def _train(args: argparse.Namespace) -> tuple[dict, Any] | None:
    from lang2policy.rl.recipes import ppo_config
    from lang2policy.rl.train import train

    if args.init is not None and args.resume:
        raise Lang2PolicyError("--init starts a run and --resume continues one: give one")
    executor = Executor(args.executor, 1, args.ray_address)  # a bad combination is refused
    config = ppo_config(args.family, steps=args.steps, envs=args.envs, seed=args.seed,
                        hidden=args.hidden, checkpoint_every=args.checkpoint_every,
                        init=None if args.init is None else str(args.init),
                        learning_rate=args.learning_rate)
    try:
        summary = train(config, args.out, resume=args.resume, progress=not args.no_progress,
                        executor=executor)
    except KeyboardInterrupt:
        print(f"lang2policy train rl: interrupted; continue with --resume --out {args.out}",
              file=sys.stderr)
        return None
    except FileNotFoundError as exc:
        raise Lang2PolicyError(str(exc)) from None
    return summary, config


def _evaluate_and_card(args: argparse.Namespace, summary: dict, command: str) -> None:
    """Evaluate the written policy on held-out goals, write its card, say where it is."""
    from lang2policy.rl.card import write_card
    from lang2policy.rl.evaluate import evaluate
    from lang2policy.rl.policy_file import load_policy

    policy = load_policy(args.out)
    video = None if args.no_video else args.out / "eval.mp4"
    result = evaluate(policy, episodes=args.eval_episodes, video=video)
    write_card(args.out, policy, summary, result, command)
    print(f"trained on {summary['timesteps']} steps in {summary['train_seconds']} s "
          f"({summary['steps_per_second']} steps/s)\n"
          f"held-out goals: {result['successes']}/{result['episodes']} succeeded"
          + (f", {result['seconds_to_success']} s to success on average"
             if result["seconds_to_success"] is not None else "") +
          f"\nmodel: {args.out} (policy.npz, policy.json, README.md, learning_curve.png"
          + (", eval.mp4)" if video else ")"))
