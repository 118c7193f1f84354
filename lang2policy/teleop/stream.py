"""What the teleop node sends each tick, and when it holds instead (pure, explicit times).

``TargetStream`` keeps the latest good target of a teleoperation source with its time. Each
tick (``step``) it answers the target to stream, or a hold with the reason: no target yet, the
last one older than ``stale_after`` seconds (a leader bus that stopped answering, a stuck
reader), or a fault reported since (a bad reading, a lost keyboard): a fault holds at once and
until a new good target arrives. ``hold_sent`` lets the caller send the hold once, not every
tick. ``parse_source`` reads the ``source`` parameter / ``--source`` flag, and ``Episode``
keeps the start/stop state of demonstrations with their task text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.instruction_text import text_problem

KEYBOARD = "keyboard"
LEADER = "leader"
MAX_TASK_CHARS = 200
STREAMING, HOLDING, WAITING = "streaming", "holding", "waiting"


@dataclass(frozen=True)
class Source:
    """A teleoperation source: ``keyboard`` or ``leader`` on ``port``."""

    kind: str
    port: str = ""

    def __str__(self) -> str:
        return f"{LEADER}:{self.port}" if self.kind == LEADER else KEYBOARD


def parse_source(text: str) -> Source:
    """``keyboard`` or ``leader:<serial port>`` -> ``Source``; ``ConfigError`` otherwise."""
    word = text.strip()
    if word == KEYBOARD:
        return Source(KEYBOARD)
    kind, colon, port = word.partition(":")
    if kind == LEADER and colon and port.strip():
        return Source(LEADER, port.strip())
    raise ConfigError(
        f"teleop source {text!r} is not valid; use 'keyboard' (simulation) or "
        "'leader:<serial port>' (a leader SO-101, e.g. leader:/dev/ttyUSB1)"
    )


def check_task(text: str) -> str:
    """The task text of an episode, stripped; ``ConfigError`` when empty, too long or not one
    printable line (it becomes the dataset's task)."""
    task = text.strip()
    problem = text_problem(task, "task") if task else "the task text is empty"
    if problem is None and len(task) > MAX_TASK_CHARS:
        problem = f"the task is {len(task)} characters; at most {MAX_TASK_CHARS}"
    if problem is not None:
        raise ConfigError(f"{problem}; give the demonstration's task, e.g. 'pick up the red block'")
    return task


@dataclass(frozen=True)
class StreamStep:
    """One tick's decision: ``target`` to send (None: hold), ``state`` and ``reason``."""

    target: np.ndarray | None
    state: str
    reason: str = ""


class TargetStream:
    """Latest good target with its age and faults (see the module docstring)."""

    def __init__(self, stale_after: float) -> None:
        if not math.isfinite(stale_after) or stale_after <= 0:
            raise ConfigError(f"stale_after must be a number of seconds > 0, got {stale_after}")
        self.stale_after = stale_after
        self._target: np.ndarray | None = None
        self._time = -math.inf
        self._fault = ""
        self.hold_sent = False

    def update(self, target: np.ndarray, now: float) -> None:
        """A good target from the source at ``now``; clears an earlier fault."""
        values = np.asarray(target, float)
        if not np.all(np.isfinite(values)):
            self.fault(f"the source gave a non-finite target {values.tolist()}", now)
            return
        self._target, self._time, self._fault = values.copy(), now, ""

    def fault(self, reason: str, now: float) -> None:
        """The source failed at ``now``: hold until the next good target."""
        self._fault = reason or "teleop source fault"

    def step(self, now: float) -> StreamStep:
        """The target to send at ``now``, or why the arm holds."""
        if self._fault:
            return StreamStep(None, HOLDING, self._fault)
        if self._target is None:
            return StreamStep(None, WAITING, "waiting for the first target from the source")
        age = now - self._time
        if age > self.stale_after:
            return StreamStep(
                None, HOLDING, f"source stale: no target for {age:.2f} s (> {self.stale_after} s)"
            )
        self.hold_sent = False
        return StreamStep(self._target.copy(), STREAMING)


class Episode:
    """Start/stop of demonstration episodes: ``start`` needs a task, ``stop`` keeps or discards."""

    def __init__(self, task: str = "") -> None:
        self.task = check_task(task) if task.strip() else ""
        self.active = False
        self.count = 0  # episodes started

    def start(self) -> str:
        """Start an episode; the task text. ``ConfigError`` without a task or while one runs."""
        if not self.task:
            raise ConfigError("no task text: start teleop with a task (--task \"...\")")
        if self.active:
            raise ConfigError("an episode is already running; stop it first")
        self.active, self.count = True, self.count + 1
        return self.task

    def stop(self) -> str:
        """End the running episode; the task. ``ConfigError`` when none runs."""
        if not self.active:
            raise ConfigError("no episode is running")
        self.active = False
        return self.task
