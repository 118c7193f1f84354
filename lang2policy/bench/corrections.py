"""``lang2policy bench corrections``: scripted correction scenarios on the core (no ROS, no LLM).

Each scenario draws a seeded scene and a plan (a reward spec built directly, as the L2R tasks
build theirs) with a mistake in it, and a scripted person who watches the arm and, from a
fixed time into the run on, says a correction once they see the mistake:

- ``offset``: a calibration bias puts the hover point 3 cm off the object (as a biased
  perception would report it); the person says "a bit to the left" (or right, further, closer).
  Judged by the tool hovering within 1.5 cm of the point above the real object.
- ``target``: the plan lifts the red block; the person wanted the blue one ("no, the blue one").
  Judged by the gripper going to the blue block (within 3 cm of it in x, y; the red one is
  at least 6 cm away).
- ``speed``: the plan moves the tool at up to 0.12 m/s; the person wants it under 0.08 m/s and
  says "slower". Judged by the tool arriving (within 3 cm) with its speed, averaged over each
  0.1 s, under 0.08 m/s from half a second after the correction on.

Every episode runs three times on the same scene: without the correction; with it (classified,
applied to the running spec and swapped in with ``LockstepMPC.set_spec``; timed in wall ms for
classify + apply, and in simulated seconds until the motion measurably responds; logged to a
``CorrectionMemory`` on disk); and again with the instruction paraphrased and memory on (the
remembered edits applied at planning time), counting the corrections the person still has to
make (the aim: none).

With ``--perception camera --robot so101-hw --emulate`` the reward plans run on the physical
path (``corrections_bus``: the real-time MPC in its own process drives the SO-101 driver over
the emulated servo bus, objects from camera perception only, in wall time), and the same
episodes on the simulated world with true objects are reported beside them.

The scenarios are in ``corrections_scenarios``, the three runs of an episode in
``corrections_runs``; the code-plan track in ``code_corrections``.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.bench import camera_route
from lang2policy.bench.code_corrections import SCENARIOS as CODE_SCENARIOS
from lang2policy.bench.code_corrections import (
    MakeArm,
    emulated_arm,
    format_code,
    run_code,
    simulated_arm,
)
from lang2policy.bench.corrections_runs import RUNS, SimRoute, run_episode
from lang2policy.bench.corrections_scenarios import SCENARIOS
from lang2policy.corrections.memory import DEFAULT_THRESHOLD, Embedder
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.realism import load_realism
from lang2policy.scene.world import World


# --------------------------------------------------------------------------- the benchmark
def run(
    robot: str = "so101",
    episodes: int = 3,
    first_seed: int = 0,
    scenarios: Sequence[str] | None = None,
    samples: int = 64,
    threshold: float = DEFAULT_THRESHOLD,
    memory_dir: Path | None = None,
    progress: bool = True,
    route=None,
) -> dict:
    """Run every scenario for ``episodes`` seeds; the report as JSON-able data. ``route``:
    where the runs happen (default: ``SimRoute`` on a new world of ``robot``)."""
    names = list(scenarios or SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise Lang2PolicyError(f"unknown scenarios {unknown}; valid scenarios: {list(SCENARIOS)}")
    if episodes < 1 or not 2 <= samples <= 1024 or not 0.0 <= threshold <= 1.0:
        raise Lang2PolicyError(
            "--episodes must be at least 1, --samples in [2, 1024] and --threshold in [0, 1]"
        )
    route = route or SimRoute(World(robot))
    embedder = Embedder()
    embedder.load()  # timed apart from the recalls
    scratch = Path(tempfile.mkdtemp(prefix="l2p-corrections-")) if memory_dir is None else None
    folder = memory_dir or scratch
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    rows = []
    cases = [(n, s) for n in names for s in range(first_seed, first_seed + episodes)]
    bar = tqdm(cases, desc="bench corrections", unit="ep", disable=not progress)
    try:
        for name, seed in bar:
            config = MPCConfig(samples=samples, seed=seed)
            rows.append(
                run_episode(
                    route, name, seed, config, folder / f"{name}-{seed}.jsonl", embedder, threshold
                )
            )
            bar.set_postfix(
                scenario=name, fixed=f"{sum(r['with']['success'] for r in rows)}/{len(rows)}"
            )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return _report(
        robot,
        names,
        rows,
        episodes,
        first_seed,
        samples,
        threshold,
        embedder,
        None if scratch is not None else str(folder),
        time.perf_counter() - began,
    )


def _rate(rows: list[dict], run: str) -> dict:
    wins = sum(bool(r[run]["success"]) for r in rows)
    return {"successes": wins, "episodes": len(rows), "rate": round(wins / max(1, len(rows)), 2)}


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None and np.isfinite(v)]
    return round(float(np.mean(kept)), 3) if kept else None


def _report(
    robot, names, rows, episodes, first_seed, samples, threshold, embedder, memory_dir, wall
) -> dict:
    scenarios = {}
    for name in names:
        mine = [r for r in rows if r["scenario"] == name]
        with_runs = [r["with"] for r in mine]
        repeats = [r["repeat"] for r in mine]
        scenarios[name] = {
            "measure": SCENARIOS[name].measure_name,
            "without": _rate(mine, "without"),
            "with": _rate(mine, "with"),
            "repeat_with_memory": _rate(mine, "repeat"),
            "latency": {
                "classify_apply_ms_mean": _mean([r.get("classify_apply_ms") for r in with_runs]),
                "effect_sim_s_mean": _mean([r.get("effect_sim_s") for r in with_runs]),
                "responded": sum(r.get("effect_sim_s") is not None for r in with_runs),
                "corrected": sum(r["corrections"] > 0 for r in with_runs),
            },
            "memory": {
                "corrections_needed": [r["corrections"] for r in repeats],
                "corrections_needed_mean": _mean([r["corrections"] for r in repeats]),
                "recall_score_mean": _mean(
                    [(r.get("recall") or {}).get("best_score") for r in repeats]
                ),
                "recall_ms_mean": _mean(
                    [(r.get("recall") or {}).get("recall_ms") for r in repeats]
                ),
            },
            "measure_mean": {run: _mean([r[run]["measure"] for r in mine]) for run in RUNS},
        }
    return {
        "benchmark": "corrections",
        "robot": robot,
        "episodes_per_scenario": episodes,
        "first_seed": first_seed,
        "samples": samples,
        "threshold": threshold,
        "scenarios": scenarios,
        "embedding": embedder.stats(),
        "memory_dir": memory_dir,
        "wall_seconds": round(wall, 1),
        "episodes": rows,
    }


def format_reward_plans(report: dict) -> str:
    lines = [
        f"Corrections on {report['robot']}: {report['episodes_per_scenario']} seeded "
        f"episodes per scenario, MPC with {report['samples']} samples, memory recall at "
        f"cosine >= {report['threshold']:g}",
        f"  {'scenario':<9}{'without':>9}{'with':>9}{'classify+apply':>16}{'effect':>9}"
        f"{'repeat+memory':>15}{'corrections left':>18}",
    ]
    for name, row in report["scenarios"].items():
        latency, memory = row["latency"], row["memory"]
        ms = latency["classify_apply_ms_mean"]
        effect = latency["effect_sim_s_mean"]
        left = memory["corrections_needed_mean"]
        lines.append(
            f"  {name:<9}{_cell(row['without']):>9}{_cell(row['with']):>9}"
            f"{'-' if ms is None else f'{ms:.2f} ms':>16}"
            f"{'-' if effect is None else f'{effect:.1f} s':>9}"
            f"{_cell(row['repeat_with_memory']):>15}{'-' if left is None else f'{left:.2f}':>18}"
        )
    lines.append(
        "  (effect: simulated seconds from the correction until the motion measurably "
        "responds, at the 0.1 s re-planning period)"
    )
    for name, row in report["scenarios"].items():
        means, memory = row["measure_mean"], row["memory"]
        measured = ", ".join(f"{run} {_number(means[run], '.3f')}" for run in RUNS)
        lines.append(
            f"  {name}: {row['measure']}: {measured}; recalled at similarity "
            f"{_number(memory['recall_score_mean'], '.2f')} in "
            f"{_number(memory['recall_ms_mean'], '.0f')} ms"
        )
    embedding = report["embedding"]
    lines.append(
        f"  MiniLM: loaded in {embedding['model_load_s']:.1f} s, "
        f"{embedding['encode_ms_mean']:.1f} ms per encode "
        f"({embedding['encode_calls']} calls)"
    )
    errors = [(e, run) for e in report["episodes"] for run in RUNS if e[run]["error"]]
    lines += [
        f"  error {e['scenario']} seed {e['seed']} ({run}): {e[run]['error']}"
        for e, run in errors[:10]
    ]
    lines.append(f"  wall {report['wall_seconds']:.0f} s")
    return "\n".join(lines)


def _median(values: list[float]) -> str:
    return f"{float(np.median(values)):.1f}" if values else "-"


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cell(rate: dict) -> str:
    return f"{rate['successes']}/{rate['episodes']}"


# --------------------------------------------------------------------------- the command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Scripted correction scenarios: success without and with the correction, "
        "correction-to-effect latency, corrections still needed with memory on."
    )
    parser.add_argument(
        "--robot", default="so101", help="robot (default: so101; so101-hw with --emulate)"
    )
    parser.add_argument("--episodes", type=int, default=3, help="seeded episodes per scenario")
    cli_types.add_seed(parser, "first episode seed")
    parser.add_argument(
        "--scenarios",
        help=f"comma-separated, of {', '.join(SCENARIOS)} (reward and code plans) and "
        "beyond-workspace, into-keep-out, above-speed-cap (code plans; default: all)",
    )
    parser.add_argument("--samples", type=int, default=64, help="MPC samples per iteration")
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="cosine similarity at which a remembered correction is recalled",
    )
    parser.add_argument(
        "--memory-dir",
        type=Path,
        help="keep the correction logs here, one per scenario and seed (replaced when it "
        "exists; default: a temporary folder)",
    )
    parser.add_argument(
        "--plans",
        default="reward,code",
        help="which plans to correct: reward (specs on the MPC), code (policy programs "
        "through the privilege gate, SO-101), or both (default: reward,code)",
    )
    camera_route.add_arguments(parser)


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench corrections``: the reward plans' report, with the code plans' under
    ``code_plans``."""
    plans = set(cli_types.names(args.plans) or ())
    if not plans or plans - {"reward", "code"}:
        raise Lang2PolicyError(f"--plans takes reward, code or both; got {args.plans!r}")
    reward, code = _split_scenarios(cli_types.names(args.scenarios))
    _check_route(args)
    report = {}
    if "reward" in plans and reward != []:
        report = _reward_plans_on_route(args, reward)
    if "code" in plans and code != []:
        report |= _code_plans_on_route(args, code)
    return report


def _check_route(args: argparse.Namespace) -> None:
    """Refuse the route flags this benchmark cannot run, saying what it can."""
    bus = camera_route.emulated_bus(args)
    if args.perception == "camera" and not bus:
        raise Lang2PolicyError(
            "bench corrections from the camera runs on the emulated arm: add --robot so101-hw "
            "--emulate"
        )


def _reward_plans_on_route(args: argparse.Namespace, names: list[str] | None) -> dict:
    """The reward plans on the simulated world, or with ``--perception camera --robot
    so101-hw --emulate`` by the real-time MPC on the SO-101 driver over the emulated bus with
    camera perception (``corrections_bus``), beside the same episodes on the simulated world
    with true objects (under ``truth``)."""
    settings = (args.episodes, args.seed, names, args.samples, args.threshold, args.memory_dir)
    if args.perception != "camera":
        return run(args.robot, *settings, progress=not args.json)
    from lang2policy.bench.corrections_bus import BusRoute

    profile = load_realism(args.realism)
    session = camera_route.camera_session("so101", profile, bus=True)
    try:
        session.use_rig(0)  # one user's objects, colours calibrated once
        route = BusRoute(session)
        report = run("so101", *settings, progress=not args.json, route=route)
    finally:
        session.close()
    report["truth"] = run("so101", *settings, progress=not args.json)
    report["route"] = {**camera_route.route_fields(profile, bus=True), "bus": route.counts}
    return report


def _code_plans_on_route(args: argparse.Namespace, code: list[str] | None) -> dict:
    """The code plans on the simulated arm, or with ``--perception camera --robot so101-hw
    --emulate`` on the SO-101 driver over the emulated bus with camera perception, beside
    the same episodes on the simulated arm with true objects (``code_plans_truth``)."""
    if args.perception != "camera":
        return {"code_plans": _code_plans(args, code, simulated_arm)}
    profile = load_realism(args.realism)
    session = camera_route.camera_session("so101", profile, bus=True)
    try:
        session.use_rig(0)  # one user's objects, colours calibrated once
        on_bus = _code_plans(args, code, functools.partial(emulated_arm, bus=session))
    finally:
        session.close()
    return {
        "code_plans": on_bus,
        "code_plans_truth": _code_plans(args, code, simulated_arm),
        "code_plans_route": camera_route.route_fields(profile, bus=True),
    }


def _split_scenarios(names: list[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """``--scenarios`` split into the reward plans' and the code plans' (None: all of them)."""
    if names is None:
        return None, None
    unknown = [n for n in names if n not in SCENARIOS and n not in CODE_SCENARIOS]
    if unknown:
        valid = list(dict.fromkeys([*SCENARIOS, *CODE_SCENARIOS]))
        raise Lang2PolicyError(f"unknown scenarios {unknown}; valid scenarios: {valid}")
    return [n for n in names if n in SCENARIOS], [n for n in names if n in CODE_SCENARIOS]


def _code_plans(args: argparse.Namespace, names: list[str] | None, make_arm: MakeArm) -> dict:
    """The code-plan scenarios (``lang2policy.bench.code_corrections``), on the SO-101."""
    if args.episodes < 1:
        raise Lang2PolicyError("--episodes must be at least 1")
    chosen = list(CODE_SCENARIOS) if names is None else names
    runs = sum(2 if CODE_SCENARIOS[n].legitimate else 1 for n in chosen) * args.episodes
    with tqdm(total=runs, desc="bench corrections (code)", unit="run", disable=args.json) as bar:
        return run_code(chosen, args.episodes, args.seed, bar, make_arm)


def format_text(report: dict) -> str:
    """The reward plans' table and the code plans' (each when it ran)."""
    parts = [format_reward_plans(report)] if "scenarios" in report else []
    if "route" in report:
        bus = report["route"]["bus"]
        parts[0] = (
            f"From {camera_route.route_text(report['route'])} ({bus['runs']} runs: "
            f"{bus['bus_errors']} bus reads or writes unanswered, {bus['rejected_states']} "
            f"states refused by the MPC, planning at {_median(bus['plan_hz'])} Hz median). "
            f"{parts[0]}"
        )
        truth = format_reward_plans(report["truth"])
        parts.append(f"Ground truth (the simulated world, true objects), same episodes. {truth}")
    if "code_plans" in report:
        parts.append(format_code(report["code_plans"]))
    if "code_plans_route" in report:
        parts[-1] = f"From {camera_route.route_text(report['code_plans_route'])}. {parts[-1]}"
        truth = format_code(report["code_plans_truth"])
        parts.append(f"Ground truth (the simulated arm, true objects), same episodes. {truth}")
    return "\n\n".join(parts)
