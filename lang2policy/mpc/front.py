"""The caller's side of a real-time MPC: measured states and specs in, joint targets out.

``MPCFront`` holds what the control side reads and writes without waiting on planning: the
``TaskBoard`` (latest measured state, plan, held controls, task status), state validation and
the time base (see ``lang2policy.mpc.realtime``). ``RealtimeMPC`` plans on a thread beside it;
``ProcessMPC`` plans in a worker process and mirrors the worker's plans onto its board.
Subclasses hear of accepted states and of task starts, swaps and cancels through
``_state_accepted`` and ``_spec_changed_locked``.
"""

from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lang2policy.mpc.arm_map import ArmMap
from lang2policy.mpc.measured_state import InvalidStateError, MeasuredState, check_state
from lang2policy.mpc.model import ObjectState, PlanningModel
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.mpc.task_board import TaskBoard
from lang2policy.rewards.spec import RewardSpec, check_objects
from lang2policy.scene.layout import load_layout

_LOG = logging.getLogger(__name__)


class MPCFront:
    """Inputs (``update_state``, ``set_spec``) and outputs (``action``, ``clock``, ``status``,
    ``active``, ``fresh``) over one ``TaskBoard``; all thread-safe."""

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
        sampler_factory: str = "",
        sampler_options: Mapping | None = None,
    ) -> None:
        """``sampler_factory`` ("module:function", called as ``function(planning_model,
        config, **sampler_options)``) plans instead of the MPC ``Sampler``: the RL backend
        (``lang2policy.rl.planner:policy_sampler``) plugs in here without this package
        importing it, and the worker process builds the same from the settings."""
        self.robot, self.layout = robot, layout
        self.config = config or MPCConfig()
        self.settings = {  # what builds an equal planner elsewhere (a worker process)
            "robot": robot,
            "config": self.config,
            "objects": list(objects),
            "layout": layout,
            "stale_after": stale_after,
            "max_extrapolation": max_extrapolation,
            "clock_reset": clock_reset,
            "sampler_factory": sampler_factory,
            "sampler_options": dict(sampler_options or {}),
        }
        self.sampler_factory, self.sampler_options = sampler_factory, dict(sampler_options or {})
        self.stale_after, self.max_extrapolation = stale_after, max_extrapolation
        self.clock_reset = clock_reset
        self._log = log if log is not None else _LOG.warning  # problems
        self._info = info if info is not None else _LOG.info  # lifecycle: rebuilds, task ends
        self._pool = {o.name for o in load_layout(layout).pool()}
        self.pm = PlanningModel(robot, list(objects), self.config.timestep, layout)
        self.arm = ArmMap(self.pm)
        self.names = self.arm.names
        self.board = TaskBoard(self.arm, self.config, self._info)
        self._rejected = 0
        self._ignored_objects: set[str] = set()

    # ----------------------------------------------------------------- hooks
    def _state_accepted(self, state: MeasuredState) -> None:
        """A validated state is on the board (called without the lock)."""

    def _spec_changed_locked(self, spec: RewardSpec | None, fresh: bool) -> None:
        """A task started (``fresh``), was swapped, or was cancelled (``None``); lock held."""

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
        with self.board.lock:
            previous = self.board.state
            if previous is not None and state.time < previous.time:
                if previous.time - state.time < self.clock_reset:
                    self._rejected += 1
                    raise InvalidStateError(
                        f"state time {state.time:.3f} s is before the latest {previous.time:.3f}"
                        " s (stale or reordered message)"
                    )
                self._clock_restarted(previous.time, state)
            self.board.state = state
            self.board.state_seq += 1
            if self.board.hold is None:
                self.board.hold = self.arm.ctrl(state.joints)
            self.board.lock.notify_all()
        self._state_accepted(state)

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
            return check_state(
                time, joints, objects, velocities, self.names, self._pool, self._ignore_object
            )
        except InvalidStateError:
            with self.board.lock:
                self._rejected += 1
            raise

    def _ignore_object(self, name: str) -> None:
        if name not in self._ignored_objects:
            self._ignored_objects.add(name)
            self._log(
                f"ignoring object '{name}': not in layout '{self.layout}' "
                "(the planning model cannot represent it)"
            )

    def set_spec(self, spec: RewardSpec | None) -> None:
        """Start (or swap to) the task ``spec``; ``None`` cancels and holds position.

        The spec's objects are checked against the latest measured objects (or the planning
        model's before any state): ``RewardSpecError`` says which are missing. A swap while a
        task runs keeps the warm start and takes effect at the next planning iteration; a
        start from a hold plans from the held targets.
        """
        if spec is not None:
            with self.board.lock:
                names = (
                    list(self.board.state.objects)
                    if self.board.state is not None
                    else list(self.pm.object_names)
                )
            check_objects(spec, names)
        with self.board.lock:
            if spec is None:
                self.board.end_locked("idle", "cancelled", None, self.board.state)
                self._spec_changed_locked(None, False)
                return
            fresh = not self.board.running
            if fresh:
                self.board.plan = None
            start = self.board.state.time if self.board.state is not None else None
            self.board.pending = (spec, fresh, start)
            self.board.generation += 1
            self.board.running = True
            self.board.status, self.board.reason, self.board.task_name = "running", "", spec.task
            self._spec_changed_locked(spec, fresh)
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
