"""``lang2policy sim`` as a process in a test: its output collected line by line, its nodes'
pids read from its status lines, and every node killed if it does not stop in time."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
STOP_BOUND = 30.0  # s the whole graph may take to stop after Ctrl-C
STARTED = re.compile(r"\[lang2policy\] (\w+) \((\w+)\) started, pid (\d+)")


class Run:
    """The launcher started with ``args`` in a private ROS domain (``extra_env`` on top)."""

    def __init__(
        self,
        *args: str,
        domain_id: int,
        stdin=subprocess.DEVNULL,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        env = dict(
            os.environ,
            ROS_DOMAIN_ID=str(domain_id),
            ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
            MUJOCO_GL="egl",
        )
        env.update(extra_env or {})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lang2policy.graph.launcher", *args],
            cwd=REPO,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def alive(self) -> bool:
        return self.process.poll() is None

    def pids(self) -> dict[str, int]:
        return {m[1]: int(m[3]) for m in STARTED.finditer(self.output)}

    def wait_for_text(self, text: str, timeout: float = 40.0) -> None:
        wait_for(lambda: text in self.output or not self.alive(), timeout, text)
        assert text in self.output, self.output

    def finish(self, timeout: float = STOP_BOUND) -> int:
        """The launcher's exit status (after a stop the test caused); kills all on timeout."""
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.alive():
                self.process.kill()
                for pid in self.pids().values():
                    kill_group(pid)
        self._reader.join(timeout=5)
        return code

    def stop(self, timeout: float = STOP_BOUND) -> int:
        """Ctrl-C (if still running), then ``finish``."""
        if self.alive():
            self.process.send_signal(signal.SIGINT)
        return self.finish(timeout)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
