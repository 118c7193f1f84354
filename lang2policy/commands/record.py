"""``lang2policy record demos``: scripted demonstrations on randomised scenes, written as a
LeRobotDataset v3 directory (issue 17; ``lang2policy.vla.sim.demos``).

    lang2policy record demos --task-family pick_place,push,lift --episodes 200 --out data/demos
    lang2policy record corrections --model models/vla-so101-tiny --task-family lift \
        --episodes 20 --out data/corrections-lift       # the VLA corrected in words (issue 18)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.parallel.executor import add_arguments as add_executor_arguments
from lang2policy.parallel.executor import from_args as executor_from_args

EPISODE_COLUMNS = (
    "success", "family", "split", "seed", "phrasing", "combination", "detail", "view", "realism",
)  # fmt: skip


def _families(text: str) -> tuple[str, ...]:
    from lang2policy.vla.spec.tasks import FAMILIES

    chosen = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in chosen if f not in FAMILIES]
    if not chosen or bad:
        raise argparse.ArgumentTypeError(f"task families: a comma-separated subset of {FAMILIES}")
    return chosen


def add_parser(commands) -> None:
    record = commands.add_parser(
        "record", help="record demonstrations (or corrected episodes) for the VLA policy"
    )
    kinds = record.add_subparsers(dest="record_kind", required=True)
    demos = kinds.add_parser("demos", help="scripted demonstrations on randomised scenes")
    demos.add_argument("--task-family", type=_families, default=("pick_place", "push", "lift"),
                       help="comma-separated: pick_place, push, lift (default: all)")
    demos.add_argument("--episodes", type=int, default=100, help="episodes per task family")
    demos.add_argument("--out", type=Path, required=True, help="new dataset directory")
    demos.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                       help="worker processes (0: in this process; with --executor ray: the local "
                       "cluster's CPUs)")
    add_executor_arguments(demos)
    demos.add_argument("--views", type=int, default=0,
                       help="scene views per family: one-frame layouts for the scene head")
    demos.add_argument("--seed", type=int, default=0, help="seed of the draw")  # fmt: skip
    demos.add_argument("--shard-size", type=int, default=0, metavar="N",
                       help="each worker writes N consecutive episodes as a dataset of its "
                       "own (in OUT.shards/), merged into --out in order at the end (0, the "
                       "default: workers send every episode to this process, which writes "
                       "them)")  # fmt: skip
    demos.add_argument(
        "--realism", default="off",
        help="off | mild | hard | a realism YAML file: the world's light, shades and camera, "
        "the frames' sensor effects (each episode's seed draws its look; written into every "
        "episode)",
    )  # fmt: skip
    fixes = kinds.add_parser(
        "corrections", help="the VLA in closed loop, corrected in words by a scripted person"
    )
    fixes.add_argument("--model", type=Path, default=Path("models/vla-so101-tiny"),
                       help="VLA model directory")
    fixes.add_argument("--task-family", default="lift", help="lift or push (the scripted person's)")
    fixes.add_argument("--episodes", type=int, default=20, help="corrected episodes")
    fixes.add_argument("--out", type=Path, required=True, help="new dataset directory")
    fixes.add_argument("--seed", type=int, default=1,
                       help="seed of the layouts (training range; 0: data/demos-v2's)")
    fixes.add_argument("--start", default="rest",
                       help="where the arm starts each episode: rest or away (above the table)")
    fixes.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                       help="worker processes, each its own policy on one thread (0: in this "
                       "process; with --executor ray: the local cluster's CPUs)")
    add_executor_arguments(fixes)


def run(args: argparse.Namespace) -> int:
    if args.record_kind == "corrections":
        return run_corrections(args)
    return run_demos(args)


def run_corrections(args: argparse.Namespace) -> int:
    """``record corrections``: the policy corrected on ``--episodes`` training-range layouts."""
    os.environ["OMP_NUM_THREADS"] = "1"
    from lang2policy.vla.coach.corrected import corrected_in_workers, write_corrections
    from lang2policy.vla.coach.corrector import FAMILIES
    from lang2policy.vla.eval.start_pose import check_start
    from lang2policy.vla.sim.demos import training_specs

    if args.task_family not in FAMILIES or args.episodes < 1:
        raise ConfigError(
            f"--task-family must be one of {FAMILIES} (the scripted corrector's) and "
            f"--episodes at least 1; got {args.task_family!r}, {args.episodes}"
        )
    check_start(args.start)
    if not (Path(args.model) / "config.json").exists():
        raise ConfigError(f"{args.model} is no VLA model directory (no config.json)")
    executor = executor_from_args(args)
    specs = training_specs([args.task_family], args.episodes, args.seed)
    started = time.monotonic()

    def show(rollout) -> None:
        said = ", ".join(text for _, text, _ in rollout.corrections)
        verdict = "ok" if rollout.success else "FAIL"
        print(f"[corrections] {rollout.spec.index + 1}/{len(specs)} {verdict} "
              f"({rollout.detail}); {len(rollout.corrections)} corrections: {said}",
              file=sys.stderr)  # fmt: skip

    rollouts = corrected_in_workers(args.model, specs, executor, start=args.start)
    done = write_corrections(rollouts, args.out, progress=show)
    said = sum(len(r.corrections) for r in done)
    print(f"wrote {args.out}: {len(done)} corrected episodes ({sum(r.success for r in done)} "
          f"succeeded), {said} corrections, {time.monotonic() - started:.0f} s")  # fmt: skip
    return 0


def run_demos(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from lang2policy.realism import load_realism
    from lang2policy.vla.sim.demos import generate, training_specs
    from lang2policy.vla.sim.scene_views import view_specs

    if args.episodes < 0 or args.views < 0 or args.episodes + args.views < 1:
        raise ConfigError(
            f"--episodes and --views must be at least 0 and not both 0, got {args.episodes}, "
            f"{args.views}"
        )
    if args.shard_size < 0:
        raise ConfigError(f"--shard-size must be 0 (off) or more, got {args.shard_size}")
    load_realism(args.realism)  # a bad level or file is refused before any worker starts
    executor = executor_from_args(args)
    specs = training_specs(args.task_family, args.episodes, args.seed)
    specs += view_specs(args.task_family, args.views, args.seed, first_index=len(specs))
    started, outcomes = time.monotonic(), Counter()

    # Refused before anything runs: an --out in use (and, sharded, a leftover OUT.shards).
    shards = _shards_folder(args.out) if args.shard_size > 0 else None
    writer = _demo_writer(args.out) if shards is None else None
    bar = tqdm(total=len(specs), unit="episode", file=sys.stderr, desc="demos")

    def done(outcome: tuple[str, bool]) -> None:
        outcomes[outcome] += 1
        bar.set_postfix(ok=f"{sum(v for (_, ok), v in outcomes.items() if ok)}/{bar.n + 1}")
        bar.update()

    if shards is not None:
        frames = _demos_in_shards(args, shards, specs, executor, done)
    else:
        with writer:
            for episode in generate(specs, realism=args.realism, executor=executor):
                writer.add_episode(_episode_record(episode, args.realism))
                done(_outcome(episode))
        frames = writer.total_frames
    bar.close()
    print(_summary(args, outcomes, frames, time.monotonic() - started))
    return 0


def _summary(args, outcomes: Counter, frames: int, seconds: float) -> str:
    episodes = sum(outcomes.values())
    lines = [f"wrote {args.out}: {episodes} episodes, {frames} frames, {seconds:.0f} s"]
    for family in args.task_family:
        done = outcomes[(family, True)]
        total = done + outcomes[(family, False)]
        if not total:
            continue
        lines.append(f"  {family}: {done}/{total} demonstrations succeeded (failures kept, marked)")
    if outcomes[("view", True)]:
        lines.append(f"  scene views: {outcomes[('view', True)]} (one frame each, arm at rest)")
    return "\n".join(lines)


# ----------------------------------------------------------- demonstrations as datasets
def _demo_writer(out: Path):
    """The writer of a demonstrations dataset: the episode columns and the scene state."""
    from lang2policy.vla.dataset import DatasetWriter
    from lang2policy.vla.sim.environment_state import ENV_NAMES

    return DatasetWriter(out, extra_episode_columns=EPISODE_COLUMNS, environment_names=ENV_NAMES)


def _episode_record(episode, realism: str):
    """A recorded demonstration (``Episode``) as the dataset's ``EpisodeRecord``."""
    from lang2policy.vla.dataset import EpisodeRecord

    spec = episode.spec
    return EpisodeRecord(
        spec.instruction, episode.images, episode.state, episode.action,
        {"success": episode.success, "family": spec.task.family, "split": spec.split,
         "seed": spec.seed, "phrasing": spec.phrasing, "combination": spec.task.combination,
         "detail": episode.detail, "view": spec.view, "realism": realism},
        episode.environment,
    )  # fmt: skip


def _outcome(episode) -> tuple[str, bool]:
    """What the summary counts: the family (or "view") and whether it succeeded."""
    return ("view" if episode.spec.view else episode.spec.task.family, episode.success)


def _shards_folder(out: Path) -> Path:
    """``OUT.shards``, where the workers write their shards; refused when ``out`` is in use
    or an earlier run left its shards (the merge would refuse ``out`` only at the end)."""
    shards = out.with_name(out.name + ".shards")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} already exists and is not an empty directory; a dataset is "
                          "written to a new (or empty) directory")  # fmt: skip
    if shards.exists():
        raise ConfigError(f"{shards} exists: an earlier sharded run did not finish; remove it")
    return shards


def _demos_in_shards(args, shards: Path, specs: list, executor, done) -> int:
    """``--shard-size``: each work item is a shard of consecutive episodes that a worker
    records and writes to ``shards/shard-NNNNN``; the shards are merged into ``args.out`` in
    order and removed (also on failure). Returns the frames written. The workers and this
    process must share the filesystem (a local pool, a Ray cluster on this machine)."""
    from lang2policy.errors import Lang2PolicyError
    from lang2policy.parallel.executor import run_ordered
    from lang2policy.vla.dataset.merge import merge_datasets
    from lang2policy.vla.sim.demos import worker_state

    size = args.shard_size
    items = [
        (str(shards / f"shard-{number:05d}"), specs[first : first + size], args.realism)
        for number, first in enumerate(range(0, len(specs), size))
    ]
    folders, frames = [], 0
    try:
        results = run_ordered(executor, worker_state, (args.realism,), _write_shard, items,
                              label=_shard_label)  # fmt: skip
        with closing(results):  # the pool stops before the shards are removed
            for result in results:
                if "error" in result:
                    spec = result["failed"]
                    raise Lang2PolicyError(f"episode {spec.index} ({spec.instruction!r}) "
                                           f"failed: {result['error']}")  # fmt: skip
                folders.append(Path(result["folder"]))
                frames += result["frames"]
                for outcome in result["outcomes"]:
                    done(outcome)
        merge_datasets(folders, args.out)
    finally:
        shutil.rmtree(shards, ignore_errors=True)
    return frames


def _write_shard(state: tuple, item: tuple) -> dict:
    """Worker: record one shard's specs (``item``: folder, specs, realism) and write them as a
    dataset at the folder; returns the folder, each episode's outcome and the frames, or the
    episode that failed and why. A retried shard (a Ray worker that died) starts afresh."""
    from lang2policy.vla.sim.demos import record_or_error

    folder, specs, realism = Path(item[0]), item[1], item[2]
    for leftover in (folder, folder.with_name(folder.name + ".part")):
        shutil.rmtree(leftover, ignore_errors=True)
    writer, outcomes, spec = _demo_writer(folder), [], None
    try:
        for spec in specs:
            episode = record_or_error(state, spec)
            if isinstance(episode, tuple):
                return {"failed": spec, "error": episode[1]}
            writer.add_episode(_episode_record(episode, realism))
            outcomes.append(_outcome(episode))
        writer.finish()
    except Exception as exc:  # reported to the parent, which says which episode
        return {"failed": spec or specs[0], "error": f"{type(exc).__name__}: {exc}"}
    finally:
        if not writer.finished:
            writer.abandon()
    return {"folder": str(folder), "outcomes": outcomes, "frames": writer.total_frames}


def _shard_label(item: tuple) -> str:
    specs = item[1]
    return f"shard {Path(item[0]).name} (episodes {specs[0].index}..{specs[-1].index})"
