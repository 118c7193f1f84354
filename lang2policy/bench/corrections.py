"""``lang2policy bench corrections``: scripted correction scenarios on the core (no ROS, no LLM).

Each scenario draws a seeded scene and a plan (a reward spec built directly, as the L2R tasks
build theirs) with a mistake in it, and a scripted person who watches the arm and, at a fixed
simulated time, says a correction if they see the mistake:

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
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from lang2policy import cli_types
from lang2policy.corrections.apply import apply_to_spec, objects_in_spec
from lang2policy.corrections.classify import classify
from lang2policy.corrections.memory import (
    DEFAULT_THRESHOLD,
    CorrectionMemory,
    Embedder,
    apply_recalled,
    situation_for_spec,
)
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.episode import LockstepMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.scene.world import World

BIAS = 0.03  # m: how far the biased perception puts the hover point
PERSON_SPEED_LIMIT = 0.08  # m/s: what the person in the speed scenario wants
RESPONSE_STEP = 0.005  # m: a tool movement this large toward the correction is a response
RUNS = ("without", "with", "repeat")


# --------------------------------------------------------------------------- traces
@dataclass
class Trace:
    """The tool centre after every re-planning period of a run."""

    times: list[float] = field(default_factory=list)
    tool: list[np.ndarray] = field(default_factory=list)

    def add(self, t: float, tool: np.ndarray) -> None:
        self.times.append(t)
        self.tool.append(np.array(tool, float))

    def speeds(self, since: float = -1.0) -> list[float]:
        """Tool speed averaged over each period that ends after ``since``."""
        return [
            float(
                np.linalg.norm(self.tool[i] - self.tool[i - 1])
                / (self.times[i] - self.times[i - 1])
            )
            for i in range(1, len(self.times))
            if self.times[i] > since
        ]

    def at(self, t: float) -> np.ndarray:
        """The tool position at the last sample at or before ``t`` (the first one if none)."""
        index = max([i for i, s in enumerate(self.times) if s <= t + 1e-9], default=0)
        return self.tool[index]


@dataclass(frozen=True)
class Setup:
    """One seeded instance of a scenario: the flawed plan, the judge and the scripted person."""

    instruction: str
    repeat_instruction: str  # the same request, phrased differently (memory recall)
    plan: dict  # the spec with the mistake in it
    judge: dict
    correction: str  # what the person says
    correct_at: float  # simulated seconds into the run
    sees_mistake: Callable[[Trace], bool]
    responded: Callable[[Trace, float, RewardSpec], bool]
    measure: Callable[[Trace, World], float]  # the scenario's error at the end (reported)
    extra_ok: Callable[[Trace], bool] = lambda trace: True


def _tool_xy_distance(trace: Trace, point: Sequence[float]) -> float:
    return float(np.linalg.norm(trace.tool[-1][:2] - np.asarray(point)[:2]))


# --------------------------------------------------------------------------- scenarios
_PHRASES = {
    "left": ("a bit to the left", (0.0, 1.0)),
    "right": ("a bit to the right", (0.0, -1.0)),
    "forward": ("a bit further away", (1.0, 0.0)),
    "closer": ("a bit closer", (-1.0, 0.0)),
}


def offset_scenario(world: World, rng: np.random.Generator) -> Setup:
    """Hover over a block; the perceived point is 3 cm off in a random direction."""
    target = str(rng.choice([n for n in world.present if n.endswith("block")]))
    fix = str(rng.choice(list(_PHRASES)))
    phrase, direction = _PHRASES[fix]
    true = [round(float(v), 4) for v in world.object_pose(target).position[:2]] + [0.0]
    seen = [round(true[0] - BIAS * direction[0], 4), round(true[1] - BIAS * direction[1], 4), 0.0]
    height = 0.1
    plan = {
        "task": f"hover over the {target}",
        "duration": 8,
        "terms": [
            {
                "id": "above",
                "term": "tool_above",
                "weight": 1.0,
                "params": {"point": seen, "height": height},
            }
        ],
        "success": {"all": [{"term": "above", "below": 0.015}], "hold": 1.0},
    }
    judge = {
        "terms": [
            {"id": "above", "term": "tool_above", "params": {"point": true, "height": height}}
        ],
        "success": {"all": [{"term": "above", "below": 0.015}], "hold": 1.0},
        "duration": 60,
    }
    goal = np.array([true[0], true[1], height])

    def responded(trace: Trace, since: float, spec: RewardSpec) -> bool:
        moved = trace.tool[-1][:2] - trace.at(since)[:2]
        return float(np.dot(moved, direction)) >= RESPONSE_STEP

    return Setup(
        f"hover over the {target}",
        f"hover above the {target}",
        plan,
        judge,
        phrase,
        3.0,
        sees_mistake=lambda trace: _tool_xy_distance(trace, true) > 0.015,
        responded=responded,
        measure=lambda trace, w: float(np.linalg.norm(trace.tool[-1] - goal)),
    )


def _grasp_terms(block: str) -> list[dict]:
    return [
        {"term": "reach", "weight": 1.0, "params": {"object": block}},
        {"term": "grasp", "weight": 0.3, "params": {"object": block, "radius": 0.01}},
        {"term": "grasp_align", "weight": 0.1, "params": {"object": block}},
        {"term": "tool_pointing_down", "weight": 0.05},
    ]


def target_scenario(world: World, rng: np.random.Generator) -> Setup:
    """Lift the red block, when the person meant the blue one."""
    wrong, meant = "red block", "blue block"
    lift = {
        "id": "lift",
        "term": "object_height",
        "weight": 3.0,
        "params": {"object": wrong, "height": 0.06},
    }
    plan = {
        "task": f"lift the {wrong}",
        "duration": 8,
        "terms": [*_grasp_terms(wrong), lift],
        "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5},
    }
    blue = [round(float(v), 4) for v in world.object_pose(meant).position]
    red = world.object_pose(wrong).position.copy()
    judge = {
        "terms": [
            {"id": "at_blue", "term": "tool_to_point", "params": {"point": blue, "axes": "xy"}}
        ],
        "success": {"all": [{"term": "at_blue", "below": 0.03}], "hold": 0.3},
        "duration": 60,
    }

    def heading_wrong(trace: Trace) -> bool:
        start, now = trace.tool[0][:2], trace.tool[-1][:2]
        progress = {
            name: np.linalg.norm(start - p[:2]) - np.linalg.norm(now - p[:2])
            for name, p in ((wrong, red), (meant, np.array(blue)))
        }
        return bool(progress[wrong] > progress[meant])

    def responded(trace: Trace, since: float, spec: RewardSpec) -> bool:
        before = np.linalg.norm(trace.at(since)[:2] - np.array(blue[:2]))
        return before - _tool_xy_distance(trace, blue) >= 0.01

    return Setup(
        f"lift the {wrong}",
        f"pick up the {wrong} and lift it",
        plan,
        judge,
        "no, the blue one",
        1.0,
        sees_mistake=heading_wrong,
        responded=responded,
        measure=lambda trace, w: _tool_xy_distance(trace, blue),
    )


def speed_scenario(world: World, rng: np.random.Generator) -> Setup:
    """Move the tool to one side at up to 0.12 m/s, when the person wants under 0.08 m/s."""
    side = str(rng.choice(["left", "right"]))
    point = [0.22, 0.15 if side == "left" else -0.15, 0.08]
    plan = {
        "task": f"move the gripper to the {side} side",
        "duration": 25,
        "terms": [
            {"id": "goal", "term": "tool_to_point", "weight": 8.0, "params": {"point": point}},
            {
                "id": "speed",
                "term": "tool_speed",
                "weight": 10.0,
                "params": {"speed": 0.12, "mode": "at_most"},
            },
        ],
        "success": {"all": [{"term": "goal", "below": 0.015}], "hold": 0.3},
    }
    judge = {
        "terms": [{"id": "goal", "term": "tool_to_point", "params": {"point": point}}],
        "success": {"all": [{"term": "goal", "below": 0.03}], "hold": 0.3},
        "duration": 60,
    }
    correct_at = 1.0

    def responded(trace: Trace, since: float, spec: RewardSpec) -> bool:
        caps = [
            t.params["speed"]
            for t in spec.terms
            if t.term == "tool_speed" and t.params["mode"] == "at_most"
        ]
        return bool(caps) and trace.speeds(trace.times[-1] - 1e-6)[-1] <= 1.1 * min(caps)

    return Setup(
        f"move the gripper to the {side} side",
        f"move the gripper over to the {side}",
        plan,
        judge,
        "slower",
        correct_at,
        sees_mistake=lambda trace: (
            max(trace.speeds(correct_at - 0.5), default=0.0) > PERSON_SPEED_LIMIT
        ),
        responded=responded,
        measure=lambda trace, w: max(trace.speeds(correct_at + 0.5), default=0.0),
        extra_ok=lambda trace: (
            max(trace.speeds(correct_at + 0.5), default=0.0) <= PERSON_SPEED_LIMIT
        ),
    )


@dataclass(frozen=True)
class Scenario:
    objects: tuple[str, ...]
    make: Callable[[World, np.random.Generator], Setup]
    measure_name: str


SCENARIOS: dict[str, Scenario] = {
    "offset": Scenario(
        ("red block", "blue block", "green bowl"), offset_scenario, "final tool error (m)"
    ),
    "target": Scenario(
        ("red block", "blue block", "green bowl"), target_scenario, "tool to blue block, x-y (m)"
    ),
    "speed": Scenario(("red block",), speed_scenario, "peak tool speed after (m/s)"),
}


# --------------------------------------------------------------------------- one run
@dataclass
class RunResult:
    success: bool
    status: str
    sim_seconds: float
    corrections: int  # corrections the scripted person made in this run
    measure: float
    classify_apply_ms: float | None = None
    effect_sim_s: float | None = None  # sim s from the correction to a measurable response
    notes: list[str] = field(default_factory=list)
    error: str = ""
    recall: dict | None = None  # repeat runs: what the memory recalled and applied

    def as_dict(self) -> dict:
        data = dict(self.__dict__)
        data["measure"] = round(self.measure, 4) if np.isfinite(self.measure) else None
        data["sim_seconds"] = round(self.sim_seconds, 2)
        if self.classify_apply_ms is not None:
            data["classify_apply_ms"] = round(self.classify_apply_ms, 3)
        if self.effect_sim_s is not None:
            data["effect_sim_s"] = round(self.effect_sim_s, 2)
        return data


@dataclass
class _Person:
    """The scripted person: corrects once, at ``setup.correct_at``, if they see the mistake."""

    setup: Setup
    speaks: bool
    instruction: str
    memory: CorrectionMemory | None
    corrections: int = 0
    corrected_at: float | None = None
    wall_ms: float | None = None
    effect: float | None = None
    notes: list[str] = field(default_factory=list)

    def watch(self, mpc: LockstepMPC, trace: Trace) -> None:
        now = mpc.world.time
        if (
            self.corrected_at is not None
            and self.effect is None
            and self.setup.responded(trace, self.corrected_at, mpc.spec)
        ):
            self.effect = now - self.corrected_at
        due = self.speaks and self.corrections == 0 and now >= self.setup.correct_at - 1e-9
        if due and self.setup.sees_mistake(trace):
            self._correct(mpc, trace)

    def _correct(self, mpc: LockstepMPC, trace: Trace) -> None:
        world, before = mpc.world, mpc.spec
        positions, speeds = _positions(world), trace.speeds()  # what perception has at hand
        started = time.perf_counter()
        correction = classify(
            self.setup.correction, world.present, objects_in_spec(before, positions)
        )
        applied = apply_to_spec(
            correction,
            before,
            world.present,
            positions=positions,
            current_speed=speeds[-1] if speeds else None,
        )
        mpc.set_spec(applied.spec)
        self.wall_ms = 1000 * (time.perf_counter() - started)
        self.corrections += 1
        self.corrected_at = world.time
        self.notes += [
            f"at {world.time:.1f} s: '{correction.text}' -> {correction.describe()}",
            *applied.notes,
        ]
        if self.memory is not None:
            self.memory.remember(
                self.instruction,
                correction,
                situation_for_spec(before, world.present, world.time),
            )


def _positions(world: World) -> dict[str, list[float]]:
    return {n: [float(v) for v in world.object_pose(n).position] for n in world.present}


def _run(
    world: World,
    setup: Setup,
    spec: RewardSpec,
    config: MPCConfig,
    person: _Person,
) -> RunResult:
    judge = validate_spec(setup.judge, world.present, add_defaults=False).spec
    mpc = LockstepMPC(world, spec, config, judge=judge)
    trace = Trace()
    trace.add(world.time, _tool(mpc))
    start, status = world.time, "running"
    try:
        while status == "running" and world.time - start < spec.duration - 1e-9:
            status = mpc.step()
            trace.add(world.time, _tool(mpc))
            person.watch(mpc, trace)
    finally:
        mpc.close()
    status = "timeout" if status == "running" else status
    success = status == "success" and setup.extra_ok(trace)
    return RunResult(
        success,
        status,
        world.time - start,
        person.corrections,
        setup.measure(trace, world),
        person.wall_ms,
        person.effect,
        person.notes,
    )


def _tool(mpc: LockstepMPC) -> np.ndarray:
    return np.asarray(mpc.measure_now().tool).reshape(-1)[:3].copy()


# --------------------------------------------------------------------------- an episode
def _episode(
    world: World,
    name: str,
    seed: int,
    config: MPCConfig,
    memory_path: Path,
    embedder: Embedder,
    threshold: float,
) -> dict:
    """The three runs of one seeded scenario; the log at ``memory_path`` starts empty."""
    scenario = SCENARIOS[name]
    world.reset(seed, list(scenario.objects))
    setup = scenario.make(world, np.random.default_rng(seed))
    plan = validate_spec(setup.plan, world.present).spec
    memory_path.unlink(missing_ok=True)
    CorrectionMemory(memory_path).cache_path.unlink(missing_ok=True)
    runs: dict[str, dict] = {}
    for run in RUNS:
        world.reset(seed, list(scenario.objects))
        memory = CorrectionMemory(memory_path, embedder=embedder)  # re-read: as after a restart
        try:
            if run == "repeat":
                result = _repeat_run(world, setup, plan, config, memory, threshold)
            else:
                person = _Person(
                    setup,
                    speaks=run == "with",
                    instruction=setup.instruction,
                    memory=memory if run == "with" else None,
                )
                result = _run(world, setup, plan, config, person)
        except Lang2PolicyError as exc:
            result = RunResult(
                False, "error", 0.0, 0, float("nan"), error=f"{type(exc).__name__}: {exc}"
            )
        runs[run] = result.as_dict()
    return {
        "scenario": name,
        "seed": seed,
        "instruction": setup.instruction,
        "repeat_instruction": setup.repeat_instruction,
        "correction": setup.correction,
        **runs,
    }


def _repeat_run(
    world: World,
    setup: Setup,
    plan: RewardSpec,
    config: MPCConfig,
    memory: CorrectionMemory,
    threshold: float,
) -> RunResult:
    """The paraphrased instruction, planned with the remembered edits applied."""
    recalled = memory.edits_for(setup.repeat_instruction, threshold)
    recall_ms = memory.last_recall_ms
    applied, used = apply_recalled(plan, recalled, world.present, positions=_positions(world))
    person = _Person(setup, speaks=True, instruction=setup.repeat_instruction, memory=memory)
    result = _run(world, setup, applied.spec, config, person)
    result.notes = [*applied.notes, *result.notes]
    result.recall = {
        "recalled": len(recalled),
        "applied": len(used),
        "best_score": max((r.score for r in recalled), default=None),
        "recall_ms": round(recall_ms, 2),
    }
    return result


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
) -> dict:
    """Run every scenario for ``episodes`` seeds; the report as JSON-able data."""
    names = list(scenarios or SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise Lang2PolicyError(f"unknown scenarios {unknown}; valid scenarios: {list(SCENARIOS)}")
    if episodes < 1 or not 2 <= samples <= 1024 or not 0.0 <= threshold <= 1.0:
        raise Lang2PolicyError(
            "--episodes must be at least 1, --samples in [2, 1024] and --threshold in [0, 1]"
        )
    world = World(robot)
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
                _episode(
                    world, name, seed, config, folder / f"{name}-{seed}.jsonl", embedder, threshold
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


def format_text(report: dict) -> str:
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


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cell(rate: dict) -> str:
    return f"{rate['successes']}/{rate['episodes']}"


# --------------------------------------------------------------------------- the command
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lang2policy bench corrections",
        description="Scripted correction scenarios: success without and with the correction, "
        "correction-to-effect latency, corrections still needed with memory on.",
    )
    parser.add_argument("--robot", default="so101", help="robot (default: so101)")
    parser.add_argument("--episodes", type=int, default=3, help="seeded episodes per scenario")
    parser.add_argument("--seed", type=cli_types.seed, default=0, help="first episode seed")
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
    parser.add_argument("--json", action="store_true", help="print JSON only")
    return parser


def main(argv: list[str]) -> int:
    """``lang2policy bench corrections [flags]``; 0 when it ran, 2 on a usage error."""
    args = build_parser().parse_args(argv)
    scenarios = None
    if args.scenarios:
        scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    plans = {p.strip() for p in args.plans.split(",") if p.strip()}
    if not plans or plans - {"reward", "code"}:
        print(
            f"lang2policy: error: --plans takes reward, code or both; got {args.plans!r}",
            file=sys.stderr,
        )
        return 2
    try:
        reward, code = _split_scenarios(scenarios)
        report = _reward_plans(args, reward) if "reward" in plans and reward != [] else {}
        if "code" in plans and code != []:
            report["code_plans"] = _code_plans(args, code)
    except Lang2PolicyError as exc:
        print(f"lang2policy: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else _text(report))
    return 0


def _reward_plans(args: argparse.Namespace, scenarios: list[str] | None) -> dict:
    return run(
        args.robot,
        args.episodes,
        args.seed,
        scenarios,
        args.samples,
        args.threshold,
        args.memory_dir,
        progress=not args.json,
    )


def _split_scenarios(names: list[str] | None) -> tuple[list[str] | None, list[str] | None]:
    """``--scenarios`` split into the reward plans' and the code plans' (None: all of them)."""
    from lang2policy.bench.code_corrections import SCENARIOS as CODE_SCENARIOS

    if names is None:
        return None, None
    unknown = [n for n in names if n not in SCENARIOS and n not in CODE_SCENARIOS]
    if unknown:
        valid = list(dict.fromkeys([*SCENARIOS, *CODE_SCENARIOS]))
        raise Lang2PolicyError(f"unknown scenarios {unknown}; valid scenarios: {valid}")
    return [n for n in names if n in SCENARIOS], [n for n in names if n in CODE_SCENARIOS]


def _code_plans(args: argparse.Namespace, names: list[str] | None) -> dict:
    """The code-plan scenarios (``lang2policy.bench.code_corrections``), on the SO-101."""
    from lang2policy.bench.code_corrections import SCENARIOS as CODE_SCENARIOS
    from lang2policy.bench.code_corrections import run_code

    if args.episodes < 1:
        raise Lang2PolicyError("--episodes must be at least 1")
    chosen = list(CODE_SCENARIOS) if names is None else names
    runs = sum(2 if CODE_SCENARIOS[n].legitimate else 1 for n in chosen) * args.episodes
    with tqdm(total=runs, desc="bench corrections (code)", unit="run", disable=args.json) as bar:
        return run_code(chosen, args.episodes, args.seed, bar)


def _text(report: dict) -> str:
    from lang2policy.bench.code_corrections import format_code

    parts = [format_text(report)] if "scenarios" in report else []
    if "code_plans" in report:
        parts.append(format_code(report["code_plans"]))
    return "\n\n".join(parts)
