"""``lang2policy bench vla-corrections``: does fine-tuning on corrected episodes help? (issue
18, item 5: the Yell-At-Your-Robot style result), measured in one run.

1. ``--corrected`` episodes of ``--family`` on training-range layouts: the policy runs closed
   loop while the scripted corrector corrects it in words (``vla.coach.corrected``), written as a
   dataset under ``--out``;
2. fine-tuning from ``--model`` on them (``train_vla`` with ``finetune``: the model's weights
   and normaliser, ``--steps`` at ``--lr``), the new model under ``--out``;
3. the policy before and after, uncorrected, on the same ``--eval`` layouts no training
   episode used (``rollout.evaluation_specs``: seen combinations, unseen combinations and
   unseen phrasings in turn), in this process on one torch thread; ``--eval-seeds`` draws
   ``--eval`` such layouts per seed, to see whether a gain holds beyond one set of scenes.

The report gives both success rates, their difference in points, N and what the recording and
the fine-tuning cost. The corrector's own success (the policy *with* corrections) is reported
too: it bounds what imitating the corrected executions can teach.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

from lang2policy.errors import ConfigError

GOAL_POINTS = 15.0  # the acceptance: success up by at least 15 points


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=Path("models/vla-so101-tiny"))
    parser.add_argument("--family", default="lift", help="lift or push (the scripted person's)")
    parser.add_argument("--corrected", type=int, default=20, help="corrected episodes (N)")
    parser.add_argument("--eval", type=int, default=15, help="evaluation episodes, unseen layouts")
    parser.add_argument("--steps", type=int, default=300, help="fine-tuning steps")
    parser.add_argument("--lr", type=float, default=1e-4, help="fine-tuning learning rate")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("data/vla-corrections"),
                        help="new directory for the corrected dataset and the fine-tuned model")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the evaluation layouts (training: seed + 1)")
    parser.add_argument("--eval-seeds", type=int, nargs="+", default=None,
                        help="evaluate on --eval layouts of each of these seeds (default: "
                        "--seed); the corrected episodes stay on --seed + 1's layouts")
    parser.add_argument("--replay", type=Path, nargs="*", default=[],
                        help="datasets the model was trained on, replayed beside the corrections")
    parser.add_argument("--mix", type=float, default=0.5,
                        help="with --replay: the fraction of frames from the corrections")
    parser.add_argument("--from-first-correction", action="store_true",
                        help="fine-tune on each corrected episode from its first correction "
                        "on (HG-DAgger's intervention data; episodes nobody corrected whole)")
    parser.add_argument("--corrections", type=Path, default=None,
                        help="fine-tune on this corrected dataset, recorded before by this "
                        "bench (same --model, --family, --start, --seed), instead of "
                        "recording --corrected new episodes")
    parser.add_argument("--start", default="rest",
                        help="where the arm starts each episode, corrected and evaluated: rest "
                        "(as in the demonstrations) or away (above the table, as after an "
                        "earlier skill)")


def _check(args: argparse.Namespace) -> None:
    from lang2policy.vla.coach.corrector import FAMILIES
    from lang2policy.vla.eval.start_pose import STARTS

    if args.family not in FAMILIES:
        raise ConfigError(f"--family must be one of {FAMILIES}, got {args.family!r}")
    if args.start not in STARTS:
        raise ConfigError(f"--start must be one of {STARTS}, got {args.start!r}")
    if min(args.corrected, args.eval, args.steps, args.batch_size) < 1 or not 0 < args.lr < 1:
        raise ConfigError("--corrected, --eval, --steps, --batch-size must be >= 1; 0 < --lr < 1")
    if args.eval_seeds is not None and len(set(args.eval_seeds)) != len(args.eval_seeds):
        raise ConfigError(f"--eval-seeds: each seed once, got {args.eval_seeds}")
    if not 0 < args.mix <= 1:
        raise ConfigError(f"--mix must be in (0, 1], got {args.mix}")
    missing = [str(path) for path in args.replay if not (path / "meta" / "info.json").exists()]
    if missing:
        raise ConfigError(f"--replay: not a dataset directory (no meta/info.json): {missing}")
    if args.corrections is not None and not (args.corrections / "meta" / "info.json").exists():
        raise ConfigError(f"--corrections: not a dataset directory: {args.corrections}")
    if args.out.exists():
        raise ConfigError(f"{args.out} exists; the bench writes a new directory (--out)")


def evaluation_layouts(family: str, episodes: int, seeds: list[int]) -> tuple[list, list[int]]:
    """``episodes`` unseen layouts of ``family`` per seed (seen combinations, unseen
    combinations and unseen phrasings in turn), and the seed each one was drawn with."""
    from lang2policy.vla.eval.rollout import evaluation_specs

    per_split, specs, drawn_with = math.ceil(episodes / 3), [], []
    for seed in seeds:
        drawn = evaluation_specs((family,), per_split, seed)
        chosen = sorted(drawn, key=lambda s: s.index % per_split)[:episodes]  # splits in turn
        specs += chosen
        drawn_with += [seed] * len(chosen)
    return specs, drawn_with


def _evaluate(
    model: Path, specs: list, label: str, quiet: bool, start: str, seeds: list[int]
) -> list[dict]:
    from lang2policy.vla.eval.rollout import RolloutRunner
    from lang2policy.vla.policy.runtime import VLAPolicy

    policy, runner, results = VLAPolicy.load(model, threads=1), RolloutRunner(start=start), []
    for spec, seed in zip(specs, seeds, strict=True):
        rollout = runner.run(policy, spec)
        results.append({"split": spec.split, "success": rollout.success,
                        "detail": rollout.detail, "seed": seed})
        if not quiet:
            done = sum(r["success"] for r in results)
            verdict = "ok" if rollout.success else "FAIL"
            print(f"[{label}] {len(results)}/{len(specs)} {spec.split}: {verdict} "
                  f"({rollout.detail}); {done}/{len(results)}", file=sys.stderr, flush=True)
    return results


def _recorded(args: argparse.Namespace) -> tuple[Path, dict]:
    """An earlier run's corrected dataset (``--corrections``): its episodes as recorded."""
    from lang2policy.vla.dataset.reader import load_dataset

    data = load_dataset(args.corrections, cameras=[])
    episodes = data.episodes
    if len(episodes) != args.corrected:
        raise ConfigError(
            f"--corrections {args.corrections} holds {len(episodes)} episodes, "
            f"--corrected says {args.corrected}"
        )
    return args.corrections, {
        "episodes": len(episodes),
        "succeeded_with_corrections": sum(bool(e.get("success")) for e in episodes),
        "corrections": sum(int(e.get("corrections", 0)) for e in episodes),
        "frames": len(data),
        "seconds": 0.0,
        "reused": str(args.corrections),
    }


def _record(args: argparse.Namespace) -> tuple[Path, dict]:
    from lang2policy.vla.coach.corrected import record_corrections
    from lang2policy.vla.policy.runtime import VLAPolicy
    from lang2policy.vla.sim.demos import training_specs

    started, path = time.monotonic(), args.out / "corrections"
    specs = training_specs([args.family], args.corrected, args.seed + 1)

    def show(rollout) -> None:
        if not args.json:
            said = ", ".join(text for _, text, _ in rollout.corrections)
            verdict = "ok" if rollout.success else "FAIL"
            print(f"[corrected] {rollout.spec.index + 1}/{len(specs)} {verdict}: {said}",
                  file=sys.stderr, flush=True)

    policy = VLAPolicy.load(args.model, threads=1)
    done = record_corrections(policy, specs, path, progress=show, start=args.start)
    return path, {
        "episodes": len(done),
        "succeeded_with_corrections": sum(r.success for r in done),
        "corrections": sum(len(r.corrections) for r in done),
        "frames": sum(len(r.correction) for r in done),
        "seconds": round(time.monotonic() - started, 1),
    }


def _finetune(args: argparse.Namespace, dataset: Path) -> tuple[Path, dict]:
    from lang2policy.vla.dataset.combine import load_datasets
    from lang2policy.vla.train.augment import AugmentConfig
    from lang2policy.vla.train.loop import OptimConfig
    from lang2policy.vla.train.run import TrainSettings, train_vla

    out = args.out / "model"
    config = json.loads((Path(args.model) / "config.json").read_text())
    shift = 0 if config.get("grounding") else AugmentConfig().shift  # grounding: no shift
    settings = TrainSettings(
        steps=args.steps, batch_size=args.batch_size, val_episodes=1, val_every=args.steps,
        checkpoint_every=args.steps, seed=args.seed, finetune=str(args.model),
        optim=OptimConfig(lr=args.lr, warmup_steps=min(30, args.steps // 10),
                          scene_forcing=0.5),
        progress=not args.json, augment=AugmentConfig(shift=shift),
        mix=args.mix if args.replay else 0.0,
    )  # fmt: skip
    cameras = tuple(config["cameras"])  # the corrections first: --mix counts its frames
    data = load_datasets(
        [dataset, *args.replay], cameras, from_first_correction=args.from_first_correction
    )
    summary = train_vla(data, out, settings, source={"bench": "vla-corrections"})
    keys = ("steps", "wall_time_s", "final_train_loss", "final_val_loss", "episodes")
    return out, {key: summary.get(key) for key in keys}


def run_args(args: argparse.Namespace) -> dict:
    """Record, fine-tune, evaluate before and after; the report."""
    os.environ["OMP_NUM_THREADS"] = "1"
    _check(args)
    started = time.monotonic()
    eval_seeds = args.eval_seeds or [args.seed]
    specs, drawn_with = evaluation_layouts(args.family, args.eval, eval_seeds)
    before = _evaluate(args.model, specs, "before", args.json, args.start, drawn_with)
    dataset, recorded = _record(args) if args.corrections is None else _recorded(args)
    model, tuned = _finetune(args, dataset)
    after = _evaluate(model, specs, "after", args.json, args.start, drawn_with)
    rate_before = sum(r["success"] for r in before) / len(specs)
    rate_after = sum(r["success"] for r in after) / len(specs)
    return {
        "benchmark": "vla-corrections", "family": args.family, "model": str(args.model),
        "corrected_episodes": args.corrected, "eval_episodes": len(specs), "seed": args.seed,
        "eval_seeds": eval_seeds,
        "start": args.start, "from_first_correction": args.from_first_correction,
        "replay": [str(path) for path in args.replay], "mix": args.mix if args.replay else None,
        "before": rate_before, "after": rate_after,
        "points": round(100 * (rate_after - rate_before), 1), "goal_points": GOAL_POINTS,
        "recording": recorded, "finetuning": tuned, "dataset": str(dataset),
        "finetuned_model": str(model), "episodes_before": before, "episodes_after": after,
        "wall_s": round(time.monotonic() - started, 1),
    }  # fmt: skip


def format_text(report: dict) -> str:
    recorded, tuned = report["recording"], report["finetuning"]
    n, total = report["corrected_episodes"], report["eval_episodes"]
    wins = [sum(r["success"] for r in report[k]) for k in ("episodes_before", "episodes_after")]
    lines = [
        f"VLA fine-tuned on corrections: {report['family']}, N = {n} corrected episodes, "
        f"arm starting at {report.get('start', 'rest')}",
        f"  corrected episodes: {recorded['succeeded_with_corrections']}/{n} succeeded with "
        f"{recorded['corrections']} corrections ({recorded['frames']} frames, "
        f"{recorded['seconds']} s"
        + (f", recorded before: {recorded['reused']})" if recorded.get("reused") else ")"),
        f"  fine-tuning: {tuned['steps']} steps from {report['model']}"
        + (f" (replaying {', '.join(report['replay'])}, {report['mix']:g} of the frames "
           "from the corrections)" if report.get("replay") else "")
        + (", each corrected episode from its first correction"
           if report.get("from_first_correction") else "")
        + f", {tuned['wall_time_s']} s, "
        f"final L1 train {tuned['final_train_loss']}, validation {tuned['final_val_loss']}",
        f"  unseen layouts ({total} episodes, {_seeds_text(report)}): before {wins[0]}/{total} "
        f"({100 * report['before']:.0f} %), after {wins[1]}/{total} ({100 * report['after']:.0f} %)"
        f": {report['points']:+.1f} points (goal +{report['goal_points']:g})",
        *_per_seed_lines(report),
        f"  model: {report['finetuned_model']}; data: {report['dataset']}; "
        f"{report['wall_s']} s in all",
    ]
    return "\n".join(lines)


def _eval_seeds(report: dict) -> list[int]:
    """The evaluation seeds (reports made before ``--eval-seeds``: their ``seed``)."""
    return report.get("eval_seeds") or [report["seed"]]


def _seeds_text(report: dict) -> str:
    seeds = _eval_seeds(report)
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def _per_seed_lines(report: dict) -> list[str]:
    """Before and after on each seed's layouts, when there were several seeds."""
    seeds = _eval_seeds(report)
    if len(seeds) < 2:
        return []
    lines = []
    for seed in seeds:
        runs = [[r for r in report[k] if r.get("seed") == seed]
                for k in ("episodes_before", "episodes_after")]
        wins = [sum(r["success"] for r in run) for run in runs]
        lines.append(f"    seed {seed}: before {wins[0]}/{len(runs[0])}, "
                     f"after {wins[1]}/{len(runs[1])}")
    return lines
