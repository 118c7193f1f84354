"""``lang2policy bench vla --graph``: the VLA through the ROS graph, beside the standalone
``bench vla`` on the same evaluation episodes, in one run (issue 18, acceptance row 3).

1. The episodes: ``vla.eval.rollout.evaluation_specs`` (``--families``, ``--per-split``, default 1
   here, ``--seed``), those of ``--splits``. For each, the scene ``set_up_scene`` draws in a
   ``SimSession`` of this process: the world seed, the objects and the look
   (``vla.sim.scenes.Appearance``), and the objects' positions.
2. Standalone: ``bench vla``'s own episode runner on those specs (policy, then the scripted
   oracle), in ``--workers`` processes; the policy's latency on one core.
3. Through the graph: the VLA node (``--model``) starts once, as a process of the graph's
   node list (``lang2policy.graph.nodes``, ``vla:=true``), its object input on the sim's
   ground truth (``/sim/objects``: no perception node). Per episode a sim node with the
   episode's ``seed``, ``objects`` and ``appearance`` (the same scene, exactly) and a safety
   node start as processes; a client process (``lang2policy.ros.vla_bench_probe``) sends the
   instruction on ``/lang2policy/skill`` as any client would and records until the VLA
   node's terminal status; the sim and safety nodes stop. The processes are
   ``bench graph``'s (``graph_idle.running_graph``, ``graph_bench.ProbeProcess``).
   With ``--busy-cores N`` the graph episodes run a second time while ``N`` other processes
   keep cores busy (``busy_cores``), reported beside the quiet run: the success and the
   control rate a user on a busy machine gets. ``--realism LEVEL`` (one level) puts the
   standalone world and each episode's sim node under that profile: the same look, and the
   sim node's cameras add its sensor effects as the standalone renderer does.
4. Success per episode from the VLA node (its status: the success check held for
   ``rollout.SUCCESS_HOLD`` s) and, independently, from the object poses the sim published
   (``vla_graph_report``). The report goes to stdout and, as JSON, to ``--out``.

Processes only: this module imports no ROS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from lang2policy.bench import vla
from lang2policy.bench import vla_graph_report as report_of
from lang2policy.bench.busy_cores import busy_cores
from lang2policy.bench.graph_bench import ProbeProcess
from lang2policy.bench.graph_idle import (
    NodeProcess,
    graph_env,
    graph_specs,
    running_graph,
    wait_started,
)
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph import nodes as graph
from lang2policy.graph import topics

PROBE = "lang2policy.ros.vla_bench_probe"
DEFAULT_OUT = Path("out/vla_graph_bench.json")
STANDALONE_PER_SPLIT, GRAPH_PER_SPLIT = 10, 1  # --per-split defaults without / with --graph
NODES_READY_TIMEOUT = 90.0  # s for a fresh sim and safety node to be up and heard
END_MARGIN = 30.0  # s past a skill's budget (and the node's start-up grace) to wait


@dataclass(frozen=True)
class EpisodeScene:
    """What the sim node needs to show an episode's scene, and where its objects stand."""

    seed: int
    objects: tuple[str, ...]
    appearance: dict
    positions: dict[str, list[float]]


def episode_scenes(specs: list, realism: str = "off") -> list[EpisodeScene]:
    """Each spec's scene as ``set_up_scene`` draws it for ``bench vla`` in a world at
    ``realism`` (seeded: the same)."""
    from lang2policy.realism import load_realism
    from lang2policy.session.sim import SimSession
    from lang2policy.vla.sim.episodes import set_up_scene

    session = SimSession("so101", realism=load_realism(realism))
    world, scenes = session.world, []
    for spec in specs:
        appearance = set_up_scene(session, spec)
        try:
            scenes.append(EpisodeScene(
                int(world.seed), tuple(world.present), appearance.to_dict(world),
                {n: world.object_pose(n).position.tolist() for n in world.present},
            ))  # fmt: skip
        finally:
            appearance.restore(world)
    return scenes


def node_specs(model: Path) -> dict[str, graph.NodeSpec]:
    """The graph's sim, safety and VLA nodes (``vla:=true``, the local backend on ``model``),
    the VLA node's objects from the sim's ground truth."""
    specs = {s.executable: s for s in graph_specs(vla=True, vla_backend="local")}
    vla_node = specs["vla_node"]
    specs["vla_node"] = dataclasses.replace(
        vla_node,
        overrides={**vla_node.overrides, "model": str(model.resolve())},
        remaps=(*vla_node.remaps, (topics.OBJECTS.name, topics.SIM_OBJECTS.name)),
    )
    return {name: specs[name] for name in ("sim_node", "safety_node", "vla_node")}


def sim_spec(base: graph.NodeSpec, scene: EpisodeScene, realism: str = "off") -> graph.NodeSpec:
    """``base`` showing ``scene`` at ``realism`` (its look and its cameras' sensor effects)."""
    overrides = {
        **base.overrides,
        "realism": realism,
        "seed": scene.seed,
        "objects": ",".join(scene.objects),
        "appearance": json.dumps(scene.appearance),
    }
    return dataclasses.replace(base, overrides=overrides)


def _episode_plan(spec, settle: float) -> dict:
    from lang2policy.vla.eval.rollout import MAX_SECONDS

    budget = MAX_SECONDS[spec.task.family]
    return {"skill": spec.instruction, "settle": settle, "ready_timeout": NODES_READY_TIMEOUT,
            "timeout": budget + END_MARGIN}  # fmt: skip


def run_graph_episode(
    spec, scene: EpisodeScene, specs: dict, vla_node: NodeProcess, domain: int, args
) -> dict:
    """One episode through the graph (a fresh sim and safety node): the client's result,
    with ``setup_s`` (launch to the send) and ``error`` (None when it ran to its end)."""
    settle = args.settle
    plan = _episode_plan(spec, settle)
    launched = time.monotonic()
    probe = ProbeProcess(plan, graph_env(domain), module=PROBE)
    try:
        sim = sim_spec(specs["sim_node"], scene, args.realism)
        with running_graph([sim, specs["safety_node"]], domain) as nodes:
            wait = plan["ready_timeout"] + settle + plan["timeout"] + 30
            result = probe.next_json(wait, [*nodes, vla_node])
    except Lang2PolicyError as exc:
        result = {"final": None, "error": str(exc)}
    finally:
        probe.stop()
    result["setup_s"] = round(time.monotonic() - launched - result.get("wall_s", 0.0), 2)
    return result


def run_graph_episodes(args: argparse.Namespace, specs: list, scenes: list) -> dict:
    """Every episode through the graph, with a progress bar: the clients' results and the
    VLA node's start-up time."""
    nodes = node_specs(Path(args.model))
    domain = args.domain if args.domain is not None else 100 + os.getpid() % 60
    results: list[dict] = []
    with running_graph([nodes["vla_node"]], domain) as (vla_node,):
        started = wait_started([vla_node])
        bar = tqdm(total=len(specs), desc="vla --graph", unit="ep", disable=args.json)
        for spec, scene in zip(specs, scenes, strict=True):
            if vla_node.process.poll() is not None:
                results.append({"final": None, "error": f"the VLA node exited:\n{vla_node.tail()}"})
                continue
            results.append(run_graph_episode(spec, scene, nodes, vla_node, domain, args))
            done = sum(r["final"] is not None and r["final"]["state"] == "success" for r in results)
            bar.set_postfix_str(f"{spec.task.family}/{spec.split}: "
                                f"{(results[-1]['final'] or {}).get('state', 'error')}; "
                                f"success {done}/{len(results)}")  # fmt: skip
            bar.update()
        bar.close()
    return {"results": results, "vla_startup_s": round(started, 1), "domain": domain}


def run_graph(args: argparse.Namespace) -> dict:
    """The whole ``--graph`` run (see the module docstring): the report, also in ``--out``."""
    from lang2policy.vla.eval.rollout import evaluation_specs
    from lang2policy.vla.spec.tasks import FAMILIES

    began = time.monotonic()
    families = tuple(args.families or FAMILIES)
    specs = [s for s in evaluation_specs(families, args.per_split, args.seed)
             if s.split in args.splits]  # fmt: skip
    scenes = episode_scenes(specs, args.realism)
    alone = argparse.Namespace(model=args.model, video=None, json=args.json,
                               workers=min(args.workers, len(specs)),
                               executor=getattr(args, "executor", "local"),
                               ray_address=getattr(args, "ray_address", None))  # fmt: skip
    standalone = vla.run_episodes(alone, specs, realism=args.realism)
    latency = vla.measure_latency(str(args.model))
    through = run_graph_episodes(args, specs, scenes)
    report = report_of.build(specs, scenes, standalone, through, latency)
    if args.busy_cores:
        with busy_cores(args.busy_cores):
            loaded = run_graph_episodes(args, specs, scenes)
        busy = report_of.build(specs, scenes, standalone, loaded, latency)
        report["busy"] = report_of.busy_summary(report, busy, args.busy_cores)
    report |= {
        "model": str(args.model), "seed": args.seed, "per_split": args.per_split,
        "realism": args.realism,
        "families": list(families), "splits": list(args.splits),
        "seconds": round(time.monotonic() - began), "out": str(args.out),
        "load_average": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count(),
    }  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return report


# ----------------------------------------------------------------- command line
def _splits(text: str) -> tuple[str, ...]:
    from lang2policy.vla.eval.rollout import SPLITS

    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    if not chosen or any(s not in SPLITS for s in chosen):
        raise argparse.ArgumentTypeError(f"splits are a comma-separated subset of {SPLITS}")
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench vla``'s arguments and the ``--graph`` ones."""
    vla.add_arguments(parser)
    parser.set_defaults(per_split=None)  # 10 standalone, 1 with --graph
    parser.add_argument(
        "--graph", action="store_true",
        help="through the ROS graph (sim, safety and VLA nodes as processes) beside "
        "standalone on the same episodes; --per-split 1 by default",
    )  # fmt: skip
    parser.add_argument("--splits", type=_splits, default=None,
                        help="--graph: comma-separated splits (default: all)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="--graph: JSON report")
    parser.add_argument("--settle", type=float, default=2.0,
                        help="--graph: s between the graph being up and the skill")  # fmt: skip
    parser.add_argument("--domain", type=int, help="--graph: ROS_DOMAIN_ID (default: free)")
    parser.add_argument("--busy-cores", type=int, default=0,
                        help="--graph: run the graph episodes again while this many other "
                        "processes keep a core busy each, beside the quiet run")  # fmt: skip


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench vla [--graph]``."""
    from lang2policy.vla.eval.rollout import SPLITS

    graph_mode = getattr(args, "graph", False)
    if args.per_split is None:
        args.per_split = GRAPH_PER_SPLIT if graph_mode else STANDALONE_PER_SPLIT
    if args.per_split < 1:
        raise ConfigError(f"--per-split must be at least 1, got {args.per_split}")
    if not graph_mode:
        if getattr(args, "splits", None) is not None:
            raise ConfigError("--splits needs --graph (bench vla runs every split)")
        return vla.run_args(args)
    args.splits = args.splits or SPLITS
    levels = vla.realism_levels(getattr(args, "realism", "off"))
    if len(levels) != 1:
        raise ConfigError(f"--graph runs one realism level at a time; got --realism {levels}")
    args.realism = levels[0]
    if args.settle < 0:
        raise ConfigError(f"--settle must be >= 0 s, got {args.settle}")
    if not 0 <= getattr(args, "busy_cores", 0) <= (os.cpu_count() or 1):
        raise ConfigError(f"--busy-cores must be from 0 to the {os.cpu_count()} cores here, "
                          f"got {args.busy_cores}")  # fmt: skip
    args.busy_cores = getattr(args, "busy_cores", 0)
    if not (Path(args.model) / "config.json").exists():
        raise ConfigError(f"{args.model} is no VLA model directory (no config.json)")
    return run_graph(args)


def format_text(report: dict) -> str:
    if report.get("benchmark") == report_of.BENCHMARK:
        return report_of.format_text(report)
    return vla.format_text(report)


def exit_code(report: dict) -> int:
    if report.get("benchmark") == report_of.BENCHMARK:
        busy = report.get("busy") or {"passed": True}
        return 0 if report["passed"] and busy["passed"] else 1
    return vla.exit_code(report)
