"""``lang2policy bench idle``: the CPU each node of the idle graph uses (issue 16: "idle means
idle", at most ``TARGET_CORES`` in total on the 2-core machine).

The graph is started as ``lang2policy sim --headless`` starts it: the nodes of
``lang2policy.graph.nodes`` for the given options, each a process of its own
(``lang2policy.graph.node_command``), in a private ROS graph (a fresh ``ROS_DOMAIN_ID``,
discovery on localhost only). Once every node has logged its first line (it is built) and
``settle`` more seconds have passed (discovery, first messages), each node's CPU time is read
from ``/proc/<pid>/stat`` (user + system, of the node and every process it started, e.g. an
LLM server) at the start and the end of a ``seconds`` long window: cores used = CPU seconds /
wall seconds. Nothing is sent to the graph: this is its cost while no one asks anything.

Processes only, no ROS import: this module runs where the nodes' Python runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lang2policy.errors import Lang2PolicyError
from lang2policy.graph import nodes as graph
from lang2policy.graph.node_command import check_installed, node_command
from lang2policy.graph.options import GraphOptions

TARGET_CORES = 0.25  # issue 16: the idle graph, all nodes, ground-truth perception, no viewer
STARTUP_TIMEOUT = 180.0  # s for every node to log its first line (a local LLM loads first)
STOP_TIMEOUT = 15.0  # s a node gets to exit after SIGINT before SIGKILL
# Log text after which a node is done starting, beyond its first line: the planner warms its
# LLM up (the server evaluates the fixed prompts) and then says "ready" (issue 16).
READY_TEXT = {"planner_node": "]: ready:"}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- /proc
def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and
    parentheses): index 0 is the state (field 3 of proc(5)), 1 the parent pid."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` used, plus those of its children it has reaped
    (proc(5) fields 14-17: utime, stime, cutime, cstime, in clock ticks)."""
    fields = _stat_fields(pid)
    ticks = sum(int(v) for v in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every living process below it (children, grandchildren...)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            children.setdefault(int(_stat_fields(int(entry.name))[1]), []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        queue.extend(children.get(current, ()))
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and every process below it (a process that exits meanwhile counts
    through its parent's reaped-children fields)."""
    total = 0.0
    for member in descendants(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):  # exited meanwhile
            total += process_cpu_seconds(member)
    return total


def cores_used(
    pids: dict[str, int], seconds: float, sleep=time.sleep, clock=time.monotonic
) -> dict[str, float]:
    """Cores each named process tree used over ``seconds`` of wall time (CPU s / wall s)."""
    start = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    began = clock()
    sleep(seconds)
    end = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    wall = clock() - began
    return {name: max(0.0, end[name] - start[name]) / wall for name in pids}


# ----------------------------------------------------------------- the graph
@dataclass
class NodeProcess:
    """One node of the graph, started; its output kept (last lines) for progress and errors."""

    spec: graph.NodeSpec
    process: subprocess.Popen
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    started: threading.Event = field(default_factory=threading.Event)  # its first log line
    ready: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        marker = f"[{self.spec.name}]"
        ready = READY_TEXT.get(self.spec.executable)
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if marker in line:
                self.started.set()
                if ready is None or ready in line:
                    self.ready.set()

    def tail(self, count: int = 15) -> str:
        return "\n".join(f"    {line}" for line in list(self.lines)[-count:])

    def stop(self) -> int:
        """SIGINT to its session (the node and what it started), SIGKILL after a while."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait(timeout=5)


def graph_env(domain_id: int) -> dict[str, str]:
    """The nodes' environment: a private ROS graph on loopback, this source tree importable."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=str(domain_id),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
        PYTHONUNBUFFERED="1",
    )
    env.setdefault("MUJOCO_GL", "egl")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return env


def graph_specs(**graph_options) -> list[graph.NodeSpec]:
    """The headless graph's nodes for ``graph_options`` (fields of ``GraphOptions``)."""
    specs = graph.build(GraphOptions(**{**graph_options, "terminal": False}))
    check_installed(specs)
    return specs


@contextlib.contextmanager
def running_graph(specs: list[graph.NodeSpec], domain_id: int) -> Iterator[list[NodeProcess]]:
    """The nodes of ``specs`` as processes for the ``with`` block; stopped in every path."""
    started: list[NodeProcess] = []
    env = graph_env(domain_id)
    try:
        for spec in specs:
            process = subprocess.Popen(
                node_command(spec),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,  # a Ctrl-C on the terminal reaches it through stop()
            )
            node = NodeProcess(spec, process)
            threading.Thread(target=node.read, daemon=True).start()
            started.append(node)
        yield started
    finally:
        for node in reversed(started):
            node.stop()


def wait_started(nodes: list[NodeProcess], timeout: float = STARTUP_TIMEOUT) -> float:
    """Wait until every node has logged its first line and its ``READY_TEXT``, if it has one;
    the seconds that took. A node that exits, or logs nothing within ``timeout``, is an error
    naming it, with its last lines; one that started but did not say it is ready by then is
    measured all the same (``not_ready`` in the report)."""
    began = time.monotonic()
    while not all(n.ready.is_set() for n in nodes):
        for node in nodes:
            if node.process.poll() is not None:
                raise Lang2PolicyError(
                    f"{node.spec.executable} exited with code {node.process.returncode} "
                    f"while the graph started:\n{node.tail()}"
                )
        if time.monotonic() - began > timeout:
            silent = [n for n in nodes if not n.started.is_set()]
            if silent:
                raise Lang2PolicyError(
                    f"nodes {[n.spec.executable for n in silent]} did not start within "
                    f"{timeout:g} s:\n{silent[0].tail()}"
                )
            break
        time.sleep(0.1)
    return time.monotonic() - began


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(f"[idle] {text}", file=sys.stderr, flush=True)


def measure_idle_cpu(
    seconds: float = 10.0,
    settle: float = 5.0,
    domain_id: int | None = None,
    quiet: bool = True,
    **graph_options,
) -> dict:
    """Start the headless graph (``graph_options``: fields of ``GraphOptions``; defaults: the
    simulated SO-101, ground-truth perception, cameras on but unsubscribed), wait until it is
    built and settled, and measure the cores each node uses over ``seconds``.

    Returns ``{"nodes": {executable: cores}, "total": cores, "target": TARGET_CORES,
    "passed": total <= target, "seconds", "settle", "startup_s", "load_average" (the 1-minute
    load before the window), "cpu_count", "options"}``."""
    if seconds <= 0 or settle < 0:
        raise Lang2PolicyError(f"seconds must be > 0 and settle >= 0, got {seconds}, {settle}")
    specs = graph_specs(**graph_options)
    domain = domain_id if domain_id is not None else 1 + (os.getpid() % 100) * 2
    with running_graph(specs, domain) as nodes:
        _say(f"starting {len(nodes)} nodes (ROS_DOMAIN_ID={domain})...", quiet)
        startup = wait_started(nodes)
        _say(f"all nodes up after {startup:.1f} s; settling {settle:g} s...", quiet)
        time.sleep(settle)
        load = os.getloadavg()[0]
        _say(f"measuring {seconds:g} s...", quiet)
        used = cores_used({n.spec.executable: n.process.pid for n in nodes}, seconds)
        exited = [n for n in nodes if n.process.poll() is not None]
        if exited:
            raise Lang2PolicyError(
                f"{exited[0].spec.executable} exited during the measurement:\n{exited[0].tail()}"
            )
    total = sum(used.values())
    not_ready = [n.spec.executable for n in nodes if not n.ready.is_set()]
    return {
        "benchmark": "idle",
        "nodes": {name: round(cores, 4) for name, cores in used.items()},
        "total": round(total, 4),
        "target": TARGET_CORES,
        "passed": total <= TARGET_CORES,
        "seconds": seconds,
        "settle": settle,
        "startup_s": round(startup, 1),
        "not_ready": not_ready,  # started, but did not say it was ready in time
        "load_average": round(load, 2),
        "cpu_count": os.cpu_count(),
        "options": {k: v for k, v in graph_options.items() if not isinstance(v, Path)},
    }


# ----------------------------------------------------------------- command line
def format_text(report: dict) -> str:
    """One row per node, then the total against the target."""
    rows = [f"idle graph CPU over {report['seconds']:g} s (cores; 1.0 = one core busy):"]
    width = max(len(name) for name in report["nodes"])
    for name, cores in report["nodes"].items():
        rows.append(f"  {name:<{width}}  {cores:6.3f}  ({100 * cores:5.1f} %)")
    verdict = "PASS" if report["passed"] else "FAIL"
    rows.append(
        f"  {'total':<{width}}  {report['total']:6.3f}  target <= {report['target']:g}: {verdict}"
    )
    rows.append(
        f"  (graph up in {report['startup_s']:g} s, then {report['settle']:g} s settling; "
        f"load average {report['load_average']:g} on {report['cpu_count']} CPUs before)"
    )
    if report.get("not_ready"):
        rows.append(f"  not ready when measured (still starting?): {report['not_ready']}")
    return "\n".join(rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window (s)")
    parser.add_argument("--settle", type=float, default=5.0, help="s after start-up, unmeasured")
    parser.add_argument("--llm", default="local", help="the planner's LLM (as lang2policy sim)")
    parser.add_argument("--robot", default="so101", help="simulated robot (so101 | panda)")
    parser.add_argument(
        "--no-cameras", dest="cameras", action="store_false", help="the sim renders no images"
    )
    parser.add_argument("--domain", type=int, help="ROS_DOMAIN_ID of the graph (default: free)")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench idle``."""
    return measure_idle_cpu(
        args.seconds,
        settle=args.settle,
        domain_id=args.domain,
        quiet=args.json,
        llm=args.llm,
        robot=args.robot,
        cameras=args.cameras,
    )


def exit_code(report: dict) -> int:
    """1 when the idle graph uses more than the target."""
    return 0 if report["passed"] else 1
