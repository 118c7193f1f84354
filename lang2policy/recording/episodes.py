"""When an episode starts and ends, from the status lines on ``/lang2policy/status``.

Pure state machine driven by explicit times (seconds, any monotonic clock):

  * the planner's ``received`` starts an episode (ending the one before, if any);
  * ``correction`` keeps the running episode going (or starts one when none runs);
  * ``done``/``failed``/``stopped`` end it ``linger`` seconds later, so the arm settling is
    recorded too; a status that starts or corrects again within ``linger`` keeps it open;
  * a reward plan (``done`` with outcome ``reward_spec``) is carried out by the MPC
    controller, so the episode waits for the controller to take the task (``accepted`` or
    ``running``, within ``controller_wait`` s) and to finish it (``success``, ``failed``,
    ``timeout``, ``cancelled``, ``rejected``) before lingering.

Every line names its ``node`` (``lang2policy.graph.topics.StatusEvent``): the planner's and the
controller's steer episodes, others are ignored; a line without ``node`` (recorded before
every line named one) is the planner's. The teleop node's lines are episode marks of
demonstrations: its ``received`` (``instruction``: the task) starts one and its ``done`` or
``discarded`` ends it, as the planner's would.
"""

from __future__ import annotations

from dataclasses import dataclass

from lang2policy.graph.topics import CONTROLLER_NODE, PLANNER_NODE, TELEOP_NODE, status_node


@dataclass(frozen=True)
class Start:
    """Open a new episode named after ``label`` (the instruction)."""

    label: str


@dataclass(frozen=True)
class Stop:
    """Close the running episode; ``reason`` says why."""

    reason: str


PLANNER_END = ("done", "failed", "stopped")
TELEOP_END = ("done", "discarded")
CONTROLLER_TAKEN = ("accepted", "running")
CONTROLLER_END = ("success", "failed", "timeout", "cancelled", "rejected")


class EpisodeTracker:
    """Turns status lines into ``Start``/``Stop`` events (see the module docstring)."""

    def __init__(self, linger: float = 3.0, controller_wait: float = 10.0) -> None:
        if linger < 0 or controller_wait <= 0:
            raise ValueError("linger must be >= 0 and controller_wait > 0 (seconds)")
        self.linger = linger
        self.controller_wait = controller_wait
        self.label: str | None = None  # the running episode's instruction; None: none runs
        self._close_at: float | None = None
        self._controller = ""  # "" | "wait_start" | "wait_end": a reward task in progress
        self._reason = ""
        self._wait_until = 0.0
        self._taken = False  # the controller took a task during this episode

    @property
    def active(self) -> bool:
        return self.label is not None

    def on_status(self, status: dict, now: float) -> list[Start | Stop]:
        """Feed one decoded status line; returns the events it causes, in order."""
        events = self.poll(now)
        node = status_node(status)
        if node == CONTROLLER_NODE:
            self._on_controller(str(status.get("state", "")), now)
        if node == TELEOP_NODE:
            return events + self._on_teleop(status, now)
        if node != PLANNER_NODE:
            return events
        state, instruction = status.get("state"), str(status.get("instruction", ""))
        if state == "received":
            if self.active:
                events.append(Stop("next instruction"))
            events.append(self._start(instruction))
        elif state == "correction":
            if self.active:
                self._close_at, self._controller = None, ""
            else:
                events.append(self._start(instruction))
        elif state in PLANNER_END and self.active:
            if state == "done" and _is_reward_plan(status.get("detail")):
                # The controller may have answered the spec before this line arrived.
                self._controller = "wait_end" if self._taken else "wait_start"
                self._wait_until = now + self.controller_wait
            else:
                self._end(f"planner {state}", now)
        return events

    def _on_teleop(self, status: dict, now: float) -> list[Start | Stop]:
        """A demonstration's start (``received``) or end (``done``/``discarded``)."""
        state, events = status.get("state"), []
        if state == "received":
            if self.active:
                events.append(Stop("next demonstration"))
            events.append(self._start(str(status.get("instruction", ""))))
        elif state in TELEOP_END and self.active and self._close_at is None:
            self._end(f"teleop {state}", now)
        return events

    def poll(self, now: float) -> list[Stop]:
        """The ``Stop`` due at ``now``, if any (call it regularly)."""
        if self._controller == "wait_start" and now >= self._wait_until:
            self._end("the controller did not take the reward task", self._wait_until)
        if self._close_at is None or now < self._close_at:
            return []
        stop = Stop(self._reason)
        self.label, self._close_at, self._controller = None, None, ""
        return [stop]

    def finish(self) -> list[Stop]:
        """Close the running episode now (shutdown)."""
        if not self.active:
            return []
        self.label, self._close_at, self._controller = None, None, ""
        return [Stop("recorder shutting down")]

    def _start(self, instruction: str) -> Start:
        self.label, self._close_at, self._controller = instruction, None, ""
        self._taken = False
        return Start(instruction)

    def _end(self, reason: str, now: float) -> None:
        self._controller, self._reason = "", reason
        self._close_at = now + self.linger

    def _on_controller(self, state: str, now: float) -> None:
        if self.active and state in CONTROLLER_TAKEN:
            self._taken = True
            if self._controller == "wait_start":
                self._controller = "wait_end"
        elif self._controller == "wait_end" and state in CONTROLLER_END:
            self._end(f"controller {state}", now)
        elif self._controller == "wait_start" and state == "rejected":
            self._end("controller rejected the reward spec", now)


def _is_reward_plan(detail: object) -> bool:
    return isinstance(detail, dict) and detail.get("outcome") == "reward_spec"
