"""The real-time MPC with its planning in a worker process (``lang2policy.mpc.worker``).

``ProcessMPC`` has ``RealtimeMPC``'s interface and contract (see ``lang2policy.mpc.realtime``:
time base, units, task lifecycle) but plans in a child process with its own interpreter, so
planning never competes for a GIL with the caller's threads (a ROS executor's callbacks at
50 Hz beside a sampling planner: planning fell from ~45 Hz standalone to 1-3 Hz on two
loaded cores). The caller's side validates states and specs at once and answers ``action``
from a mirror of the worker's latest plan without waiting on the worker; a sender thread
passes the newest state (older ones are dropped when the worker lags) and every spec, in
order; a reader thread mirrors the worker's snapshots and log lines.

If the worker dies, the death is logged, a running task ends ``failed``, the arm holds its
measured position and later specs are refused (``NotConnectedError``). ``stop`` asks the worker
to exit, then terminates it if it does not; the worker also exits when the pipe closes, so it
never outlives its parent.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

from lang2policy.errors import NotConnectedError
from lang2policy.mpc.front import MPCFront
from lang2policy.mpc.measured_state import MeasuredState
from lang2policy.mpc.realtime_stats import RealtimeStats
from lang2policy.mpc.sampler import ControlPlan
from lang2policy.mpc.worker import Snapshot
from lang2policy.rewards.spec import RewardSpec

_STATS_FIELDS = set(RealtimeStats.__dataclass_fields__)
IDLE_STATE_PERIOD = 1.0  # s of state time between the states sent while no task runs


class ProcessMPC(MPCFront):
    """Real-time MPC planning in a worker process; thread-safe like ``RealtimeMPC``."""

    def __init__(self, *args, **kwargs) -> None:
        """``MPCFront``'s arguments; the worker gets the same (``settings``)."""
        super().__init__(*args, **kwargs)
        self._outbox: list[tuple] = []  # states (only the newest kept) and specs, in order
        self._seq = 0  # spec requests sent; snapshots acknowledging fewer are dropped
        # While no task runs the worker gets a state when the objects heard change or once
        # every IDLE_STATE_PERIOD s (50 a second of pickling and checking for nothing cost the
        # idle graph's budget); the newest goes with the next spec.
        self._task_live = False
        self._latest_state: tuple | None = None
        self._idle_sent = (-1e9, frozenset())  # (state time, object names) last sent idle
        self._stats: dict = {}
        self._stopping = False
        self._dead = False
        self.ready = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._threads: list[threading.Thread] = []
        self._conn: Connection | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> ProcessMPC:
        """Start the worker process and the threads that talk to it (idempotent)."""
        if self._proc is not None:
            return self
        mine, theirs = socket.socketpair()
        self._conn = Connection(mine.detach())
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "lang2policy.mpc.worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        self._outbox.insert(0, ("init", self.settings))
        self._threads = [
            threading.Thread(target=loop, name=name, daemon=True)
            for loop, name in ((self._send_loop, "mpc_sender"), (self._read_loop, "mpc_reader"))
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit and wait for it (terminate it if it will not); idempotent."""
        with self.board.lock:
            if self._stopping:
                return
            self._stopping = True
            self._outbox.append(("stop",))
            self.board.lock.notify_all()
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._log(f"the planning process did not stop within {timeout} s: terminating")
                self._proc.terminate()
                self._proc.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        if self._conn is not None:
            self._conn.close()

    @property
    def alive(self) -> bool:
        """Whether the worker process runs."""
        return self._proc is not None and self._proc.poll() is None and not self._dead

    @property
    def exitcode(self) -> int | None:
        """The worker's exit status (``None`` while it runs or before ``start``)."""
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        """The worker's process id (``None`` before ``start``)."""
        return None if self._proc is None else self._proc.pid

    def __enter__(self) -> ProcessMPC:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ----------------------------------------------------------------- to the worker
    def _state_accepted(self, state: MeasuredState) -> None:
        message = ("state", state.time, state.joints, state.objects, state.velocities)
        with self.board.lock:
            self._latest_state = message
            if not self._task_live:
                names = frozenset(state.objects)
                last, heard = self._idle_sent
                if names == heard and 0.0 <= state.time - last < IDLE_STATE_PERIOD:
                    return
                self._idle_sent = (state.time, names)
            if self._outbox and self._outbox[-1][0] == "state":
                self._outbox[-1] = message  # the worker lags: only the newest state matters
            else:
                self._outbox.append(message)
            self.board.lock.notify_all()

    def set_spec(self, spec: RewardSpec | None) -> None:
        """``RealtimeMPC.set_spec``; ``NotConnectedError`` once the worker has died."""
        if self._dead and spec is not None:
            raise NotConnectedError("the planning process has stopped; restart the node")
        super().set_spec(spec)

    def _spec_changed_locked(self, spec: RewardSpec | None, fresh: bool) -> None:
        self._seq += 1
        self._task_live = spec is not None
        if spec is not None and self._latest_state is not None:
            self._outbox.append(self._latest_state)  # the worker plans from the state now
        self._outbox.append(("spec", self._seq, spec))

    def _send_loop(self) -> None:
        while True:
            with self.board.lock:
                while not self._outbox:
                    self.board.lock.wait()
                batch, self._outbox = self._outbox, []
            for message in batch:
                try:
                    self._conn.send(message)
                except OSError:  # the worker is gone; the reader reports it
                    return
                if message[0] == "stop":
                    return

    # ----------------------------------------------------------------- from the worker
    def _read_loop(self) -> None:
        try:
            while True:
                message = self._conn.recv()
                if message[0] == "snap":
                    self._mirror(message[1])
                elif message[0] == "log":
                    (self._log if message[1] == "warning" else self._info)(message[2])
                elif message[0] == "ready":
                    self.ready.set()
        except (EOFError, OSError):
            pass
        except Exception as exc:  # a message this side cannot read: a bug, end the worker
            self._log(f"unreadable message from the planning process: {exc!r}")
            self._proc.terminate()
        if not self._stopping:
            self._died()

    def _mirror(self, snap: Snapshot) -> None:
        with self.board.lock:
            if snap.acked != self._seq or self._dead:  # older than the latest request
                return
            board = self.board
            board.running, board.status, board.reason = snap.running, snap.status, snap.reason
            self._task_live = snap.running  # the task ended: no more states until the next
            board.task_name = snap.task
            board.plan = (
                None
                if snap.plan_knots is None
                else ControlPlan(snap.plan_start, snap.plan_knots, snap.plan_cost)
            )
            if snap.hold is not None:
                board.hold = snap.hold
            if snap.stats is not None:
                self._stats = snap.stats

    def _died(self) -> None:
        code = self._proc.wait() if self._proc is not None else None
        reason = f"the planning process exited unexpectedly (status {code})"
        self._log(f"{reason}: holding the measured position")
        with self.board.lock:
            self._dead = True
            if self.board.running:
                self.board.end_locked("failed", reason, None, self.board.state)
            elif self.board.state is not None:
                self.board.hold = self.arm.ctrl(self.board.state.joints)
            self.board.lock.notify_all()

    def stats(self) -> RealtimeStats:
        """The worker's latest planning statistics with this side's status and state."""
        with self.board.lock:
            values = {k: v for k, v in self._stats.items() if k in _STATS_FIELDS}
            state = self.board.state
            values.update(
                status=self.board.status,
                reason=self.board.reason,
                task=self.board.task_name,
                rejected_states=self._rejected,
                time=state.time if state else 0.0,
                stale=not self.fresh,
            )
        if values["status"] != "running":
            values["rate_hz"] = 0.0
        values["cost"] = float("nan") if values.get("cost") is None else values["cost"]
        values["objects"] = tuple(values.get("objects", ()))
        return RealtimeStats(**values)
