"""What the conductor needs from its host and from the executors (protocols, no ROS).

The conductor decides; its host carries the results out. ``Outlet`` is the host's side (the
planner node publishes on topics and calls the safety node; ``lang2policy run`` prints), a
``CodeExecutor`` is where a code plan's skill calls move an arm (the simulated arm in-process,
or the arm in the graph), and a ``RewardExecutor`` is where a reward spec is optimised (an
in-process MPC, or the controller node reached through the outlet). A ``ZonePort`` (the planner
node) carries the running plan's keep-out zones to the safety node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from lang2policy.graph.topics import StatusEvent
from lang2policy.rewards.spec import RewardSpec
from lang2policy.sandbox.policy_zones import Box
from lang2policy.session.protocol import Session
from lang2policy.skills.backend import SimSkillBackend

Positions = dict[str, tuple[float, ...]]


class Outlet(Protocol):
    """The host's side: where status events and reward specs go, and the safety stop."""

    def status(self, event: StatusEvent) -> None:
        """Tell the person (and the recorder) what happened."""

    def send_spec(self, spec: RewardSpec | None) -> None:
        """Hand ``spec`` to the reward executor outside the process (None: cancel the task)."""

    def request_stop(self) -> bool:
        """Ask the safety layer to stop and hold the arm; False when nobody answers."""


class ZonePort(Protocol):
    """Where the running plan's keep-out zones go (the planner node: ``/lang2policy/plan_zones``,
    which the safety node enforces on every motion)."""

    def send_plan_zones(self, plan_id: str | None, zones: Mapping[str, Box]) -> None:
        """The zones of plan ``plan_id``; ``None`` and ``{}`` when no plan runs."""


class CodeExecutor(Protocol):
    """Where a code plan's skill calls move an arm."""

    session: Session
    backend: SimSkillBackend
    live: bool  # True: a motion can be interrupted mid-way (an arm in the graph)

    def object_names(self) -> list[str]:
        """The objects this arm's scene holds (without a live view of the scene)."""

    def prepare(self) -> None:
        """Before a code plan moves the arm: fresh state, the scene heard."""

    def finish(self) -> None:
        """After a code plan: bring the scene model in step with the arm."""

    def current_call(self) -> tuple[str, dict] | None:
        """The motion skill running now, with its arguments (None when none)."""

    def abort(self, reason: str) -> None:
        """End the running motion (and the planning of the next one) with ``reason``."""

    def interrupt_for_edit(self) -> None:
        """Stop the running motion so the gate decides the edited call before it restarts."""


@dataclass
class RewardRun:
    """What running one reward spec gave: whether it reached its goal, and a JSON-able detail
    for the status line (the MPC's outcome, or that the spec was handed on)."""

    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


class RewardExecutor(Protocol):
    """Where a reward spec is optimised."""

    def run(self, spec: RewardSpec, on_line) -> RewardRun:
        """Run ``spec`` (a new task, or an edit of the running one); ``on_line`` takes
        progress lines."""

    def cancel(self) -> None:
        """End the running reward task (a stop, or a code plan takes the arm)."""

    def close(self) -> None:
        """Release what the executor holds (threads, renderers)."""


class SkillExecutor(Protocol):
    """Where a language skill runs on a learned policy (a VLA): the slot for skill plans
    (``lang2policy.conductor.skill_route.SkillRoute``: the VLA node in the graph)."""

    stop_pending: Callable[[], str]  # the host's stop reason ("" while none): no skill starts

    @property
    def active(self) -> bool:
        """True while a skill runs (a skill plan, or a code plan's ``vla_skill`` call)."""

    def refusal(self, instruction: str) -> str:
        """Why the VLA cannot run ``instruction`` (listing what it can do); "" when it can."""

    def run(self, instruction: str, scene, on_line, motions=()) -> RewardRun:
        """Gate and run the skill the instruction names until it ends; ``scene`` is a
        ``SkillScene``, ``on_line`` takes progress, ``motions`` are remembered corrections."""

    def run_call(self, args: dict, scene, on_line) -> RewardRun:
        """Gate and run ``vla_skill(**args)`` of a code plan (bound arguments)."""

    def cancel(self) -> None:
        """End the running skill (a stop); nothing when none runs."""

    def motion(self, text: str, on_answer, on_forward=None) -> str:
        """Forward a correction to the running skill as a language motion (``on_forward``
        runs just before); ``on_answer`` gets the VLA's answer (a dict). "" when forwarded,
        else why not."""
