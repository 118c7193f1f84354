"""``lang2policy refine-reward "instruction"``: Eureka-style refinement of an LLM reward spec,
with the MPC as the fast evaluator (``lang2policy.l2r.refine``).

    lang2policy refine-reward "lift the red block 10 cm" --rounds 3 --episodes 2 --out out/refine

The Language-to-Rewards planner writes the first spec for a seeded scene (the objects the
instruction names are put on the table); each round evaluates a spec with a few lockstep MPC
episodes on that scene, prints a status line on stderr and, with ``--out DIR``, appends a line
to ``DIR/rounds.jsonl`` (spec, statistics, reflection, edits, LLM seconds); the best spec is
written to ``DIR/best_spec.json``. When the instruction is one of the ``bench l2r`` tasks for
this seed, success is judged by the task's own conditions; otherwise by the first spec's.
Exit status: 0 when the best spec succeeded in at least one episode, 1 when none did, 2 on an
error (a bad instruction, unknown objects, an LLM that could not be reached).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lang2policy import cli_types
from lang2policy.errors import ConfigError, UnknownObjectError

MAX_ROUNDS = 20
MAX_EPISODES = 20


def _count(low: int, high: int):
    """An argparse type: a whole number in [low, high]."""

    def check(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a whole number") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{number} is out of range; allowed: {low} to {high}")
        return number

    return check


def add_parser(commands: Any) -> None:
    """Add ``refine-reward`` to the ``lang2policy`` subparsers."""
    parser = commands.add_parser(
        "refine-reward", help="refine an LLM reward spec over rounds, Eureka style, with MPC "
        "episodes as the evaluator")
    parser.add_argument("instruction", type=cli_types.text,
                        help='e.g. "lift the red block 10 cm"')
    parser.add_argument("--rounds", type=_count(1, MAX_ROUNDS), default=3,
                        help="rounds, the first spec's evaluation included (default 3)")
    parser.add_argument("--episodes", type=_count(1, MAX_EPISODES), default=2,
                        help="MPC episodes per evaluation (default 2)")
    parser.add_argument("--samples", type=_count(2, 1024), default=64,
                        help="MPC samples per planning iteration (default 64)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="cap each episode at this many simulated seconds (default: the "
                        "spec's duration)")
    cli_types.add_seed(parser, "scene seed (MPC seeds are seed, seed+1, ...)")
    cli_types.add_robot(parser)
    parser.add_argument("--llm", default="local", help=cli_types.LLM_HELP)
    parser.add_argument("--out", type=Path, help="write rounds.jsonl and best_spec.json here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


@dataclass(frozen=True)
class RefineRequest:
    instruction: str
    rounds: int = 3
    episodes: int = 2
    samples: int = 64
    max_seconds: float | None = None
    seed: int = 0
    robot: str = "so101"
    llm: str = "local"
    out: Path | None = None
    progress: bool = True


def _check(request: RefineRequest) -> str:
    """The instruction, stripped; ``Lang2PolicyError`` for values out of range."""
    from lang2policy.planning.route import check_instruction

    if request.rounds < 1 or request.episodes < 1:
        raise ConfigError(f"rounds and episodes must be at least 1 (got {request.rounds} "
                          f"rounds, {request.episodes} episodes)")
    if request.max_seconds is not None and not 1.0 <= request.max_seconds <= 60.0:
        raise ConfigError(f"--max-seconds must be in [1, 60], got {request.max_seconds}")
    return check_instruction(request.instruction)


def _bench_judge(world, instruction: str, seed: int) -> tuple[str, dict] | None:
    """(task name, judge spec) of the ``bench l2r`` task whose instruction for ``seed`` is
    ``instruction`` (the world then holds that task's scene); None when none is."""
    import numpy as np

    from lang2policy.bench.l2r_tasks import TASKS

    wanted = " ".join(instruction.lower().split())
    for name, make in TASKS.items():
        world.reset(seed)
        task = make(world, np.random.default_rng(seed))
        if " ".join(task.instruction.lower().split()) == wanted:
            return name, task.judge
    world.reset(seed)
    return None


def _scene(world, instruction: str, seed: int):
    """The seeded layout, with the pool objects the instruction names put on the table in
    place of others; ``UnknownObjectError`` when it names objects the pool lacks."""
    from lang2policy.l2r.grammar import missing_objects
    from lang2policy.l2r.reflection import Scene

    pool = sorted(world.objects)
    missing = missing_objects(instruction, pool)
    if missing:
        raise UnknownObjectError(f"the instruction names {', '.join(missing)}, not among the "
                                 f"objects this scene can hold: {pool}")
    layout = world.reset(seed)
    text = " ".join(instruction.lower().split())
    named = [n for n in pool if re.search(rf"\b{re.escape(n)}\b", text)]
    if all(n in layout for n in named):
        return Scene(seed)
    others = [o for o in layout if o not in named]
    scene = Scene(seed, tuple([*named, *others][: max(len(layout), len(named))]))
    scene.reset(world)
    return scene


def refine_reward(request: RefineRequest, llm=None, say=None) -> dict:
    """Plan, then refine over ``request.rounds`` rounds; returns the report. ``llm``: an LLM
    client to use instead of ``make_client(request.llm)``; ``say``: where status lines go
    (default stderr)."""
    from lang2policy.l2r.planner import RewardPlanner
    from lang2policy.l2r.reflection import EvalSettings, Scene
    from lang2policy.rewards.spec import validate_spec
    from lang2policy.scene.world import World
    from lang2policy.session.readout import scene_state

    instruction = _check(request)
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    world = World(request.robot)
    matched = _bench_judge(world, instruction, request.seed)
    scene = Scene(request.seed) if matched else _scene(world, instruction, request.seed)
    objects = list(world.present)
    llm = llm if llm is not None else _client(request.llm)
    planner = RewardPlanner(llm, objects)
    planner.set_scene(*scene_state(world))
    began = time.perf_counter()
    plan = planner.plan(instruction, None)
    judge = (validate_spec(matched[1], objects, add_defaults=False).spec if matched
             else plan.spec)
    judge_name = f"bench l2r task '{matched[0]}'" if matched else ""
    settings = EvalSettings(request.episodes, request.samples, request.seed, request.max_seconds)
    say(f"refine-reward: {instruction!r} on {', '.join(objects)} (seed {request.seed}); "
        f"judged by {judge_name or 'the first spec' + chr(39) + 's conditions'}")
    result = _refine(request, instruction, plan, world, scene, settings, judge, judge_name,
                     llm, say)
    report = _report(request, instruction, objects, judge_name, result,
                     time.perf_counter() - began)
    if request.out is not None:
        (request.out / "best_spec.json").write_text(
            json.dumps(result.best.spec.to_dict(), indent=2) + "\n", encoding="utf-8")
    return report


def _client(spec: str):
    from lang2policy.llm.factory import make_client

    return make_client(spec)


def _refine(request, instruction, plan, world, scene, settings, judge, judge_name, llm, say):
    """The rounds, with a progress bar over episodes and a log line (and file line) each."""
    from tqdm import tqdm

    from lang2policy.l2r.refine import refine, status_line
    from lang2policy.l2r.reflection import evaluate, focus_terms
    from lang2policy.l2r.revise import Reviser

    reviser = Reviser(llm, world.present)
    log = _open_log(request.out)
    bar = tqdm(total=request.rounds * request.episodes, unit="ep", desc="refine-reward",
               file=sys.stderr, disable=not request.progress, leave=False)

    def evaluate_spec(spec, index):
        bar.set_postfix(round=index)
        return evaluate(world, spec, scene, settings, judge, judge_name,
                        on_episode=lambda episode: bar.update(1))

    def revise_spec(best, last, temperature):
        return reviser.revise(instruction, best.spec, best.reflection, last, temperature,
                              focus=focus_terms(best.stats))

    def on_round(r):
        if r.stats is None:
            bar.update(request.episodes)  # no episodes ran in a failed round
        bar.clear()
        say(status_line(r, request.rounds))
        if log is not None:
            log.write(json.dumps(r.as_dict()) + "\n")
            log.flush()

    try:
        return refine(plan.spec, evaluate_spec, revise_spec, request.rounds,
                      initial_llm_seconds=plan.llm_seconds, on_round=on_round)
    finally:
        bar.close()
        if log is not None:
            log.close()


def _open_log(out: Path | None):
    if out is None:
        return None
    try:
        out.mkdir(parents=True, exist_ok=True)
        return (out / "rounds.jsonl").open("w", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the round log in {out}: {exc.strerror}") from None


def _report(request, instruction, objects, judge_name, result, wall) -> dict:
    best = result.best
    return {"instruction": instruction, "objects": list(objects), "seed": request.seed,
            "llm": request.llm, "episodes": request.episodes, "samples": request.samples,
            "judge": best.stats.judge if judge_name == "" else judge_name,
            "rounds": [r.as_dict() for r in result.rounds], "best_round": best.index,
            "best_spec": best.spec.to_dict(), "best_successes": best.stats.successes,
            "wall_seconds": round(wall, 1),
            "out": None if request.out is None else str(request.out)}


def format_text(report: dict) -> str:
    best = report["rounds"][report["best_round"] - 1]
    lines = [f"best: round {report['best_round']} of {len(report['rounds'])}, success "
             f"{report['best_successes']}/{report['episodes']}, judged error "
             f"{best['stats']['judged_error']:.3g} ({report['judge']}); wall "
             f"{report['wall_seconds']:.0f} s"]
    if report["out"]:
        lines.append(f"wrote {report['out']}/rounds.jsonl and {report['out']}/best_spec.json")
    else:
        lines.append("best spec: " + json.dumps(report["best_spec"], sort_keys=True))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """``lang2policy refine-reward`` from parsed arguments; errors go up as
    ``Lang2PolicyError`` (the CLI prints them, exit status 2)."""
    request = RefineRequest(args.instruction, args.rounds, args.episodes, args.samples,
                            args.max_seconds, args.seed, args.robot, args.llm, args.out,
                            progress=not args.json)
    try:
        report = refine_reward(request)
    except KeyboardInterrupt:
        print("lang2policy refine-reward: interrupted", file=sys.stderr)
        return 130
    print(json.dumps(report, indent=2) if args.json else format_text(report))
    return 0 if report["best_successes"] > 0 else 1


__all__ = ["RefineRequest", "add_parser", "format_text", "refine_reward", "run"]
