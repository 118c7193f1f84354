"""The node processes of ``lang2policy bench parity``: each back-end's nodes started in a
private ROS graph of their own (a fresh ``ROS_DOMAIN_ID``, discovery on localhost only), their
output kept for error messages, and stopped (SIGINT, then SIGKILL) in every path.

Processes only: the nodes are started as ``python -m lang2policy.ros.<node>``, so this module
imports no ROS.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def status(text: str) -> None:
    """A progress line on stderr (stdout carries the report)."""
    print(f"[parity] {text}", file=sys.stderr, flush=True)


class Child:
    """A node process; its output (stdout and stderr together) kept for error messages."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str]) -> None:
        self.label = label
        self.lines: deque[str] = deque(maxlen=200)
        self.process = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a Ctrl-C on the terminal reaches it only through stop()
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip())

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, count: int = 15) -> str:
        return "\n".join(f"    {line}" for line in list(self.lines)[-count:])

    def stop(self, timeout: float = 15.0) -> None:
        """SIGINT (the node turns torque off, cleans up), then SIGKILL after ``timeout``."""
        if self.alive():
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def _child_env(domain_id: int) -> dict[str, str]:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.setdefault("MUJOCO_GL", "egl")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _node(module: str, *params: str) -> list[str]:
    argv = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args"]
    for param in params:
        argv += ["-p", param]
    return argv


def backend_commands(backend: str, workdir: Path, seed: int) -> list[tuple[str, list[str]]]:
    """(label, argv) of the processes of ``backend`` ("sim" or "hw"), in start order."""
    if backend == "sim":
        return [("sim_node", _node("sim_node", "camera_rate:=0.0", f"seed:={seed}"))]
    port = workdir / "so101"
    return [
        (
            "so101_emulator",
            _node("so101_emulator_node", f"link:={port}", f"seed:={seed}", "camera_rate:=0.0"),
        ),
        (
            "so101_driver",
            _node("so101_driver_node", f"port:={port}", "port_wait:=30.0", "bus_timeout:=0.1"),
        ),
    ]


@contextlib.contextmanager
def running(backend: str, domain_id: int, seed: int) -> Iterator[list[Child]]:
    """The back-end's processes for the ``with`` block; stopped (and reaped) in every path."""
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="l2p-parity-") as workdir:
        try:
            for label, argv in backend_commands(backend, Path(workdir), seed):
                status(f"starting {label} (ROS_DOMAIN_ID={domain_id})...")
                children.append(Child(label, argv, _child_env(domain_id)))
            yield children
        finally:
            for child in reversed(children):
                child.stop()
