"""``lang2policy bench idle``'s CPU sampling from /proc, on real processes (no ROS): a process
that burns a known amount of CPU time is counted, through its parent too (a node's LLM server),
and one that sleeps is not; command names with spaces and parentheses do not confuse the
parser. The graph measurement itself is ``lang2policy bench idle`` (a benchmark: it prints
numbers; tests check behaviour)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lang2policy.bench import graph_idle
from lang2policy.bench.registry import BENCHES, parser
from lang2policy.errors import Lang2PolicyError

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc")

BURN = 0.4  # CPU seconds the burner uses before it sleeps
TICKS = 0.05  # s: /proc counts in clock ticks (10 ms), sampled at timer interrupts
# The burner: uses BURN s of its own CPU time, says so, then sleeps until killed.
BURNER = (
    "import sys, time\n"
    f"while time.process_time() < {BURN}: pass\n"
    "print('burnt', flush=True)\n"
    "time.sleep(120)\n"
)
# A parent that starts the burner and waits (a node and the LLM server it started).
PARENT = (
    "import subprocess, sys\n"
    f"child = subprocess.Popen([sys.executable, '-c', {BURNER!r}], stdout=sys.stdout)\n"
    "child.wait()\n"
)


def _started(argv: list[str]) -> subprocess.Popen:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "burnt"
    return process


def _end(process: subprocess.Popen) -> None:
    for pid in reversed(graph_idle.descendants(process.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    process.wait(timeout=10)


def test_a_process_cpu_time_is_read_from_proc():
    burner = _started([sys.executable, "-c", BURNER])
    try:
        used = graph_idle.process_cpu_seconds(burner.pid)
        assert BURN - TICKS <= used < BURN + 2.0  # interpreter start-up adds a little
    finally:
        _end(burner)


def test_the_tree_counts_grandchildren_and_a_sleeping_tree_uses_no_core():
    parent = _started([sys.executable, "-c", PARENT])
    try:
        tree = graph_idle.descendants(parent.pid)
        assert tree[0] == parent.pid and len(tree) == 2  # the parent and the burner
        assert graph_idle.process_cpu_seconds(parent.pid) < BURN  # not its own time
        assert graph_idle.tree_cpu_seconds(parent.pid) >= BURN - TICKS
        # Both sleep now: over a second of wall time they use (next to) nothing.
        cores = graph_idle.cores_used({"tree": parent.pid}, 1.0)
        assert set(cores) == {"tree"} and 0.0 <= cores["tree"] < 0.05
    finally:
        _end(parent)


def test_cores_are_cpu_seconds_over_wall_seconds(monkeypatch):
    """The arithmetic alone (CPU time and the wall clock given): 1.5 CPU s in 2 wall s of a
    node's tree is 0.75 core, and a counter that went back (a process gone) is never < 0."""
    cpu = {"busy": iter([10.0, 11.5]), "gone": iter([3.0, 1.0])}
    wall = iter([100.0, 102.0])
    monkeypatch.setattr(graph_idle, "tree_cpu_seconds", lambda pid: next(cpu[pid]))
    cores = graph_idle.cores_used(
        {"a": "busy", "b": "gone"}, 2.0, sleep=lambda _s: None, clock=lambda: next(wall)
    )
    assert cores == {"a": 0.75, "b": 0.0}


def test_command_names_with_spaces_and_parentheses(tmp_path):
    odd = tmp_path / "x) (y z"
    odd.symlink_to(sys.executable)
    burner = _started([str(odd), "-c", BURNER])
    try:
        assert Path(f"/proc/{burner.pid}/comm").read_text().strip() == "x) (y z"
        assert graph_idle._stat_fields(burner.pid)[1] == str(os.getpid())  # the parent pid
        assert graph_idle.process_cpu_seconds(burner.pid) >= BURN - TICKS
    finally:
        _end(burner)


def test_report_text_and_exit_code():
    report = {
        "nodes": {"sim_node": 0.08, "safety_node": 0.02},
        "total": 0.1,
        "target": graph_idle.TARGET_CORES,
        "passed": True,
        "seconds": 10.0,
        "settle": 5.0,
        "startup_s": 12.3,
        "load_average": 0.4,
        "cpu_count": 2,
    }
    text = graph_idle.format_text(report)
    assert "sim_node" in text and "0.080" in text and "target <= 0.25: PASS" in text
    assert graph_idle.exit_code(report) == 0
    assert "not ready" not in text
    late = graph_idle.format_text(report | {"not_ready": ["planner_node"]})
    assert "not ready when measured (still starting?): ['planner_node']" in late
    assert graph_idle.exit_code(report | {"passed": False, "total": 0.3}) == 1


def test_registered_as_bench_idle():
    assert "idle" in BENCHES
    args = parser("idle").parse_args(["--seconds", "3", "--llm", "replay:x.jsonl", "--json"])
    assert (args.seconds, args.llm, args.json, args.cameras) == (3.0, "replay:x.jsonl", True, True)


def test_bad_window_is_refused_before_anything_starts():
    with pytest.raises(Lang2PolicyError, match="seconds must be > 0"):
        graph_idle.measure_idle_cpu(0.0)
