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

import logging
import threading
import time as _time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import RewardSpecError
from lang2policy.mpc.arm_map import ArmMap
from lang2policy.mpc.cost import SuccessTracker, measures
from lang2policy.mpc.measured_state import InvalidStateError, MeasuredState, check_state
from lang2policy.mpc.model import ObjectState, PlanningModel
from lang2policy.mpc.realtime_stats import RealtimeStats, add_timing
from lang2policy.mpc.sampler import MPCConfig, Sampler
from lang2policy.mpc.task_board import NO_CHANGE, TaskBoard, Turn
from lang2policy.rewards.spec import RewardSpec, check_objects
from lang2policy.scene.layout import load_layout

STATUSES = ("idle", "running", "success", "failed", "timeout")
_LOG = logging.getLogger(__name__)


@dataclass
class _Task:
    """The running objective and its bookkeeping (owned by the planning thread)."""

    spec: RewardSpec
    tracker: SuccessTracker
    start: float | None = None  # latest measured time at set_spec (else: first planned)


class RealtimeMPC:
    """Real-time MPC over measured states; see the module docstring for time and units.

    Use as a context manager, or call ``start()`` and ``stop()``. Thread-safe: ``update_state``,
    ``set_spec``, ``action``, ``clock``, ``stats`` and ``status`` may be called from any thread.
    """

    def __init__(
        self,
        robot: str = "so101",
        config: MPCConfig | None = None,
        objects: Sequence[str] = (),
        layout: str = "cap_tabletop",
        log: Callable[[str], None] | None = None,
        info: Callable[[str], None] | None = None,
        stale_after: float = 0.5,
        max_extrapolation: float = 0.2,
        clock_reset: float = 1.0,
    ) -> None:
        self.robot, self.layout = robot, layout
        self.config = config or MPCConfig()
        self.stale_after, self.max_extrapolation = stale_after, max_extrapolation
        self.clock_reset = clock_reset
        self._log = log or _LOG.warning  # problems
        self._info = info or _LOG.info  # lifecycle: rebuilds, task ends
        self._pool = {o.name for o in load_layout(layout).pool()}
        self.pm = PlanningModel(robot, list(objects), self.config.timestep, layout)
        self.sampler = Sampler(self.pm, self.config)
        self.arm = ArmMap(self.pm)
        self.names = self.arm.names
        self.board = TaskBoard(self.arm, self.config, self._info)
        self._stopping = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._history: deque[tuple[float, float, float]] = deque(maxlen=200)
        self._iterations = 0
        self._cost = float("nan")
        self._measures: dict[str, float] = {}
        self._rebuilds = 0
        self._rejected = 0
        self._ignored_objects: set[str] = set()
        self._task: _Task | None = None  # planning-thread only

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

    # ----------------------------------------------------------------- inputs
    def update_state(self, time: float, joint_positions: Mapping[str, float],
                     objects: Mapping[str, ObjectState],
                     joint_velocities: Mapping[str, float] | None = None) -> None:
        """Hand over a measured state (action space, by name; extra joints are ignored).

        Raises ``InvalidStateError`` (and keeps the previous state) for a missing or non-finite
        joint, a bad object pose, or a time earlier than the latest state's by less than
        ``clock_reset`` (a stale message). A jump back by more is a clock restart: the running
        task ends (``failed``) and the arm holds where it is measured.
        """
        state = self._validated(time, joint_positions, objects, joint_velocities or {})
        with self.board.lock:
            previous = self.board.state
            if previous is not None and state.time < previous.time:
                if previous.time - state.time < self.clock_reset:
                    self._rejected += 1
                    raise InvalidStateError(
                        f"state time {state.time:.3f} s is before the latest {previous.time:.3f}"
                        " s (stale or reordered message)")
                self._clock_restarted(previous.time, state)
            self.board.state = state
            self.board.state_seq += 1
            if self.board.hold is None:
                self.board.hold = self.arm.ctrl(state.joints)
            self.board.lock.notify_all()

    def _clock_restarted(self, before: float, state: MeasuredState) -> None:
        """A restarted state clock (lock held): end any task, hold the measured position."""
        reason = f"the state clock jumped back from {before:.3f} s to {state.time:.3f} s"
        self._log(f"{reason}: holding the measured position")
        if self.board.running:
            self.board.end_locked("failed", reason, None, state)
        else:
            self.board.hold = self.arm.ctrl(state.joints)

    def _validated(self, time, joints, objects, velocities) -> MeasuredState:
        try:
            return check_state(time, joints, objects, velocities, self.names, self._pool,
                               self._ignore_object)
        except InvalidStateError:
            with self.board.lock:
                self._rejected += 1
            raise


    def _ignore_object(self, name: str) -> None:
        if name not in self._ignored_objects:
            self._ignored_objects.add(name)
            self._log(f"ignoring object '{name}': not in layout '{self.layout}' "
                      "(the planning model cannot represent it)")

    def set_spec(self, spec: RewardSpec | None) -> None:
        """Start (or swap to) the task ``spec``; ``None`` cancels and holds position.

        The spec's objects are checked against the latest measured objects (or the planning
        model's before any state): ``RewardSpecError`` says which are missing. A swap while a
        task runs keeps the warm start and takes effect at the next planning iteration; a
        start from a hold plans from the held targets.
        """
        if spec is not None:
            with self.board.lock:
                names = (list(self.board.state.objects) if self.board.state is not None
                         else list(self.pm.object_names))
            check_objects(spec, names)
        with self.board.lock:
            if spec is None:
                self.board.end_locked("idle", "cancelled", None, self.board.state)
                return
            fresh = not self.board.running
            if fresh:
                self.board.plan, self._iterations = None, 0
                self._history.clear()
            start = self.board.state.time if self.board.state is not None else None
            self.board.pending = (spec, fresh, start)
            self.board.generation += 1
            self.board.running = True
            self.board.status, self.board.reason, self.board.task_name = "running", "", spec.task
            self.board.lock.notify_all()

    # ----------------------------------------------------------------- outputs
    def clock(self) -> float | None:
        """Estimated measured time now (``None`` before the first state)."""
        with self.board.lock:
            state = self.board.state
        if state is None:
            return None
        return state.time + min(_time.monotonic() - state.received, self.max_extrapolation)

    def action(self, now: float | None = None) -> dict[str, float] | None:
        """Joint position targets by name (+ ``gripper`` opening) at measured time ``now``
        (default ``clock()``); ``None`` before the first state. Never returns NaN."""
        with self.board.lock:
            plan = self.board.plan if self.board.running else None
            hold, state = self.board.hold, self.board.state
        if state is None:
            return None
        now = self.clock() if now is None else now
        ctrl = hold
        if plan is not None:
            ctrl = np.clip(plan.control(now, self.config), self.arm.low, self.arm.high)
            if not np.all(np.isfinite(ctrl)):  # cannot happen with finite plans; be sure
                self._fail_nonfinite(state)
                ctrl = self.board.hold
        return self.arm.action(ctrl)

    def _fail_nonfinite(self, state: MeasuredState) -> None:
        with self.board.lock:
            if self.board.running:
                self.board.end_locked("failed", "the plan gave non-finite controls", None, state)

    @property
    def status(self) -> str:
        """One of ``STATUSES``: idle, running, or how the last task ended."""
        return self.board.status

    @property
    def active(self) -> bool:
        """Whether a task is running (the caller should stream ``action``)."""
        return self.board.running

    @property
    def fresh(self) -> bool:
        """Whether the latest state arrived less than ``stale_after`` wall seconds ago."""
        with self.board.lock:
            state = self.board.state
        return state is not None and _time.monotonic() - state.received < self.stale_after

    def stats(self) -> RealtimeStats:
        """Status, reason and planning statistics (see ``RealtimeStats``)."""
        now = _time.monotonic()
        with self.board.lock:
            running = self.board.running
            times = list(self._history)
            state = self.board.state
            stats = RealtimeStats(
                status=self.board.status, reason=self.board.reason, task=self.board.task_name,
                time=state.time if state else 0.0, iterations=self._iterations,
                cost=self._cost, measures=dict(self._measures),
                objects=tuple(self.pm.object_names), rebuilds=self._rebuilds,
                rejected_states=self._rejected,
                stale=state is None or now - state.received >= self.stale_after)
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
                self.board.end_if_current(turn, "failed",
                                     f"planning error: {type(exc).__name__}: {exc}", None)

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
            state.time, self.arm.model_joints(state.joints), state.objects,
            self.arm.model_joints(state.velocities, rate=True), ctrl=self.board.command_at(state))
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

    def _take_spec(self, spec: RewardSpec, fresh: bool, start: float | None,
                   turn: Turn) -> None:
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
                self.board.end_locked(outcome, reason, self.board.command_locked(state.time), state)
            elif state.time - task.start >= task.spec.duration:
                self.board.end_locked("timeout", f"{task.spec.duration:g} s passed",
                                 self.board.command_locked(state.time), state)
            else:
                return False
        return True

    def _rebuild(self, names: list[str], turn: Turn) -> None:
        """A new planning model and sampler for a new set of objects (planning thread)."""
        self._info(f"objects changed {list(self.pm.object_names)} -> {names}: rebuilding the "
                  "planning model")
        pm = PlanningModel(self.robot, names, self.config.timestep, self.layout)
        sampler = Sampler(pm, self.config)
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

    # ----------------------------------------------------------------- helpers


