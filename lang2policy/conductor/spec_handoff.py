"""Reward specs handed to the controller node, and the controller's verdict on each waited for.

``SpecHandOff`` is the reward executor of the graph: ``run`` sends the spec through the host's
``Outlet`` (the planner node publishes it on ``/lang2policy/reward_spec``) and returns only when
the controller node has ended the task, as its lines on ``/lang2policy/status`` say (the host
hands them to ``on_status``):

1. ``accepted`` for the spec's task (the controller validated it), or ``rejected`` (the plan
   fails with the controller's error); no answer within ``accept_timeout_s``: the plan fails
   saying the controller did not answer;
2. then the controller's periodic line for that task in an end state: ``success`` (the spec's
   success condition held: the plan is ``done``), ``failed`` or ``timeout`` (the plan fails with
   the controller's reason and each unmet condition's measured value, ``reward_verdict``); a
   ``cancelled`` from elsewhere ends it too. The wait is bounded by the spec's duration plus
   ``answer_margin_s``, counted in the controller's measured time while that advances (a sim
   slower than real time is not cut short); past it the task is cancelled and the plan fails.

An edit of the running spec (a correction, ``run`` while a run waits) is sent and taken over by
the waiting run: its verdict is the edited spec's (an edit the controller rejects leaves the
running spec, and the run follows that one again). ``cancel`` (a stop) cancels the task and ends
the waiting run as ``stopped``. The hand-off relays none of the controller's lines as its own:
they are on the status topic already, once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lang2policy.conductor.ports import Outlet, RewardRun
from lang2policy.conductor.reward_verdict import ENDED, reward_verdict
from lang2policy.graph.topics import CONTROLLER_NODE

Line = Callable[[str], None]
POLL_S = 0.05


@dataclass
class _Task:
    """One spec on the controller: what is waited for, and how it ended."""

    spec: Any  # RewardSpec
    deadline: float  # monotonic: no accepted line by then, or no end by then
    accepted: bool = False
    started: float | None = None  # the controller's measured time at the first running line
    heard: float | None = None  # its measured time at the latest running line
    final: dict | None = None  # the controller's end line, or the hand-off's own end
    before: tuple | None = None  # an edit not yet accepted: what the controller still runs
    done: threading.Event = field(default_factory=threading.Event)


class SpecHandOff:
    """Reward specs go to the controller node; ``run`` waits for its verdict (see the module
    docstring)."""

    def __init__(
        self, outlet: Outlet, *, accept_timeout_s: float = 5.0, answer_margin_s: float = 10.0
    ) -> None:
        self.outlet = outlet
        self.accept_timeout_s, self.answer_margin_s = accept_timeout_s, answer_margin_s
        self._lock = threading.Lock()
        self._task: _Task | None = None

    def run(self, spec, on_line: Line) -> RewardRun:
        """Send ``spec`` and wait for the controller's end of it; an edit while a run waits is
        sent and handed to that run (this call then returns at once)."""
        with self._lock:
            waiting = self._task
            if waiting is not None and not waiting.done.is_set():
                if waiting.accepted:
                    waiting.before = _following(waiting)
                waiting.spec, waiting.accepted = spec, False
                waiting.started = waiting.heard = None
                waiting.deadline = time.monotonic() + self.accept_timeout_s
                edit = True
            else:
                task = self._task = _Task(spec, time.monotonic() + self.accept_timeout_s)
                edit = False
        self.outlet.send_spec(spec)
        if edit:
            return RewardRun(True, {"outcome": "edited"})
        budget = spec.duration + self.answer_margin_s
        on_line(f"reward spec sent to the controller; waiting up to {budget:g} s for its end")
        try:
            self._wait(task)
        finally:
            with self._lock:
                if self._task is task:
                    self._task = None
        return self._result(task)

    def _wait(self, task: _Task) -> None:
        while not task.done.wait(POLL_S):
            with self._lock:
                if time.monotonic() < task.deadline or task.done.is_set():
                    continue
                if task.accepted:
                    budget = task.spec.duration + self.answer_margin_s
                    reason = f"the controller did not end the task within {budget:g} s"
                else:
                    reason = (
                        f"the controller did not answer the spec within "
                        f"{self.accept_timeout_s:g} s; is the controller node running?"
                    )
                task.final = {"state": "no_answer", "detail": reason}
                task.done.set()
            self.outlet.send_spec(None)  # nothing runs on that nobody reports

    def _result(self, task: _Task) -> RewardRun:
        final = task.final or {}
        status = str(final.get("state", "no_answer"))
        stats = final.get("stats")
        stats = stats if isinstance(stats, dict) else {}
        measures = stats.get("measures")
        measures = measures if isinstance(measures, dict) else {}
        reason = _text(final.get("detail"))  # says how long it ran ("8 s passed")
        ok, detail = reward_verdict(task.spec, status, reason, measures, None)
        if final.get("node") == CONTROLLER_NODE:
            detail["controller"] = {"state": status, "reason": reason, "task": final.get("task")}
        return RewardRun(ok, detail)

    def on_status(self, line: Mapping[str, Any]) -> None:
        """A line heard on the status topic: the controller's about the awaited task count."""
        if line.get("node") != CONTROLLER_NODE:
            return
        state = str(line.get("state"))
        with self._lock:
            task = self._task
            if task is None or task.done.is_set():
                return
            if state == "cancelled" and task.accepted:
                self._end(task, dict(line))
                return
            if line.get("task") != task.spec.task:
                return
            if state == "rejected" and task.before is not None:
                _restore(task)  # an edit the controller refused: the running spec goes on
            elif state == "rejected":
                self._end(task, dict(line))
            elif state == "accepted":
                task.accepted, task.before = True, None
                task.deadline = time.monotonic() + task.spec.duration + self.answer_margin_s
            elif task.accepted and state == "running":
                self._progress(task, line.get("stats"))
            elif task.accepted and state in ENDED:
                self._end(task, dict(line))

    def _progress(self, task: _Task, stats: object) -> None:
        """A running line: the wait follows the controller's measured time (lock held)."""
        now = stats.get("time") if isinstance(stats, dict) else None
        if not isinstance(now, int | float) or isinstance(now, bool):
            return
        if task.started is None:
            task.started = float(now)
        elif task.heard is not None and now <= task.heard:
            return  # the controller's clock stands still: the deadline does too
        task.heard = float(now)
        left = task.spec.duration - (now - task.started)
        task.deadline = max(task.deadline, time.monotonic() + left + self.answer_margin_s)

    def _end(self, task: _Task, line: dict) -> None:
        task.final = line
        task.done.set()

    def cancel(self) -> None:
        """End the controller's task (a stop, or another plan takes the arm); a waiting run
        ends as ``stopped``."""
        with self._lock:
            task = self._task
            if task is not None and not task.done.is_set():
                self._end(task, {"state": "stopped", "detail": "the task was cancelled"})
        self.outlet.send_spec(None)

    def close(self) -> None:
        """Nothing held here: the controller node owns the task."""


def _following(task: _Task) -> tuple:
    return task.spec, task.started, task.heard, task.deadline


def _restore(task: _Task) -> None:
    """Follow again the spec the controller runs (lock held)."""
    assert task.before is not None  # the caller checked: an edit not yet accepted
    task.spec, task.started, task.heard, task.deadline = task.before
    task.accepted, task.before = True, None


def _text(detail: object) -> str:
    if isinstance(detail, dict):
        return str(detail.get("reason") or detail.get("message") or "")[:300]
    return "" if detail is None else str(detail)[:300]
