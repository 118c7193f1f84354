"""The running task as the control side and the planning thread of ``RealtimeMPC`` share it.

One ``TaskBoard`` holds, under its ``lock``, the latest measured state, the spec waiting for
the planning thread, the plan ``action`` evaluates, the controls held while no task runs, and
the task's status. ``generation`` is bumped by every start, swap and end of a task, so the
planning thread can tell that what it planned for has gone (``end_if_current``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lang2policy.mpc.arm_map import ArmMap
from lang2policy.mpc.measured_state import MeasuredState
from lang2policy.mpc.sampler import ControlPlan, MPCConfig

NO_CHANGE = object()  # "no new spec pending" (None is a valid pending spec: cancel)


@dataclass(frozen=True)
class Turn:
    """What one planning iteration works from, as seen when it began."""

    state: MeasuredState
    generation: int
    running: bool


class TaskBoard:
    """What runs and what is commanded; read and changed with ``lock`` held (the ``*_locked``
    methods expect it held, the others take it)."""

    def __init__(self, arm: ArmMap, config: MPCConfig, info: Callable[[str], None]) -> None:
        self.arm, self.config, self._info = arm, config, info
        self.lock = threading.Condition()
        self.state: MeasuredState | None = None
        self.state_seq = 0
        self.pending: object = NO_CHANGE  # (spec, fresh?, start time) for the sampler
        self.generation = 0  # bumped by every start, swap and end of a task
        self.plan: ControlPlan | None = None  # what action() evaluates while a task runs
        self.hold: np.ndarray | None = None  # ctrl held while no task runs
        self.status, self.reason, self.task_name = "idle", "", ""
        self.running = False

    def command_at(self, state: MeasuredState) -> np.ndarray:
        """The ctrl being commanded at ``state``'s time (takes the lock)."""
        with self.lock:
            return self.command_locked(state.time, state)

    def command_locked(self, t: float, state: MeasuredState | None = None) -> np.ndarray:
        """The ctrl being commanded at measured time ``t`` (lock held)."""
        if self.running and self.plan is not None:
            ctrl = np.clip(self.plan.control(t, self.config), self.arm.low, self.arm.high)
            if np.all(np.isfinite(ctrl)):
                return ctrl
        if self.hold is not None:
            return self.hold.copy()
        return self.arm.ctrl((state or self.state).joints)

    def end_if_current(self, turn: Turn, status: str, reason: str,
                       hold: np.ndarray | None) -> None:
        """End the task ``turn`` planned for, unless it already ended or was swapped."""
        with self.lock:
            if self.generation == turn.generation and self.running:
                self.end_locked(status, reason, hold, turn.state)

    def end_locked(self, status: str, reason: str, hold: np.ndarray | None,
                   state: MeasuredState | None) -> None:
        """End the task (lock held): hold ``hold``, or the measured position of ``state``."""
        was_running = self.running
        if hold is None and state is not None:
            hold = self.arm.ctrl(state.joints)
        if hold is not None:
            self.hold = hold
        self.generation += 1
        self.pending = NO_CHANGE
        self.running, self.plan = False, None
        self.status, self.reason = status, reason
        if status == "idle":
            self.task_name = ""
        if was_running and status != "idle":
            self._info(f"task '{self.task_name}' ended: {status} ({reason})")
