"""The skill route (issue 18): an instruction the VLA can do runs as a skill plan on the VLA node.

``SkillRoute`` is the conductor's ``SkillExecutor`` for a VLA reached over the skill topic
(``/lang2policy/skill``; the host, the planner node, is its ``SkillPort``). A skill plan:

1. parses the instruction with the VLA's task vocabulary (``vla.skill.parse``; ``refusal``
   says what the VLA can do when it cannot);
2. asks the privilege gate (``sandbox.skill_gate``, the same ``PrivilegePolicy`` as code
   calls): denied, the plan fails with the rule's reason and nothing is published; allowed, the
   decision gives the plan's limits (workspace box, joint speed cap, time budget);
3. publishes the start message ``{"skill", "plan_id", "limits", "motions"}`` (``motions``: the
   corrections remembered for similar skill plans, applied from the first control cycle);
4. follows the VLA node's status lines with its ``plan_id`` (its progress is on the status
   topic already and is not repeated as the planner's), and ends on its terminal
   state (success, timeout, failed, stopped, cancelled, rejected). No terminal state within the
   time budget and ``answer_margin_s``: the skill is cancelled (``""``) and the plan fails
   saying so. ``cancel`` (a stop) publishes ``""`` and waits ``CANCEL_GRACE_S`` for the end.
   A stop that races the start cannot let the skill run: the host's stop (``stop_pending``,
   the conductor's) is checked once the run is registered, before anything is sent, and a
   cancel that came while the start was being sent is sent again after it (its ``""`` may
   have reached the VLA node before the start).

Corrections other than ``stop`` are forwarded as language motions (``motion``): ``{"motion":
text, "plan_id"}``; the VLA's answer (status ``motion``, action applied or refused) goes to the
callback given with it. ``run_call`` is ``vla_skill(...)`` in policy code: the same gate and
the same topic, for one call of a code plan.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lang2policy.conductor.ports import Positions, RewardRun
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph.topics import FINAL_SKILL_STATES, SKILL, VLA_NODE
from lang2policy.sandbox.policy import PrivilegePolicy
from lang2policy.sandbox.skill_gate import (
    GrantedSkillLimits,
    SkillVerdict,
    decide_skill,
    skill_request,
)
from lang2policy.vla.skill.message import MAX_MOTIONS  # the contract's cap: the newest
from lang2policy.vla.skill.parse import parse_skill

Line = Callable[[str], None]
Answer = Callable[[dict], None]
CANCEL_GRACE_S = 3.0  # s a cancelled skill waits for the VLA node's final status
POLL_S = 0.05


@dataclass(frozen=True)
class SkillSettings:
    """The limits a skill plan asks the gate for, and how long it waits for the VLA."""

    max_joint_speed: float = 1.0  # rad/s
    time_budget_s: float = 0.0  # s; 0: the skill family's budget (``rollout.MAX_SECONDS``)
    answer_margin_s: float = 10.0  # s past the time budget before the plan gives up

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            zero_ok = name == "time_budget_s"
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
                bound = ">= 0" if zero_ok else "> 0"
                raise ConfigError(f"skill {name} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True)
class SkillScene:
    """What the conductor knows of the scene when a skill starts: positions and names."""

    positions: Positions
    names: Sequence[str]


class SkillPort(Protocol):
    """The host's side of the skill topic."""

    def send_skill(self, text: str) -> None:
        """Publish ``text`` on the skill topic (a JSON start or motion message, "" cancels)."""

    def skill_listeners(self) -> int:
        """How many subscribers the skill topic has (0: no VLA node runs)."""


@dataclass
class _Run:
    """One skill on the VLA node: sent, waited for, and its final status line."""

    plan_id: str
    skill: str
    on_line: Line
    final: dict | None = None
    done: threading.Event = field(default_factory=threading.Event)
    cancelled_at: float | None = None
    answers: list[tuple[str, Answer]] = field(default_factory=list)  # motions said, unanswered


class SkillRoute:
    """Skill plans on the VLA node through a ``SkillPort`` (see the module docstring)."""

    def __init__(
        self, port: SkillPort, policy: PrivilegePolicy, settings: SkillSettings | None = None
    ) -> None:
        self.port, self.policy = port, policy
        self.settings = settings or SkillSettings()
        self.stop_pending: Callable[[], str] = lambda: ""  # the host's stop reason ("": none)
        self._lock = threading.Lock()
        self._run: _Run | None = None

    @property
    def active(self) -> bool:
        """True while a skill runs on the VLA (a skill plan, or a code plan's call)."""
        with self._lock:
            return self._run is not None

    # ------------------------------------------------------------------ the vocabulary
    def refusal(self, instruction: str) -> str:
        """Why the VLA cannot run ``instruction`` (with what it can do); "" when it can."""
        try:
            parse_skill(instruction)
        except Lang2PolicyError as exc:
            return str(exc)
        return ""

    # ------------------------------------------------------------------ skill plans
    def run(
        self, instruction: str, scene: SkillScene, on_line: Line, motions: Sequence[str] = ()
    ) -> RewardRun:
        """Gate and run the skill ``instruction`` names to its end (see the module docstring)."""
        try:
            skill = parse_skill(instruction)
        except Lang2PolicyError as exc:
            return RewardRun(False, {"outcome": "rejected", "message": str(exc)})
        budget = self.settings.time_budget_s or skill.budget
        verdict = self.gate(skill.instruction, scene, budget, self.settings.max_joint_speed)
        detail = {"skill": skill.instruction, "family": skill.task.family}
        return self._run_gated(verdict, detail, motions, on_line)

    def run_call(self, args: Mapping[str, Any], scene: SkillScene, on_line: Line) -> RewardRun:
        """``vla_skill(**args)`` of a code plan (bound arguments): gated by the same rule,
        run on the VLA node like a skill plan."""
        text = str(args["instruction"])
        try:
            skill = parse_skill(text)
        except Lang2PolicyError as exc:
            return RewardRun(False, {"outcome": "rejected", "message": str(exc)})
        budget, speed = float(args["time_budget_s"]), float(args["max_joint_speed"])
        verdict = self.gate(skill.instruction, scene, budget, speed)
        detail = {"skill": skill.instruction, "family": skill.task.family}
        return self._run_gated(verdict, detail, (), on_line)

    def gate(self, text: str, scene: SkillScene, budget: float, speed: float) -> SkillVerdict:
        """The privilege policy's verdict on skill ``text`` with these limits."""
        request = skill_request(
            text,
            time_budget_s=budget,
            max_joint_speed=speed,
            positions=scene.positions,
            scene_objects=scene.names,
        )
        return decide_skill(self.policy, request)

    def _run_gated(
        self, verdict: SkillVerdict, detail: dict, motions: Sequence[str], on_line: Line
    ) -> RewardRun:
        decision = verdict.decision
        detail["rule"] = decision.rule
        if not verdict.allowed or verdict.limits is None:
            message = f"denied by the privilege policy: {decision.reason}"
            return RewardRun(False, {**detail, "outcome": "denied", "message": message})
        limits, motions = verdict.limits, list(motions)[-MAX_MOTIONS:]
        detail |= {"limits": limits.to_dict(), "motions": motions}
        on_line(f"skill allowed by rule '{decision.rule}': {describe_limits(limits)}")
        return self._execute(detail, limits, motions, on_line)

    def _execute(
        self, detail: dict, limits: GrantedSkillLimits, motions: Sequence[str], on_line: Line
    ) -> RewardRun:
        """Send the start message and wait for the VLA node's final word on it."""
        if self.port.skill_listeners() == 0:
            message = f"no VLA node listens on {SKILL.name}; start the graph with vla:=true"
            return RewardRun(False, {**detail, "outcome": "no_vla", "message": message})
        run = _Run(uuid.uuid4().hex[:12], detail["skill"], on_line)
        detail["plan_id"] = run.plan_id
        with self._lock:
            self._run = run
        try:
            stop = self.stop_pending()  # a stop before the run was registered: nothing is sent
            if stop:
                message = f"stopped before the skill started: {stop}"
                return RewardRun(False, {**detail, "outcome": "stopped", "message": message})
            self.port.send_skill(start_message(run.skill, run.plan_id, limits, motions))
            with self._lock:
                raced = run.cancelled_at is not None
            if raced:  # the stop's "" may have gone out before the start: cancel it again
                self.port.send_skill("")
            on_line(f"skill plan {run.plan_id} sent to the VLA: {run.skill!r}")
            patience = limits.time_budget_s + self.settings.answer_margin_s
            final = self._wait(run, patience)
        finally:
            with self._lock:
                self._run = None
        return self._result(run, final, detail, patience)

    def _wait(self, run: _Run, patience: float) -> dict | None:
        """The final status line of ``run``; None when none came in time (the skill is then
        cancelled) or after a cancel's grace period."""
        deadline = time.monotonic() + patience
        while not run.done.wait(POLL_S):
            now = time.monotonic()
            if run.cancelled_at is not None and now > run.cancelled_at + CANCEL_GRACE_S:
                return None
            if run.cancelled_at is None and now > deadline:
                self.port.send_skill("")
                return None
        return run.final

    def _result(self, run: _Run, final: dict | None, detail: dict, patience: float) -> RewardRun:
        if final is None and run.cancelled_at is not None:
            message = f"stopped; the VLA node did not confirm within {CANCEL_GRACE_S:g} s"
            return RewardRun(False, {**detail, "outcome": "stopped", "message": message})
        if final is None:
            message = (
                f"the VLA node did not end skill plan {run.plan_id} within {patience:g} s (its "
                f"time budget and {self.settings.answer_margin_s:g} s); the skill was cancelled"
            )
            return RewardRun(False, {**detail, "outcome": "no_answer", "message": message})
        state = str(final.get("state"))
        detail |= {"outcome": state, "message": detail_text(final.get("detail"))}
        if isinstance(final.get("stats"), dict):
            detail["stats"] = final["stats"]
        return RewardRun(state == "success", detail)

    # ------------------------------------------------------------------ live input
    def cancel(self) -> None:
        """End the running skill (a stop): "" on the skill topic; ``run`` returns soon."""
        with self._lock:
            run = self._run
            if run is None or run.cancelled_at is not None:
                return
            run.cancelled_at = time.monotonic()
        self.port.send_skill("")

    def motion(
        self, text: str, on_answer: Answer, on_forward: Callable[[], None] | None = None
    ) -> str:
        """Forward the correction ``text`` to the running skill as a language motion:
        ``on_forward`` runs just before it is sent (so that what the host says of it comes
        before the answer), ``on_answer`` gets the VLA's answer. "" when forwarded, else why
        not."""
        with self._lock:
            run = self._run
            if run is None or run.cancelled_at is not None:
                return "no skill plan is running"
            run.answers.append((text, on_answer))
        if on_forward is not None:
            on_forward()
        self.port.send_skill(json.dumps({"motion": text, "plan_id": run.plan_id}))
        return ""

    def on_status(self, line: Mapping[str, Any]) -> None:
        """A status line heard on the status topic: the running skill's are relayed."""
        if line.get("node") != VLA_NODE:
            return
        with self._lock:
            run = self._run
        if run is None or not _about(line, run):
            return
        state = str(line.get("state"))
        if state == "motion":
            self._answer(run, line)
        elif state in FINAL_SKILL_STATES:
            run.final = dict(line)
            run.done.set()
        # its progress lines are not repeated as the planner's: each is on the topic once

    def _answer(self, run: _Run, line: Mapping[str, Any]) -> None:
        detail = line.get("detail")
        detail = dict(detail) if isinstance(detail, dict) else {"reason": str(detail)}
        with self._lock:
            if not run.answers:
                return
            index = next(
                (i for i, (t, _) in enumerate(run.answers) if t == detail.get("text")), 0
            )
            _text, on_answer = run.answers.pop(index)
        on_answer(detail)


def start_message(
    skill: str, plan_id: str, limits: GrantedSkillLimits, motions: Sequence[str] = ()
) -> str:
    """The skill topic's JSON start message (the contract of ``ros/vla_node.py``)."""
    message = {"skill": skill, "plan_id": plan_id, "limits": limits.to_dict()}
    if motions:
        message["motions"] = list(motions)
    return json.dumps(message)


def describe_limits(limits: GrantedSkillLimits) -> str:
    box = limits.workspace
    return (
        f"{limits.time_budget_s:g} s, joints at most {limits.max_joint_speed:g} rad/s, tool in "
        f"x {box.min[0]:.2f}..{box.max[0]:.2f}, y {box.min[1]:.2f}..{box.max[1]:.2f}, "
        f"z {box.min[2]:.2f}..{box.max[2]:.2f} m"
    )


def plan_id_of(line: Mapping[str, Any]) -> str | None:
    """The ``plan_id`` a VLA status line carries (in its detail, or beside it)."""
    detail = line.get("detail")
    if isinstance(detail, dict) and isinstance(detail.get("plan_id"), str):
        return detail["plan_id"]
    found = line.get("plan_id")
    return found if isinstance(found, str) else None


def _about(line: Mapping[str, Any], run: _Run) -> bool:
    """True when ``line`` is about ``run``: its plan_id, or a rejection of the start message
    that could not say one (the instruction it quotes is the message or the skill)."""
    plan_id = plan_id_of(line)
    if plan_id is not None:
        return plan_id == run.plan_id
    if line.get("state") != "rejected":
        return False
    quoted = str(line.get("instruction", ""))
    return quoted == run.skill or (quoted.startswith("{") and run.plan_id in quoted)


def detail_text(detail: object) -> str:
    """A status detail as one line: its reason or message when it is an object."""
    if isinstance(detail, dict):
        for key in ("reason", "message", "error", "text"):
            if isinstance(detail.get(key), str) and detail[key]:
                return detail[key]
        rest = {k: v for k, v in detail.items() if k != "plan_id"}
        return json.dumps(rest)[:300] if rest else ""
    return "" if detail is None else str(detail)[:300]
