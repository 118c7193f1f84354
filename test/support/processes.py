"""Child processes as the tests see them from outside."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (an exited process not yet reaped is a zombie: not running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def interrupt_all(processes: Iterable[subprocess.Popen], timeout: float = 10.0) -> None:
    """SIGINT (as Ctrl-C) to every process still running, then wait for each; a process
    still running after ``timeout`` s is killed."""
    processes = list(processes)
    for process in processes:
        if alive(process.pid):
            process.send_signal(2)
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
