"""Ctrl-C on ``lang2policy sim --headless`` stops every node cleanly (issue 16, item 5): each
node process exits with code 0 within the launcher's shutdown timeout (no SIGTERM needed), and
nothing logs an ERROR or a traceback on the way out.

The whole graph runs as processes (the launcher, as a user starts it; the planner replays a
recorded LLM exchange, and ``HOME`` is a fresh directory so no corrections memory is loaded).
With camera perception the sim node renders the top camera when the Ctrl-C arrives: its camera
thread used to publish on the already invalid context and log "publisher's context is invalid".
Nodes run directly (``python -m lang2policy.ros.<node>``) stop the same way on SIGINT and on
SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from support.launcher import Run
from support.ros import ros_env
from support.waiting import wait_for

from lang2policy.graph import nodes as graph

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "test" / "fixtures" / "llm" / "cap_session.jsonl"
DOMAIN_ID = 1 + (os.getpid() + 151) % 200
HEADLESS = ("sim_node", "perception_node", "safety_node", "controller_node", "planner_node")
# Log lines that say the graph works: the planner built (its first line), objects flowing
# (and, with camera perception, images rendered and seen).
READY = {
    "ground_truth": ("[lang2policy_planner]: ", "[lang2policy_perception]: objects: added"),
    "camera": ("[lang2policy_planner]: ", "[lang2policy_perception]: camera 'top': "),
}


@pytest.mark.parametrize("perception", ["ground_truth", "camera"])
def test_ctrl_c_stops_the_headless_graph_with_exit_code_0_and_no_error(perception, tmp_path):
    run = Run(
        *("--headless", "--perception", perception, "--seed", "1"),
        *("--llm", f"replay:{FIXTURE}", "--route", "code", "--grounding", "off"),
        domain_id=DOMAIN_ID,
        extra_env={"HOME": str(tmp_path)},  # no corrections memory from a user
    )
    try:
        for text in READY[perception]:
            run.wait_for_text(text, timeout=180.0)
        wait_for(lambda: len(run.pids()) == len(HEADLESS), 30.0, "every node's pid")
        run.process.send_signal(signal.SIGINT)
    finally:
        code = run.finish()
    output = run.output
    assert code == 0, output
    assert sorted(run.pids()) == sorted(HEADLESS), output
    for executable, pid in run.pids().items():
        assert f"{executable} (pid {pid}) exited with code 0" in output, output
    assert "SIGTERM" not in output and "SIGKILL" not in output, output
    assert "ERROR" not in output and "Traceback" not in output, output


class NodeProcess:
    """A node started as ``ros2 run`` would, its stderr (the ROS log) collected."""

    def __init__(self, executable: str, arguments: list[str], env: dict[str, str]) -> None:
        self.name = executable
        self.process = subprocess.Popen(
            [sys.executable, "-m", graph.NODES[executable][1], "--ros-args", *arguments],
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float = 30.0) -> int:
        try:
            return self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=10)
            self._reader.join(timeout=5)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_rendering_sim_node_and_the_safety_node_exit_0_on_a_stop_signal(stop):
    """The sim node with a subscriber on its image topic (perception on the camera), the
    safety node: started as ``ros2 run`` would, stopped by a signal, exit 0 without an error."""
    env = dict(os.environ, **ros_env(DOMAIN_ID + 1))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    commands = {
        "sim_node": ["-p", "cameras:=[top]", "-p", "camera_width:=64", "-p", "camera_height:=48"],
        "perception_node": ["-p", "source:=camera", "-p", "camera:=top"],
        "safety_node": [],
    }
    nodes = [NodeProcess(name, arguments, env) for name, arguments in commands.items()]
    try:
        perception = nodes[1]
        # Its line about the camera's size: camera_info arrived, so the sim node renders.
        wait_for(
            lambda: "camera 'top': 64x48" in perception.log or perception.process.poll(),
            180.0,
            "the perception node to hear the sim node's camera",
        )
        for node in nodes:
            node.process.send_signal(stop)
    finally:
        codes = {node.name: node.finish() for node in nodes}
    logs = {node.name: node.log for node in nodes}
    assert codes == dict.fromkeys(commands, 0), logs
    for name, text in logs.items():
        assert "ERROR" not in text and "Traceback" not in text, (name, text)
