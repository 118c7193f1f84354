"""The MPC as a real-time loop: measured states in, smooth joint targets out at the control rate.

A planning thread repeatedly takes the latest measured state from a slot (filled by
``update_state``), loads it into the planning model, runs one ``Sampler.improve`` and
publishes the plan atomically. ``action(t)`` evaluates the latest plan's spline at any time, as
often as the caller likes (50 Hz or more); it never waits on planning. ``set_spec`` swaps the
objective between two iterations: the warm-started plan carries over, so there is no stall.

**Time base.** Every time here is *measured time*: the clock of the state stream, i.e. the stamp
of the ``/joint_states`` messages (sim time from the sim node, wall time from a hardware
driver). A plan starts at the time of the state it was planned from, and ``action(t)`` must be
asked in that same clock. ``clock()`` estimates measured time *now*: the latest state's time plus
the steady (monotonic) wall time elapsed since that state arrived, capped at
``max_extrapolation`` (this assumes the state clock runs at about wall speed between two states,
i.e. a real-time factor near 1, which only matters within one state period). Task durations,
success hold times and timeouts count in measured time. Rates, planning times and latencies in
``stats()`` are steady wall time; a state is *stale* after ``stale_after`` wall seconds.

**Units.** States and actions are in the robot's action space, as on ``/joint_states`` and in
``lang2policy.robots.Robot``: arm joints in rad by joint name, plus ``"gripper"`` as the
normalised opening (0 closed, 1 open). The conversion to the planning model's gripper joints
and actuators happens here.

**Task lifecycle.** ``set_spec(spec)`` starts a task (status ``running``). The task ends with
``success`` (the spec's success conditions held), ``failed`` (an ``always_below`` condition
broke, planning raised, a plan was not finite, the spec's objects disappeared or the state clock
jumped back) or ``timeout`` (``spec.duration`` of measured time passed). When a task ends the
sampler stops and ``action`` holds: the last commanded targets after success, failure of a
condition or timeout (a position-controlled arm keeps what it reached, a grasp keeps squeezing);
the measured position after errors. With no task, ``action`` holds the first measured position.
``set_spec(None)`` cancels the task and holds where the arm is.
"""

from __future__ import annotations

import importlib
import threading
import time as _time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import RewardSpecError
from lang2policy.mpc.cost import SuccessTracker, measures
from lang2policy.mpc.front import MPCFront
from lang2policy.mpc.measured_state import InvalidStateError
from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.realtime_stats import RealtimeStats, add_timing
from lang2policy.mpc.sampler import Sampler
from lang2policy.mpc.task_board import NO_CHANGE, Turn
from lang2policy.rewards.spec import RewardSpec, check_objects

__all__ = ["STATUSES", "InvalidStateError", "RealtimeMPC"]

STATUSES = ("idle", "running", "success", "failed", "timeout")


@dataclass
class _Task:
    """The running objective and its bookkeeping (owned by the planning thread)."""

    spec: RewardSpec
    tracker: SuccessTracker
    start: float | None = None  # latest measured time at set_spec (else: first planned)


class RealtimeMPC(MPCFront):
    """Real-time MPC over measured states; see the module docstring for time and units.

    Use as a context manager, or call ``start()`` and ``stop()``. Thread-safe: ``update_state``,
    ``set_spec``, ``action``, ``clock``, ``stats`` and ``status`` may be called from any thread.
    """

    def __init__(self, *args, on_iteration: Callable[[], None] | None = None, **kwargs) -> None:
        """``MPCFront``'s arguments; ``on_iteration`` is called after each planning pass (on
        the planning thread)."""
        super().__init__(*args, **kwargs)
        self.sampler = self._new_sampler(self.pm)
        self._on_iteration = on_iteration
        self._stopping = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._history: deque[tuple[float, float, float]] = deque(maxlen=200)
        self._iterations = 0
        self._cost = float("nan")
        self._measures: dict[str, float] = {}
        self._rebuilds = 0
        self._task: _Task | None = None  # planning-thread only

    def _new_sampler(self, pm: PlanningModel):
        """The MPC ``Sampler``, or what ``sampler_factory`` names (same interface)."""
        if not self.sampler_factory:
            return Sampler(pm, self.config)
        module, _, name = self.sampler_factory.partition(":")
        factory = getattr(importlib.import_module(module), name)
        return factory(pm, self.config, **self.sampler_options)

    def _spec_changed_locked(self, spec: RewardSpec | None, fresh: bool) -> None:
        if fresh:  # a start from a hold: the statistics start again
            self._iterations = 0
            self._history.clear()

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> RealtimeMPC:
        """Start the planning thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="realtime_mpc", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and join the planning thread, then free the sampler (idempotent)."""
        with self.board.lock:
            self._stopping = True
            self.board.lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._log(f"the planning thread did not stop within {timeout} s")
                return
            self._thread = None
        if not self._closed:
            self._closed = True
            self.sampler.close()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> RealtimeMPC:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stats(self) -> RealtimeStats:
        """Status, reason and planning statistics (see ``RealtimeStats``)."""
        now = _time.monotonic()
        with self.board.lock:
            running = self.board.running
            times = list(self._history)
            state = self.board.state
            stats = RealtimeStats(
                status=self.board.status,
                reason=self.board.reason,
                task=self.board.task_name,
                time=state.time if state else 0.0,
                iterations=self._iterations,
                cost=self._cost,
                measures=dict(self._measures),
                objects=tuple(self.pm.object_names),
                rebuilds=self._rebuilds,
                rejected_states=self._rejected,
                stale=state is None or now - state.received >= self.stale_after,
                backend=getattr(self.sampler, "backend", "mpc"),
            )
        add_timing(stats, times, now, running)
        return stats

    # ----------------------------------------------------------------- planning thread
    def _run(self) -> None:
        seen = 0
        while True:
            with self.board.lock:
                if not self._stopping and self.board.state_seq == seen:
                    self.board.lock.wait(0.1)
                if self._stopping:
                    return
                if self.board.state_seq == seen:
                    continue
                state, seen = self.board.state, self.board.state_seq
                pending, self.board.pending = self.board.pending, NO_CHANGE
                turn = Turn(state, self.board.generation, self.board.running)
            try:
                self._iterate(turn, pending)
            except Exception as exc:  # keep the thread alive; say why and hold position
                self._log(f"planning failed, holding position: {exc!r}")
                self.board.end_if_current(
                    turn, "failed", f"planning error: {type(exc).__name__}: {exc}", None
                )
            if self._on_iteration is not None:
                self._on_iteration()

    def _iterate(self, turn: Turn, pending: object) -> None:
        """One pass of the planning thread over a new state."""
        state = turn.state
        if set(state.objects) != set(self.pm.object_names):
            self._rebuild(sorted(state.objects), turn)
        if pending is not NO_CHANGE:
            self._take_spec(*pending, turn)
        task = self._task
        if task is None or not turn.running:
            return
        self.pm.load_measurements(
            state.time,
            self.arm.model_joints(state.joints),
            state.objects,
            self.arm.model_joints(state.velocities, rate=True),
            ctrl=self.board.command_at(state),
        )
        if task.start is None:
            task.start = state.time
        if self._track(task, turn):
            return
        plan = self.sampler.improve(task.spec)
        if not np.all(np.isfinite(plan.knots)):
            raise FloatingPointError("the sampler returned non-finite controls")
        done = _time.monotonic()
        with self.board.lock:
            if self.board.generation == turn.generation:  # nothing ended or swapped meanwhile
                self.board.plan = plan
                self._iterations += 1
                self._cost = plan.cost
                self._history.append((done, plan.seconds, done - state.received))

    def _take_spec(self, spec: RewardSpec, fresh: bool, start: float | None, turn: Turn) -> None:
        """Start or swap the task (planning thread); its duration counts from ``start``."""
        self._task = _Task(spec, SuccessTracker(spec), start)
        if fresh:  # from a hold: the old warm start is meaningless, start from the hold
            with self.board.lock:
                hold = self.board.hold
                if hold is None:
                    hold = self.arm.ctrl(turn.state.joints)
            self.sampler.reset(ctrl=hold, start=turn.state.time)

    def _track(self, task: _Task, turn: Turn) -> bool:
        """Update success/failure/timeout on the measured state; True if the task ended."""
        state = turn.state
        features = self.pm.features_now()
        outcome = task.tracker.update(state.time, features)
        values = {k: float(np.ravel(v)[0]) for k, v in measures(task.spec, features).items()}
        with self.board.lock:
            if self.board.generation != turn.generation:  # ended or swapped meanwhile
                return True
            self._measures = values
            if outcome != "running":
                reason = task.tracker.broken or "success conditions held"
                self.board.end_locked(outcome, reason, self._end_hold(state), state)
            elif state.time - task.start >= task.spec.duration:
                self.board.end_locked(
                    "timeout", f"{task.spec.duration:g} s passed", self._end_hold(state), state
                )
            else:
                return False
        return True

    def _end_hold(self, state) -> np.ndarray:
        """What the arm holds when a task ends (lock held): the last commanded targets, or
        what the sampler prefers (``end_hold``: an RL policy holds where the arm is, since its
        last targets may aim a step past the goal)."""
        hold = self.board.command_locked(state.time)
        prefer = getattr(self.sampler, "end_hold", None)
        return hold if prefer is None or hold is None else prefer(hold)

    def _rebuild(self, names: list[str], turn: Turn) -> None:
        """A new planning model and sampler for a new set of objects (planning thread)."""
        self._info(
            f"objects changed {list(self.pm.object_names)} -> {names}: rebuilding the "
            "planning model"
        )
        pm = PlanningModel(self.robot, names, self.config.timestep, self.layout)
        sampler = self._new_sampler(pm)
        old = self.sampler
        with self.board.lock:
            self.pm, self.sampler = pm, sampler
            self._rebuilds += 1
        old.close()
        task = self._task
        if task is not None and turn.running:
            try:
                check_objects(task.spec, names)
            except RewardSpecError as exc:
                self.board.end_if_current(turn, "failed", f"objects changed: {exc}", None)
                return
            self.sampler.reset(ctrl=self.board.command_at(turn.state), start=turn.state.time)
