"""The planning process behind ``ProcessMPC``: a ``RealtimeMPC`` fed over a pipe.

Run as ``python -m lang2policy.mpc.worker FD`` where ``FD`` is this end of a socket pair
(``multiprocessing.connection.Connection`` framing, pickled tuples). In: ``("init", kwargs)``
first (``RealtimeMPC``'s arguments), then ``("state", time, joints, objects, velocities)``,
``("spec", seq, spec_or_None)`` and ``("stop",)``. Out: ``("ready",)``, ``("log", level, text)``
and ``("snap", Snapshot)`` whenever the plan or the task's status changed.

The process has its own interpreter, so planning never waits for the GIL on a ROS executor's
callbacks. It ignores SIGINT (Ctrl-C in a terminal reaches the whole process group; the parent
decides when planning stops) and exits when told to stop or when the pipe closes, so it never
outlives its parent.
"""

from __future__ import annotations

import signal
import sys
import threading
import time as _time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.realtime import RealtimeMPC

STATS_PERIOD = 0.2  # s between statistics in snapshots (and at every status change)


@dataclass(frozen=True)
class Snapshot:
    """What the parent mirrors: the task's status, the latest plan and the held controls,
    as of spec request ``acked`` (the parent drops snapshots older than its latest request)."""

    acked: int
    running: bool
    status: str
    reason: str
    task: str
    plan_start: float | None
    plan_knots: np.ndarray | None
    plan_cost: float
    hold: np.ndarray | None
    stats: dict | None


class Worker:
    """Serves one ``RealtimeMPC`` over ``conn`` until ``("stop",)`` or the pipe closes."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._send_lock = threading.Lock()
        self.acked = 0
        self._last_key: tuple | None = None
        self._last_stats = 0.0
        self.mpc: RealtimeMPC | None = None

    def send(self, message: tuple) -> None:
        """Send to the parent; a closed pipe is left to the reading loop to notice."""
        try:
            with self._send_lock:
                self.conn.send(message)
        except OSError:
            pass

    def serve(self) -> int:
        """Build the MPC from the first message, then handle messages; the exit status."""
        kind, kwargs = self.conn.recv()
        if kind != "init":
            raise Lang2PolicyError(f"planning worker: expected 'init' first, got {kind!r}")
        self.mpc = RealtimeMPC(
            **kwargs,
            log=lambda text: self.send(("log", "warning", text)),
            info=lambda text: self.send(("log", "info", text)),
            on_iteration=self.report,
        )
        self.mpc.start()
        self.send(("ready",))
        try:
            while self._handle(self.conn.recv()):
                pass
        except (EOFError, OSError):  # the parent went away: stop planning
            pass
        finally:
            self.mpc.stop()
        return 0

    def _handle(self, message: tuple) -> bool:
        kind = message[0]
        if kind == "state":
            try:
                self.mpc.update_state(*message[1:])
            except Lang2PolicyError as exc:  # the parent checked it; say so if it differs
                self.send(("log", "warning", f"planning worker ignored a state: {exc}"))
        elif kind == "spec":
            self._spec(message[1], message[2])
        elif kind == "stop":
            return False
        return True

    def _spec(self, seq: int, spec) -> None:
        try:
            self.mpc.set_spec(spec)
        except Lang2PolicyError as exc:  # objects changed between the parent and here
            with self.mpc.board.lock:
                self.mpc.board.end_locked(
                    "failed", f"spec refused by the planner: {exc}", None, self.mpc.board.state
                )
        self.acked = seq  # after set_spec: a snapshot never claims a spec it lacks
        self.report()

    def report(self) -> None:
        """Send a snapshot if the plan or the status changed since the last one."""
        mpc = self.mpc
        board = mpc.board
        with board.lock:
            plan = board.plan
            key = (self.acked, board.generation, board.status, mpc.pm.object_names, id(plan))
            if key == self._last_key:
                return
            status_changed = self._last_key is None or self._last_key[:4] != key[:4]
            self._last_key = key
            snapshot = [
                self.acked,
                board.running,
                board.status,
                board.reason,
                board.task_name,
                plan.start if plan else None,
                plan.knots if plan else None,
                plan.cost if plan else float("nan"),
                None if board.hold is None else board.hold.copy(),
            ]
        now = _time.monotonic()
        stats = None
        if status_changed or now - self._last_stats >= STATS_PERIOD:
            stats, self._last_stats = mpc.stats().as_dict(), now
        self.send(("snap", Snapshot(*snapshot, stats)))


def main(argv: list[str] | None = None) -> int:
    """``python -m lang2policy.mpc.worker FD``."""
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[0]))
    try:
        return Worker(conn).serve()
    except (EOFError, OSError):
        return 0
    finally:
        conn.close()


if __name__ == "__main__":  # through the package, so that pickles name this module's classes
    from lang2policy.mpc.worker import main as _main

    raise SystemExit(_main())
