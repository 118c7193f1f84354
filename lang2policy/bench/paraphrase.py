"""``lang2policy bench paraphrase``: 30 paraphrased single pick-and-place instructions.

The instructions (``config/bench/paraphrase_pickplace.yaml``) were written for issue 15 and are
kept apart from the planner's prompt examples and from the phrasing templates of ``bench cap``:
varied verbs and sentence shapes ("could you place ...", "the green block goes in ...",
"lift ... and lower it into ..."), objects named by colour and kind. Each instruction gets a
seeded scene with the named block and bowl plus one more block and bowl (of other colours), a
layout that does not already satisfy it. The LLM tracks (``--grounding on|off|both``: grounded
planning and the ungrounded baseline, on the same scenes in one run; see ``cap_llm``) plan and
run each instruction through the sandbox; success is the relation in the simulator state
afterwards: the block rests in the bowl. The report gives the reach rate per track, each
instruction's result and the planning latency per instruction (p50/p90/mean).

    report = run("so101", "local", grounding="both", limit=10)
    print(format_text(report))
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lang2policy import cli_types
from lang2policy.bench.cap import TrackRunner
from lang2policy.bench.cap_checks import Task
from lang2policy.bench.cap_families import PickPlace
from lang2policy.bench.cap_llm import (
    add_grounding_argument,
    seconds_text,
    success_count,
    track_latency,
)
from lang2policy.bench.cap_splits import SEEN_COLORS, UNSEEN_COLORS
from lang2policy.bench.cap_tasks import Episode, episode_rng, seeded_layout
from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir
from lang2policy.session.sim import SimSession
from lang2policy.yaml_strict import read_yaml_file

if TYPE_CHECKING:
    from lang2policy.llm.exchange import LLM

FAMILY = PickPlace()
COLORS = SEEN_COLORS + UNSEEN_COLORS  # the cap_tabletop layout's colours


@dataclass(frozen=True)
class Paraphrase:
    """One instruction of the set and the block and bowl it names."""

    text: str
    block: str
    bowl: str


def default_path() -> Path:
    return config_dir() / "bench" / "paraphrase_pickplace.yaml"


def load_paraphrases(path: Path | None = None) -> tuple[Paraphrase, ...]:
    """The instruction set; each names its block and bowl by catalog colour and kind (checked:
    a typo would make an instruction unresolvable and measure nothing)."""
    source = path or default_path()
    data = read_yaml_file(source)
    items = data.get("instructions") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: expected a non-empty list under 'instructions'")
    paraphrases = []
    for i, item in enumerate(items):
        try:
            p = Paraphrase(str(item["text"]), str(item["block"]), str(item["bowl"]))
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{source}: instruction {i} needs text, block and bowl") from exc
        for name, kind in ((p.block, "block"), (p.bowl, "bowl")):
            color, _, named_kind = name.partition(" ")
            if color not in COLORS or named_kind != kind or name not in p.text:
                raise ConfigError(
                    f"{source}: instruction {i} ({p.text!r}): {name!r} must be a "
                    f"'<colour> {kind}' (colours: {', '.join(COLORS)}) named in the text"
                )
        paraphrases.append(p)
    if len({p.text for p in paraphrases}) != len(paraphrases):
        raise ConfigError(f"{source}: instructions repeat")
    return tuple(paraphrases)


def make_episode(session: SimSession, paraphrase: Paraphrase, seed: int, index: int) -> Episode:
    """The seeded scene of one instruction: its block and bowl, one more block and bowl of
    other colours, in a layout where the block is not in the bowl yet. Resets ``session``."""
    rng = episode_rng(seed, "paraphrase", index)
    block_color, bowl_color = paraphrase.block.split()[0], paraphrase.bowl.split()[0]
    other_block = str(rng.choice([c for c in COLORS if c != block_color]))
    other_bowl = str(rng.choice([c for c in COLORS if c != bowl_color]))
    objects = (paraphrase.block, f"{other_block} block", paraphrase.bowl, f"{other_bowl} bowl")
    task = Task(objects, {"block": paraphrase.block, "bowl": paraphrase.bowl})
    reset_seed = seeded_layout(session, FAMILY, task, rng)
    return Episode(
        family=FAMILY.name,
        category=FAMILY.category,
        split="paraphrase",
        index=index,
        seed=seed,
        instruction=paraphrase.text,
        template=paraphrase.text,
        objects=objects,
        params=dict(task.params),
        reset_seed=reset_seed,
        reference=FAMILY.reference(task, session.world.description),
    )


def run(
    robot: str = "so101",
    llm_spec: str | None = "local",
    grounding: str = "both",
    seed: int = 0,
    limit: int | None = None,
    oracle: bool = False,
    progress: bool = True,
    client: LLM | None = None,
    on_episode: Callable[[dict], None] | None = None,
) -> dict:
    """Plan and run the first ``limit`` instructions (all: None) with each grounding setting
    that ``grounding`` selects (and the reference program with ``oracle``); ``client`` stands
    in for the client ``llm_spec`` would make; ``on_episode`` sees each instruction's record as it
    finishes. Returns the report (JSON-able)."""
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be at least 1, not {limit}")
    started = time.perf_counter()
    runner = TrackRunner(robot, llm_spec, oracle, grounding, client)
    chosen = load_paraphrases()[:limit]
    episodes = [make_episode(runner.session, p, seed, i) for i, p in enumerate(chosen)]
    records = runner.run(episodes, f"paraphrase {robot}", progress, on_episode)
    wall = time.perf_counter() - started
    return build_report(robot, llm_spec, seed, runner.tracks, records, wall)


def build_report(
    robot: str, llm_spec: str | None, seed: int, tracks: list[str], records: list[dict], wall: float
) -> dict:
    """The report of the instruction ``records`` (each with one result per track in
    ``tracks``): reach rate and latency per track, and the records."""
    results = {t: success_count(records, t) for t in tracks}
    for track in (t for t in tracks if t != "oracle"):
        results[track]["latency"] = track_latency([r[track] for r in records])
    return {
        "benchmark": "paraphrase",
        "robot": robot,
        "llm_spec": llm_spec,
        "seed": seed,
        "instructions": len(records),
        "tracks": tracks,
        "results": results,
        "wall_seconds": round(wall, 2),
        "episodes": records,
    }


def format_text(report: dict) -> str:
    """Reach rate and latency per track, then each instruction's result per track."""
    tracks = report["tracks"]
    llm = f", LLM {report['llm_spec']}" if report["llm_spec"] else ""
    lines = [
        f"Paraphrased pick-and-place on {report['robot']}: {report['instructions']} "
        f"instructions, seed {report['seed']}{llm} (llm: grounding on, llm-off: grounding off)",
        "",
    ]
    for track in tracks:
        result = report["results"][track]
        rate = result["success_rate"]
        lines.append(
            f"{track:<8} reached {result['successes']}/{result['episodes']} "
            f"({'-' if rate is None else f'{100 * rate:.0f}%'})"
        )
        if "latency" in result:
            lat = result["latency"]
            lines.append(f"{'':<9}planning per instruction: LLM {seconds_text(lat['llm_seconds'])}")
            lines.append(f"{'':<9}all but the arm's run {seconds_text(lat['planning_seconds'])}")
    lines += ["", "  # " + "".join(f"{t:>9}" for t in tracks) + "  instruction"]
    for r in report["episodes"]:
        marks = "".join(f"{'yes' if r[t]['success'] else 'no':>9}" for t in tracks)
        lines.append(f"{r['index'] + 1:>3} {marks}  {r['instruction']}")
        for t in tracks:
            if not r[t]["success"]:
                why = (r[t]["message"].splitlines() or [""])[0][:100]
                lines.append(f"{'':>6}{t}: {r[t]['reason']}; {r[t]['outcome']}: {why}")
    lines.append(f"wall time {report['wall_seconds']:.0f} s")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--llm", default="local", help=cli_types.LLM_HELP + " (default: local)")
    add_grounding_argument(parser)
    cli_types.add_seed(parser, "scene seed")
    parser.add_argument("--limit", type=int, help="only the first N instructions (default: 30)")
    parser.add_argument(
        "--oracle", action="store_true", help="also run the reference program on each scene"
    )


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench paraphrase``."""
    progress = not args.json
    return run(args.robot, args.llm, args.grounding, args.seed, args.limit, args.oracle, progress)
