"""``lang2policy bench graph``: the live graph of ``lang2policy sim --headless`` measured end to
end, in one run, against the acceptance figures of issue 16.

1. A client process (``lang2policy.ros.graph_bench_probe``) starts listening; then the graph's
   nodes (``lang2policy.graph.nodes`` for the chosen options: the simulated SO-101 on a seeded
   scene, ground-truth perception, the planner on ``--llm``) start as processes in a private ROS
   graph (a fresh ``ROS_DOMAIN_ID``, discovery on localhost). Start-up time: from launching the
   first node to the planner's ``ready`` status line (sent once its LLM prompts are warm).
2. The client sends the instructions of each route of ``--routes`` on the instruction topic,
   one after the other, as a user's client would, and records: instruction -> first arm motion
   (the first ``/joint_states`` whose arm joints left where they were at the send by more than
   0.01 rad), the planning time (send -> the planner's ``plan`` status), the motion time (sim
   time span in which an arm joint moved), the wall time (send -> the final status), and the
   object poses the sim node publishes (``/sim/objects``, ground truth) for success.
3. The stop: a long shoulder_pan move streamed to the safety node, ``/lang2policy/stop``
   called at speed; halt time and overshoot from the joint states (``graph_bench_analysis``).
4. Idle CPU per node (``lang2policy.bench.graph_idle.measure_idle_cpu``, a graph of its own)
   and the controller's planning rate in the graph vs standalone
   (``lang2policy.bench.controller_rate``), unless skipped.

The LLM server keeps processed prompt prefixes on disk (``llm.llama_disk_prefixes``). The
bench gives its graphs a fresh directory (``--keep-prefixes``: the user's own), so the first
start-up is a first-ever start and the idle graph's, started after it, is a restart.

Processes only: this module imports no ROS. Progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from queue import Empty, Queue

from lang2policy import cli_types
from lang2policy.bench import graph_bench_analysis as analysis
from lang2policy.bench.graph_idle import graph_env, graph_specs, measure_idle_cpu, running_graph
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph.rules import LLM_FILE_KINDS
from lang2policy.llm.llama_disk_prefixes import ROOT_ENV as PREFIX_ROOT_ENV
from lang2policy.scene.robot_description import load_robot_description

OBJECTS = ("red block", "blue block", "blue bowl", "green bowl")
ROUTES = ("code", "reward")
# Per route, the instructions sent (the first ``--per-route`` of them) and their success check.
INSTRUCTIONS: dict[str, tuple[dict, ...]] = {
    "code": (
        {"text": "put the red block in the blue bowl",
         "check": {"kind": "in", "object": "red block", "bowl": "blue bowl"}},
        {"text": "put the red block in the green bowl",
         "check": {"kind": "in", "object": "red block", "bowl": "green bowl"}},
        # compound and spatial: two steps, the second an offset read from the words
        {"text": "put the red block in the blue bowl, then move the blue block 5 cm to the left",
         "check": {"kind": "all", "checks": [
             {"kind": "in", "object": "red block", "bowl": "blue bowl"},
             {"kind": "offset", "object": "blue block", "by": [0.0, 0.05]}]}},
    ),
    "reward": (  # the blue block: still on the table after the code route's instructions
        {"text": "lift the blue block 10 cm",
         "check": {"kind": "lift", "object": "blue block", "height": 0.10}},
    ),
}  # fmt: skip
PROBE_START_TIMEOUT = 60.0  # s for the client process to listen


def say(text: str) -> None:
    """A progress line on stderr (stdout carries the report)."""
    print(f"[graph-bench] {text}", file=sys.stderr, flush=True)


def instructions(routes: tuple[str, ...], per_route: int) -> list[dict]:
    """The instructions the bench sends, route by route."""
    return [
        {**item, "route": route} for route in routes for item in INSTRUCTIONS[route][:per_route]
    ]


def graph_options(args: argparse.Namespace) -> dict:
    """The graph's options (fields of ``GraphOptions``): one route asked: the graph plans with
    that route; both: ``auto`` chooses per instruction."""
    routes = tuple(args.routes)
    return {
        "llm": _llm_with_absolute_path(args.llm),
        "seed": args.seed,
        "objects": tuple(args.objects),
        "route": routes[0] if len(routes) == 1 else "auto",
        "grounding": args.grounding,
        "cameras": args.cameras,
    }


def _llm_with_absolute_path(llm: str) -> str:
    """``replay:FILE`` and the other file kinds with FILE absolute: nodes may run elsewhere."""
    kind, colon, path = llm.partition(":")
    if colon and path and kind in LLM_FILE_KINDS:
        return f"{kind}:{Path(path).expanduser().resolve()}"
    return llm


# ----------------------------------------------------------------- the client process
class ProbeProcess:
    """The client (``module``: ``lang2policy.ros.graph_bench_probe``, or another client
    that takes its plan as a JSON argument): its stdout lines, in order."""

    def __init__(
        self, plan: dict, env: dict[str, str], module: str = "lang2policy.ros.graph_bench_probe"
    ) -> None:
        self.lines: Queue[str] = Queue()
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(plan)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None,  # its progress lines reach the user as they come
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def next_json(self, timeout: float, nodes=()) -> dict:
        """The next JSON line; an error when it does not come, the client or a node exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Empty):
                line = self.lines.get(timeout=0.1)
                if line.startswith("{"):
                    return json.loads(line)
                continue
            if self.process.poll() is not None and self.lines.empty():
                raise Lang2PolicyError(f"the client exited ({self.process.returncode})")
            for node in nodes:
                if node.process.poll() is not None:
                    raise Lang2PolicyError(
                        f"{node.spec.executable} exited with code {node.process.returncode} "
                        f"during the bench:\n{node.tail()}"
                    )
        raise Lang2PolicyError(f"the client sent nothing within {timeout:g} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 2)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def run_client(options: dict, plan: dict, domain: int) -> tuple[dict, float]:
    """The graph and the client session (see the module docstring): (the client's result,
    the monotonic time the first node was launched)."""
    specs = graph_specs(**options)
    env = graph_env(domain)
    say(f"starting the client, then {len(specs)} nodes (ROS_DOMAIN_ID={domain})...")
    probe = ProbeProcess(plan, env)
    try:
        probe.next_json(PROBE_START_TIMEOUT)  # {"listening": true}
        launched = time.monotonic()
        with running_graph(specs, domain) as nodes:
            total = plan["ready_timeout"] + plan["task_timeout"] * len(plan["instructions"]) + 90
            result = probe.next_json(total, nodes)
            say("client done; stopping the graph...")
    finally:
        probe.stop()
    return result, launched


# ----------------------------------------------------------------- one run
@contextlib.contextmanager
def prefix_directory(keep: bool):
    """The graphs' directory of kept LLM prompt prefixes: a fresh one, removed afterwards,
    unless ``keep`` (then the user's, as ``lang2policy sim`` uses it)."""
    if keep:
        yield
        return
    old = os.environ.get(PREFIX_ROOT_ENV)
    with tempfile.TemporaryDirectory(prefix="lang2policy-bench-prefixes-") as root:
        os.environ[PREFIX_ROOT_ENV] = root
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(PREFIX_ROOT_ENV, None)
            else:
                os.environ[PREFIX_ROOT_ENV] = old


def _first_motion(tasks: list[dict]) -> dict:
    latencies = [t["first_motion_s"] for t in tasks if t["first_motion_s"] is not None]
    return {
        "p50_s": analysis.rounded(analysis.percentile(latencies, 50)),
        "p90_s": analysis.rounded(analysis.percentile(latencies, 90)),
        "n": len(latencies),
        "missing": len(tasks) - len(latencies),
        "first_after_startup_s": tasks[0]["first_motion_s"] if tasks else None,
    }


def _idle(args: argparse.Namespace, options: dict, domain: int) -> dict:
    if args.skip_idle:
        return {"unavailable": "skipped (--skip-idle)"}
    say(f"idle CPU: a fresh graph, measured over {args.idle_seconds:g} s...")
    try:
        return measure_idle_cpu(
            args.idle_seconds, settle=5.0, domain_id=domain, quiet=False, **options
        )
    except Exception as exc:  # reported in the table; the rest still counts
        return {"unavailable": f"{type(exc).__name__}: {exc}"}


def _controller(args: argparse.Namespace, domain: int) -> dict:
    """``controller_rate_in_graph_vs_standalone`` (imported here: a separate part that may be
    missing or broken; the table then says why)."""
    if args.skip_controller:
        return {"unavailable": "skipped (--skip-controller)"}
    say(f"controller rate: in a graph and standalone, {args.controller_seconds:g} s each...")
    try:
        from lang2policy.bench.controller_rate import controller_rate_in_graph_vs_standalone

        return controller_rate_in_graph_vs_standalone(
            seconds=args.controller_seconds, domain_id=domain
        )
    except Exception as exc:  # reported in the table; the rest still counts
        return {"unavailable": f"{type(exc).__name__}: {exc}"}


def run_bench(args: argparse.Namespace) -> dict:
    """The whole benchmark: the report (figures, rows with targets and verdicts)."""
    options = graph_options(args)
    plan = {
        "instructions": instructions(tuple(args.routes), args.per_route),
        "ready_timeout": args.ready_timeout,
        "task_timeout": args.task_timeout,
        "stop": not args.skip_stop,
    }
    domain = args.domain if args.domain is not None else 100 + os.getpid() % 60
    with prefix_directory(args.keep_prefixes):
        result, launched = run_client(options, plan, domain)
        idle = _idle(args, options, (domain + 1) % 233)
    sizes = load_robot_description("so101").objects
    tasks = [analysis.task_figures(task, sizes) for task in result["tasks"]]
    ready = result.get("ready") or {}
    stop = result.get("stop")
    report = {
        "benchmark": "graph",
        "options": {**options, "objects": list(options["objects"]), "routes": list(args.routes)},
        "cpu_count": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 2),
        "error": result.get("error"),
        "startup_s": analysis.rounded(ready["t"] - launched, 2) if ready else None,
        "ready_detail": ready.get("detail"),
        "first_motion": _first_motion(tasks),
        "tasks": tasks,
        "stop": analysis.stop_figures(stop) if stop else {"unavailable": _no_stop(args, result)},
    }
    report["idle_cpu"] = idle
    report["restart_s"] = idle.get("startup_s")
    report["controller_rate"] = _controller(args, (domain + 2) % 233)
    report["rows"] = analysis.latency_rows(report) + analysis.resource_rows(report)
    report["passed"] = report["error"] is None and all(
        row["passed"] is not False for row in report["rows"]
    )
    return report


def _no_stop(args: argparse.Namespace, result: dict) -> str:
    return "skipped (--skip-stop)" if args.skip_stop else f"not measured: {result.get('error')}"


# ----------------------------------------------------------------- command line
def timeline(task: dict) -> str:
    """Where an instruction's time went: each status (and planner phase) at its time after
    the send, then the first arm motion, e.g. ``received 0.01, running: planning 0.02, ...``."""
    marks = [(t, name) for name, t in task.get("statuses", []) if t is not None]
    if task.get("first_motion_s") is not None:
        marks.append((task["first_motion_s"], "FIRST MOTION"))
    return ", ".join(f"{name} {t:.1f}" for t, name in sorted(marks, key=lambda m: m[0]))


def format_text(report: dict) -> str:
    """The table: figure, value, target, verdict; then idle CPU per node."""
    options = report["options"]
    lines = [
        f"lang2policy bench graph: llm {options['llm']}, seed {options['seed']}, routes "
        f"{','.join(options['routes'])} (graph route {options['route']}, grounding "
        f"{options['grounding']}), {report['cpu_count']} CPUs, load {report['load_average']}",
    ]
    if report["error"]:
        lines.append(f"  error: {report['error']}")
    width = max(len(row["name"]) for row in report["rows"])
    for row in report["rows"]:
        verdict = {True: "PASS", False: "FAIL", None: "-"}[row["passed"]]
        lines.append(f"  {row['name']:<{width}}  {verdict:<4}  {row['value']}  [{row['target']}]")
    nodes = report["idle_cpu"].get("nodes", {})
    if nodes:
        per_node = ", ".join(f"{name} {cores:.3f}" for name, cores in nodes.items())
        lines.append(f"  idle CPU per node (cores): {per_node}")
    for task in report["tasks"]:
        lines.append(f"  {task['instruction']!r}: {timeline(task)}")
        if not task["success"]:
            detail = f"{task['outcome']}: {task['outcome_detail']}"[:240]
            lines.append(f"  {task['instruction']!r} -> {detail}")
    first = report["first_motion"]["first_after_startup_s"]
    if first is not None:
        lines.append(f"  first instruction after start-up: first motion after {first:.2f} s")
    lines.append(f"  overall: {'PASS' if report['passed'] else 'FAIL'}")
    return "\n".join(lines)


def _routes(text: str) -> tuple[str, ...]:
    routes = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in routes if r not in ROUTES]
    if not routes or bad:
        raise argparse.ArgumentTypeError(f"routes are a comma-separated subset of {ROUTES}")
    return routes


def _objects(text: str) -> tuple[str, ...]:
    return tuple(o.strip() for o in cli_types.text(text).split(",") if o.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", default="local", help="the planner's LLM (as lang2policy sim)")
    parser.add_argument("--seed", type=cli_types.seed, default=1, help="scene seed")
    parser.add_argument("--objects", type=_objects, default=OBJECTS, help="objects on the table")
    parser.add_argument("--routes", type=_routes, default=ROUTES, help="code,reward (default)")
    parser.add_argument("--per-route", type=int, default=3, help="instructions per route (max)")
    parser.add_argument("--grounding", choices=("on", "off"), default="on", help="code plans")
    parser.add_argument("--no-cameras", dest="cameras", action="store_false", help="no images")
    parser.add_argument("--skip-idle", action="store_true", help="no idle CPU measurement")
    parser.add_argument("--skip-controller", action="store_true", help="no controller rate")
    parser.add_argument("--skip-stop", action="store_true", help="no stop measurement")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle CPU window (s)")
    parser.add_argument("--controller-seconds", type=float, default=10.0, help="rate window")
    parser.add_argument("--ready-timeout", type=float, default=300.0, help="s to 'ready'")
    parser.add_argument("--task-timeout", type=float, default=240.0, help="s per instruction")
    parser.add_argument(
        "--keep-prefixes", action="store_true", help="start with the LLM prefixes kept on disk"
    )
    parser.add_argument("--domain", type=int, help="ROS_DOMAIN_ID of the graph (default: free)")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench graph``."""
    if args.per_route < 1:
        raise ConfigError(f"--per-route must be at least 1, got {args.per_route}")
    return run_bench(args)


def exit_code(report: dict) -> int:
    """1 when a figure misses its target or the run failed."""
    return 0 if report["passed"] else 1
