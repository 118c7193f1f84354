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
import math
import threading
import time as _time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lang2policy.errors import Lang2PolicyError, RewardSpecError
from lang2policy.mpc.cost import SuccessTracker, measures
from lang2policy.mpc.model import ObjectState, PlanningModel
from lang2policy.mpc.sampler import ControlPlan, MPCConfig, Sampler
from lang2policy.rewards.spec import RewardSpec, validate_spec
from lang2policy.scene.arm import GRIPPER
from lang2policy.scene.layout import load_layout

STATUSES = ("idle", "running", "success", "failed", "timeout")
_NO_CHANGE = object()  # "no new spec pending" (None is a valid pending spec: cancel)
_LOG = logging.getLogger(__name__)


class InvalidStateError(Lang2PolicyError, ValueError):
    """A measured state was rejected (missing joint, NaN, bad pose, time going back)."""


@dataclass(frozen=True)
class MeasuredState:
    """One validated measurement, in action space, with its steady-clock arrival time."""

    time: float
    joints: dict[str, float]
    velocities: dict[str, float]
    objects: dict[str, ObjectState]
    received: float


@dataclass
class RealtimeStats:
    """A snapshot of the loop for status reports (times in ms of wall time)."""

    status: str
    reason: str = ""
    task: str = ""
    time: float = 0.0  # measured time of the latest state
    iterations: int = 0  # planning iterations since the last start from a hold
    rate_hz: float = 0.0  # planning iterations per wall second over the last 2 s (0: stopped)
    plan_ms_mean: float = 0.0
    plan_ms_p95: float = 0.0
    latency_ms_mean: float = 0.0  # state arrival to plan publication
    latency_ms_p95: float = 0.0
    cost: float = float("nan")
    measures: dict[str, float] = field(default_factory=dict)  # unweighted, measured state
    objects: tuple[str, ...] = ()
    rebuilds: int = 0
    rejected_states: int = 0
    stale: bool = False

    def as_dict(self) -> dict:
        """JSON-able (non-finite numbers become None)."""
        def clean(value):
            if isinstance(value, float):
                return round(value, 4) if math.isfinite(value) else None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, tuple):
                return list(value)
            return value

        return {k: clean(v) for k, v in self.__dict__.items()}


class _ArmMap:
    """Action space (arm joints + normalised gripper) <-> the planning model's ctrl vector."""

    def __init__(self, pm: PlanningModel) -> None:
        arm, model = pm.arm, pm.model
        self.names = arm.action_names
        self.joint_names = arm.joint_names
        self.arm_ids = np.asarray(arm.actuator_ids)
        self.gripper_ids = np.asarray(arm.gripper_actuator_ids)
        self.gripper_joints = tuple(pm.gripper_joint_names)
        self.closed, self.span = arm.gripper_closed, arm.gripper_open - arm.gripper_closed
        self.low, self.high = pm.ctrl_low.copy(), pm.ctrl_high.copy()
        self.nu = model.nu

    def ctrl(self, action: Mapping[str, float]) -> np.ndarray:
        """Actuator controls for a named action."""
        ctrl = np.empty(self.nu)
        ctrl[self.arm_ids] = [action[n] for n in self.joint_names]
        ctrl[self.gripper_ids] = self.closed + action[GRIPPER] * self.span
        return np.clip(ctrl, self.low, self.high)

    def action(self, ctrl: np.ndarray) -> dict[str, float]:
        """The named action of actuator controls (gripper opening clipped to 0..1)."""
        named = {n: float(ctrl[a]) for n, a in zip(self.joint_names, self.arm_ids, strict=True)}
        opening = float(np.mean((ctrl[self.gripper_ids] - self.closed) / self.span))
        named[GRIPPER] = min(1.0, max(0.0, opening))
        return named

    def model_joints(self, values: Mapping[str, float], rate: bool = False) -> dict[str, float]:
        """Planning-model joint values (positions, or velocities with ``rate``) by name."""
        out = {n: values.get(n, 0.0) for n in self.joint_names}
        opening = values.get(GRIPPER, 0.0)
        for joint in self.gripper_joints:
            out[joint] = opening * self.span if rate else self.closed + opening * self.span
        return out


@dataclass
class _Task:
    """The running objective and its bookkeeping (owned by the planning thread)."""

    spec: RewardSpec
    tracker: SuccessTracker
    start: float | None = None  # latest measured time at set_spec (else: first planned)


@dataclass(frozen=True)
class _Turn:
    """What one planning iteration works from, as seen when it began."""

    state: MeasuredState
    generation: int
    running: bool


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
        self.arm = _ArmMap(self.pm)
        self.names = self.arm.names
        self._lock = threading.Condition()
        self._state: MeasuredState | None = None
        self._state_seq = 0
        self._pending: object = _NO_CHANGE  # (spec, fresh?, start time) for the sampler
        self._generation = 0  # bumped by every start, swap and end of a task
        self._plan: ControlPlan | None = None  # what action() evaluates while a task runs
        self._hold: np.ndarray | None = None  # ctrl held while no task runs
        self._status, self._reason, self._task_name = "idle", "", ""
        self._running = False
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
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
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
    def update_state(
        self,
        time: float,
        joint_positions: Mapping[str, float],
        objects: Mapping[str, ObjectState],
        joint_velocities: Mapping[str, float] | None = None,
    ) -> None:
        """Hand over a measured state (action space, by name; extra joints are ignored).

        Raises ``InvalidStateError`` (and keeps the previous state) for a missing or non-finite
        joint, a bad object pose, or a time earlier than the latest state's by less than
        ``clock_reset`` (a stale message). A jump back by more is a clock restart: the running
        task ends (``failed``) and the arm holds where it is measured.
        """
        state = self._validated(time, joint_positions, objects, joint_velocities or {})
        with self._lock:
            previous = self._state
            if previous is not None and state.time < previous.time:
                if previous.time - state.time < self.clock_reset:
                    self._rejected += 1
                    raise InvalidStateError(
                        f"state time {state.time:.3f} s is before the latest {previous.time:.3f}"
                        " s (stale or reordered message)")
                self._clock_restarted(previous.time, state)
            self._state = state
            self._state_seq += 1
            if self._hold is None:
                self._hold = self.arm.ctrl(state.joints)
            self._lock.notify_all()

    def _clock_restarted(self, before: float, state: MeasuredState) -> None:
        """A restarted state clock (lock held): end any task, hold the measured position."""
        reason = f"the state clock jumped back from {before:.3f} s to {state.time:.3f} s"
        self._log(f"{reason}: holding the measured position")
        if self._running:
            self._end_locked("failed", reason, None, state)
        else:
            self._hold = self.arm.ctrl(state.joints)

    def _validated(self, time, joints, objects, velocities) -> MeasuredState:
        try:
            return self._check(time, joints, objects, velocities)
        except InvalidStateError:
            with self._lock:
                self._rejected += 1
            raise

    def _check(self, time, joints, objects, velocities) -> MeasuredState:
        if not _finite(time):
            raise InvalidStateError(f"state time must be a finite number, got {time!r}")
        missing = [n for n in self.names if n not in joints]
        if missing:
            raise InvalidStateError(f"joint state lacks {missing}; expected {list(self.names)}")
        bad = [n for n in self.names if not _finite(joints[n])
               or (n in velocities and not _finite(velocities[n]))]
        if bad:
            raise InvalidStateError(f"joint state has non-finite values for {bad}")
        kept: dict[str, ObjectState] = {}
        for name, obj in objects.items():
            if name not in self._pool:
                self._ignore_object(name)
                continue
            kept[name] = _checked_object(name, obj)
        return MeasuredState(
            float(time), {n: float(joints[n]) for n in self.names},
            {n: float(velocities[n]) for n in self.names if n in velocities},
            kept, _time.monotonic())

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
            with self._lock:
                names = (list(self._state.objects) if self._state is not None
                         else list(self.pm.object_names))
            validate_spec(spec.to_dict(), names, add_defaults=False)
        with self._lock:
            if spec is None:
                self._end_locked("idle", "cancelled", None, self._state)
                return
            fresh = not self._running
            if fresh:
                self._plan, self._iterations = None, 0
                self._history.clear()
            start = self._state.time if self._state is not None else None
            self._pending = (spec, fresh, start)
            self._generation += 1
            self._running = True
            self._status, self._reason, self._task_name = "running", "", spec.task
            self._lock.notify_all()

    # ----------------------------------------------------------------- outputs
    def clock(self) -> float | None:
        """Estimated measured time now (``None`` before the first state)."""
        with self._lock:
            state = self._state
        if state is None:
            return None
        return state.time + min(_time.monotonic() - state.received, self.max_extrapolation)

    def action(self, now: float | None = None) -> dict[str, float] | None:
        """Joint position targets by name (+ ``gripper`` opening) at measured time ``now``
        (default ``clock()``); ``None`` before the first state. Never returns NaN."""
        with self._lock:
            plan = self._plan if self._running else None
            hold, state = self._hold, self._state
        if state is None:
            return None
        now = self.clock() if now is None else now
        ctrl = hold
        if plan is not None:
            ctrl = np.clip(plan.control(now, self.config), self.arm.low, self.arm.high)
            if not np.all(np.isfinite(ctrl)):  # cannot happen with finite plans; be sure
                self._fail_nonfinite(state)
                ctrl = self._hold
        return self.arm.action(ctrl)

    def _fail_nonfinite(self, state: MeasuredState) -> None:
        with self._lock:
            if self._running:
                self._end_locked("failed", "the plan gave non-finite controls", None, state)

    @property
    def status(self) -> str:
        return self._status

    @property
    def active(self) -> bool:
        """Whether a task is running (the caller should stream ``action``)."""
        return self._running

    @property
    def fresh(self) -> bool:
        """Whether the latest state arrived less than ``stale_after`` wall seconds ago."""
        with self._lock:
            state = self._state
        return state is not None and _time.monotonic() - state.received < self.stale_after

    def stats(self) -> RealtimeStats:
        """Status, reason and planning statistics (see ``RealtimeStats``)."""
        now = _time.monotonic()
        with self._lock:
            running = self._running
            recent = [h for h in self._history if now - h[0] <= 2.0]
            all_history = list(self._history)
            state = self._state
            stats = RealtimeStats(
                status=self._status, reason=self._reason, task=self._task_name,
                time=state.time if state else 0.0, iterations=self._iterations,
                cost=self._cost, measures=dict(self._measures),
                objects=tuple(self.pm.object_names), rebuilds=self._rebuilds,
                rejected_states=self._rejected,
                stale=state is None or now - state.received >= self.stale_after)
        if running and len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            stats.rate_hz = (len(recent) - 1) / (recent[-1][0] - recent[0][0])
        if all_history:
            plan_ms = 1000 * np.array([h[1] for h in all_history])
            latency_ms = 1000 * np.array([h[2] for h in all_history])
            stats.plan_ms_mean, stats.plan_ms_p95 = plan_ms.mean(), np.percentile(plan_ms, 95)
            stats.latency_ms_mean = latency_ms.mean()
            stats.latency_ms_p95 = np.percentile(latency_ms, 95)
        return stats

    # ----------------------------------------------------------------- planning thread
    def _run(self) -> None:
        seen = 0
        while True:
            with self._lock:
                if not self._stopping and self._state_seq == seen:
                    self._lock.wait(0.1)
                if self._stopping:
                    return
                if self._state_seq == seen:
                    continue
                state, seen = self._state, self._state_seq
                pending, self._pending = self._pending, _NO_CHANGE
                turn = _Turn(state, self._generation, self._running)
            try:
                self._iterate(turn, pending)
            except Exception as exc:  # keep the thread alive; say why and hold position
                self._log(f"planning failed, holding position: {exc!r}")
                self._end_if_current(turn, "failed",
                                     f"planning error: {type(exc).__name__}: {exc}", None)

    def _iterate(self, turn: _Turn, pending: object) -> None:
        """One pass of the planning thread over a new state."""
        state = turn.state
        if set(state.objects) != set(self.pm.object_names):
            self._rebuild(sorted(state.objects), turn)
        if pending is not _NO_CHANGE:
            self._take_spec(*pending, turn)
        task = self._task
        if task is None or not turn.running:
            return
        self.pm.load_measurements(
            state.time, self.arm.model_joints(state.joints), state.objects,
            self.arm.model_joints(state.velocities, rate=True), ctrl=self._command_at(state))
        if task.start is None:
            task.start = state.time
        if self._track(task, turn):
            return
        plan = self.sampler.improve(task.spec)
        if not np.all(np.isfinite(plan.knots)):
            raise FloatingPointError("the sampler returned non-finite controls")
        done = _time.monotonic()
        with self._lock:
            if self._generation == turn.generation:  # nothing ended or swapped meanwhile
                self._plan = plan
                self._iterations += 1
                self._cost = plan.cost
                self._history.append((done, plan.seconds, done - state.received))

    def _take_spec(self, spec: RewardSpec, fresh: bool, start: float | None,
                   turn: _Turn) -> None:
        """Start or swap the task (planning thread); its duration counts from ``start``."""
        self._task = _Task(spec, SuccessTracker(spec), start)
        if fresh:  # from a hold: the old warm start is meaningless, start from the hold
            with self._lock:
                hold = self._hold if self._hold is not None else self.arm.ctrl(turn.state.joints)
            self.sampler.reset(ctrl=hold, start=turn.state.time)

    def _track(self, task: _Task, turn: _Turn) -> bool:
        """Update success/failure/timeout on the measured state; True if the task ended."""
        state = turn.state
        features = self.pm.features_now()
        outcome = task.tracker.update(state.time, features)
        values = {k: float(np.ravel(v)[0]) for k, v in measures(task.spec, features).items()}
        with self._lock:
            if self._generation != turn.generation:  # ended or swapped meanwhile
                return True
            self._measures = values
            if outcome != "running":
                reason = task.tracker.broken or "success conditions held"
                self._end_locked(outcome, reason, self._command_locked(state.time), state)
            elif state.time - task.start >= task.spec.duration:
                self._end_locked("timeout", f"{task.spec.duration:g} s passed",
                                 self._command_locked(state.time), state)
            else:
                return False
        return True

    def _rebuild(self, names: list[str], turn: _Turn) -> None:
        """A new planning model and sampler for a new set of objects (planning thread)."""
        self._info(f"objects changed {list(self.pm.object_names)} -> {names}: rebuilding the "
                  "planning model")
        pm = PlanningModel(self.robot, names, self.config.timestep, self.layout)
        sampler = Sampler(pm, self.config)
        old = self.sampler
        with self._lock:
            self.pm, self.sampler = pm, sampler
            self._rebuilds += 1
        old.close()
        task = self._task
        if task is not None and turn.running:
            try:
                validate_spec(task.spec.to_dict(), names, add_defaults=False)
            except RewardSpecError as exc:
                self._end_if_current(turn, "failed", f"objects changed: {exc}", None)
                return
            self.sampler.reset(ctrl=self._command_at(turn.state), start=turn.state.time)

    # ----------------------------------------------------------------- helpers
    def _command_at(self, state: MeasuredState) -> np.ndarray:
        with self._lock:
            return self._command_locked(state.time, state)

    def _command_locked(self, t: float, state: MeasuredState | None = None) -> np.ndarray:
        """The ctrl being commanded at measured time ``t`` (lock held)."""
        if self._running and self._plan is not None:
            ctrl = np.clip(self._plan.control(t, self.config), self.arm.low, self.arm.high)
            if np.all(np.isfinite(ctrl)):
                return ctrl
        if self._hold is not None:
            return self._hold.copy()
        return self.arm.ctrl((state or self._state).joints)

    def _end_if_current(self, turn: _Turn, status: str, reason: str,
                        hold: np.ndarray | None) -> None:
        """End the task ``turn`` planned for, unless it already ended or was swapped."""
        with self._lock:
            if self._generation == turn.generation and self._running:
                self._end_locked(status, reason, hold, turn.state)

    def _end_locked(self, status: str, reason: str, hold: np.ndarray | None,
                    state: MeasuredState | None) -> None:
        """End the task (lock held): hold ``hold``, or the measured position of ``state``."""
        was_running = self._running
        if hold is None and state is not None:
            hold = self.arm.ctrl(state.joints)
        if hold is not None:
            self._hold = hold
        self._generation += 1
        self._pending = _NO_CHANGE
        self._running, self._plan = False, None
        self._status, self._reason = status, reason
        if status == "idle":
            self._task_name = ""
        if was_running and status != "idle":
            self._info(f"task '{self._task_name}' ended: {status} ({reason})")


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _checked_object(name: str, obj: ObjectState) -> ObjectState:
    """A validated copy of an object pose (quaternion normalised)."""
    try:
        position = [float(v) for v in obj.position]
        quat = [float(v) for v in obj.quat]
        velocity = [float(v) for v in obj.velocity]
    except (TypeError, ValueError) as exc:
        raise InvalidStateError(f"object '{name}': pose values must be numbers ({exc})") from exc
    if (len(position), len(quat), len(velocity)) != (3, 4, 3):
        raise InvalidStateError(f"object '{name}': expected position[3], quat[4], velocity[3]")
    values = np.array(position + quat + velocity)
    if not np.all(np.isfinite(values)):
        raise InvalidStateError(f"object '{name}' has a non-finite pose or velocity")
    norm = float(np.linalg.norm(quat))
    if norm < 1e-6:
        raise InvalidStateError(f"object '{name}' has a zero quaternion")
    return ObjectState(tuple(position), tuple(q / norm for q in quat), tuple(velocity))
