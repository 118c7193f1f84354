"""Run one policy program in a fresh sandbox child; gate and execute every intent it sends.

The host side of the sandbox. For each ``call`` message it (1) checks the per-plan call budget,
(2) validates the arguments against the skill's schema, (3) computes the Cartesian targets the
call would visit, (4) asks the privilege policy, acting on its fallback (error back to the
program, ask the user, or stop), and only then (5) executes the skill on the backend with the
remaining motion-time budget. Any failure ends with the arm told to hold still.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lang2policy.errors import (
    InvalidIntentError,
    Lang2PolicyError,
    MotionTimeExceeded,
    PolicyWideningError,
)
from lang2policy.robots.streamed_robot import CorrectionInterrupt, MotionAborted
from lang2policy.sandbox.ast_check import check_source
from lang2policy.sandbox.child_messages import (
    check_ready,
    collect_output,
    error_outcome,
    error_reply,
    exit_outcome,
    short_args,
    skill_message,
)
from lang2policy.sandbox.compute_clock import ComputeClock
from lang2policy.sandbox.gate_edits import ArgumentEdits, speed_cap
from lang2policy.sandbox.limits import SandboxLimits
from lang2policy.sandbox.outcome import IntentRecord, PlanOutcome
from lang2policy.sandbox.plan_state import (
    TEXT_LIMIT,
    PlanEnded,
    PlanState,
    motion_budget_outcome,
)
from lang2policy.sandbox.policy import Decision, PolicyRequest, PrivilegePolicy
from lang2policy.sandbox.process import ChildExited, ChildProcess, ChildTimeout, ProtocolError
from lang2policy.sandbox.skill_gate import call_workspace
from lang2policy.skills.backend import SkillBackend
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.spec import Skill
from lang2policy.skills.vla_call import VLA_SKILL, call_objects

AskUser = Callable[[PolicyRequest, Decision], bool]
IntentObserver = Callable[[IntentRecord], None]
MAX_RESTARTS = 8  # corrections one skill call may take before the plan gives it up


class SandboxRunner:
    """Runs policy programs against a skill backend under a privilege policy.

    ``ask_user(request, decision) -> bool`` answers rules whose fallback is "ask"; without it
    such calls are denied. ``on_intent(record)`` sees every intent once it has been answered
    (progress displays, benchmarks). ``ast_check=False`` skips the static pre-check (the
    red-team tests run that way: the boundary must hold without it).

    Two attributes are set per plan by whoever routes live input (the planner node):
    ``edits`` (``ArgumentEdits``, a person's corrections of the calls: every call and every
    restart after an edit is decided with them applied, see ``_gate``) and ``cancelled`` (a
    stop: the next call ends the plan as ``stopped``).
    """

    def __init__(
        self,
        backend: SkillBackend,
        policy: PrivilegePolicy,
        *,
        limits: SandboxLimits | None = None,
        ast_check: bool = True,
        ask_user: AskUser | None = None,
        on_intent: IntentObserver | None = None,
        skills: dict[str, Skill] | None = None,
    ) -> None:
        self.backend, self.policy = backend, policy
        self.limits = limits or SandboxLimits()
        self.ast_check, self.ask_user, self.on_intent = ast_check, ask_user, on_intent
        self.skills = SKILLS if skills is None else skills
        self.edits: ArgumentEdits | None = None
        self.restarts = 0  # skill calls restarted after a correction (status, tests)
        self.cancelled: Callable[[], str] = lambda: ""  # a stop's reason, "" while none
        self.start_child: Callable[[int], ChildProcess] = ChildProcess  # or SpareChild.take

    # ------------------------------------------------------------------ entry point
    def run(self, source: str, plan_policy: PrivilegePolicy | None = None) -> PlanOutcome:
        """Run ``source``; ``plan_policy`` may narrow (never widen) the runner's policy."""
        started = time.monotonic()
        said_before = len(self.backend.said())
        outcome = self._precheck(source)
        if outcome is None:
            try:
                policy = self.policy if plan_policy is None else self.policy.narrowed(plan_policy)
            except PolicyWideningError as exc:
                outcome = PlanOutcome("rejected", f"the plan's policy widens the base: {exc}")
            else:
                outcome = self._run_child_safely(source, PlanState(policy))
        if not outcome.ok:
            self.backend.hold()
        outcome.said = self.backend.said()[said_before:]
        outcome.wall_seconds = time.monotonic() - started
        if outcome.line and not outcome.source_line:
            lines = source.splitlines()
            if 0 < outcome.line <= len(lines):
                outcome.source_line = lines[outcome.line - 1][:200]
        return outcome

    def _precheck(self, source: str) -> PlanOutcome | None:
        if not isinstance(source, str) or not source.strip():
            return PlanOutcome("rejected", "the program is empty")
        if not self.ast_check:
            return None
        try:
            violations = check_source(source)
        except SyntaxError as exc:
            return PlanOutcome("syntax", f"{exc.msg}", line=exc.lineno, exc_type="SyntaxError")
        if violations:
            first = violations[0]
            more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
            return PlanOutcome("rejected", first.message + more, line=first.line or None)
        return None

    # ------------------------------------------------------------------ the child
    def _run_child_safely(self, source: str, state: PlanState) -> PlanOutcome:
        """Never let a host-side bug escape as an exception with the arm mid-plan."""
        try:
            return self._run_child(source, state)
        except Exception as exc:
            self.backend.hold()
            outcome = PlanOutcome(
                "crashed", f"host error while running the plan: {type(exc).__name__}: {exc}"
            )
            outcome.intents, outcome.layers = state.intents, state.layers
            return outcome

    def _run_child(self, source: str, state: PlanState) -> PlanOutcome:
        limits = self.limits
        with self.start_child(limits.max_message_bytes) as child:
            try:
                outcome = self._converse(child, source, state)
            except PlanEnded as ended:
                outcome = ended.outcome
            except ChildTimeout:
                outcome = PlanOutcome(
                    "limit",
                    f"the program used more than {limits.wall_seconds:g} s of compute time "
                    "(CPU, motion excluded) and was killed",
                    limit="wall",
                )
            except ProtocolError as exc:
                outcome = PlanOutcome("protocol", str(exc))
            except ChildExited:
                outcome = exit_outcome(
                    child.exit_status(wait=1.0), child.stderr_tail(), limits.cpu_seconds
                )
        outcome.intents, outcome.layers = state.intents, state.layers
        outcome.output = "".join(state.output)
        outcome.motion_seconds = state.motion_seconds
        return outcome

    def _converse(self, child: ChildProcess, source: str, state: PlanState) -> PlanOutcome:
        limits = self.limits
        child.send(
            {
                "type": "start",
                "code": source,
                "skills": [skill_message(s) for s in self.skills.values()],
                "limits": {
                    "cpu_seconds": limits.cpu_seconds,
                    "memory_mb": limits.memory_mb,
                    "max_output_bytes": limits.max_output_bytes,
                },
            }
        )
        ready = child.receive(time.monotonic() + limits.startup_seconds)
        check_ready(ready, state, limits.required_layers)
        clock = ComputeClock(child.pid, limits.wall_seconds)  # CPU seconds (compute_clock)
        while True:
            message = clock.receive(child)
            kind = message["type"]
            if kind == "call":
                started, background = time.process_time(), self._background_cpu()
                child.send(self._handle_call(message, state))
                spent = time.process_time() - started - state.take_motion_cpu()
                spent -= self._background_cpu() - background  # an in-process arm's threads
                clock.charge_host(spent, state.take_motion_wall())  # host planning counts
                if self.on_intent is not None:
                    self.on_intent(state.intents[-1])
            elif kind == "print":
                collect_output(message, state, limits.max_output_bytes)
            elif kind == "done":
                return PlanOutcome("ok", "the program finished")
            elif kind == "error":
                return error_outcome(message)
            else:
                raise ProtocolError(f"unexpected '{kind}' message from the child")

    # ------------------------------------------------------------------ intents
    def _handle_call(self, message: dict, state: PlanState) -> dict:
        call_id, name, args = message.get("id"), message.get("skill"), message.get("args")
        if not isinstance(call_id, int) or not isinstance(name, str) or not isinstance(args, dict):
            raise ProtocolError(
                "a call message needs an integer id, a skill name and an args object"
            )
        self._check_cancelled()
        budgets = state.policy.budgets
        if len(state.intents) >= budgets.max_skill_calls:
            state.intents.append(IntentRecord(name[:64], {}, "budget"))
            raise PlanEnded(
                PlanOutcome(
                    "limit",
                    f"the plan made more than {budgets.max_skill_calls} skill calls",
                    limit="skill_calls",
                )
            )
        record = IntentRecord(name[:64], short_args(args), "invalid")
        state.intents.append(record)
        try:
            skill, bound = self._bind(name, args)
            request = self._gate(skill, bound, state, record)
        except MotionAborted as exc:  # a stop while the host planned the call
            raise PlanEnded(PlanOutcome("stopped", str(exc)[:TEXT_LIMIT])) from exc
        except Lang2PolicyError as exc:  # bad arguments, unknown objects, unplannable targets
            record.error = str(exc)[:TEXT_LIMIT]
            return error_reply(call_id, "invalid", record.error)
        if request is None:
            return error_reply(call_id, "denied", record.error)
        return self._execute(call_id, skill, bound, request, state, record)

    def _check_cancelled(self) -> None:
        reason = self.cancelled()
        if reason:
            raise PlanEnded(PlanOutcome("stopped", str(reason)[:TEXT_LIMIT]))

    def _bind(self, name: str, args: dict) -> tuple[Skill, dict]:
        skill = self.skills.get(name)
        if skill is None:
            known = ", ".join(sorted(self.skills))
            raise InvalidIntentError(f"there is no skill named '{name[:64]}'; skills: {known}")
        return skill, skill.bind(args)

    def _request(self, skill: Skill, bound: dict) -> PolicyRequest:
        """The policy's view of ``skill(**bound)`` run from where the arm is now."""
        targets, sweep = self.backend.path(skill.name, bound)
        return PolicyRequest(
            skill=skill.name,
            category=skill.category,
            args=bound,
            targets=_points(targets),
            sweep=_points(sweep),
            objects=call_objects(skill, bound),
            scene_objects=tuple(self.backend.object_names()),
        )

    # ------------------------------------------------------------------ the gate
    def _gate(
        self, skill: Skill, bound: dict, state: PlanState, record: IntentRecord
    ) -> PolicyRequest | None:
        """Decide the call that will actually run: the program's arguments with the person's
        edits applied, its path from where the arm is now. New (pending) edits that the policy
        refuses are dropped, or capped for a speed, and the call runs as it would without them.
        Returns the allowed request, or None when the call is denied (``record`` says why)."""
        edits = self.edits
        request = self._request(skill, bound if edits is None else edits.apply(skill.name, bound))
        if edits is not None and edits.pending:
            request = self._settle_edits(edits, skill, bound, request, state)
        record.args = dict(request.args)
        decision = self._decide(request, state, record)
        return request if decision.allowed else None

    def _settle_edits(
        self,
        edits: ArgumentEdits,
        skill: Skill,
        bound: dict,
        edited: PolicyRequest,
        state: PlanState,
    ) -> PolicyRequest:
        """Accept, cap or refuse the pending edits by the policy's decision on ``edited``."""
        decision = state.policy.decide(edited)
        if decision.allowed:
            edits.accept_pending()
            return edited
        before = self._request(skill, edits.apply(skill.name, bound, pending=False))
        if not state.policy.decide(before).allowed:
            return edited  # denied with or without the edits: the call itself is refused
        capped = (
            speed_cap(state.policy, edited, before) if edits.pending_kinds() == {"speed"} else None
        )
        if capped is not None:
            edits.cap_pending_speed(
                capped.args["speed"],
                f"speed capped at {capped.args['speed']:g} m/s: {decision.reason}",
            )
            return capped
        edits.refuse_pending(decision.reason)
        return before

    def _decide(self, request: PolicyRequest, state: PlanState, record: IntentRecord) -> Decision:
        decision = state.policy.decide(request)
        record.rule, record.reason = decision.rule, decision.reason
        if decision.allowed:
            record.decision = "allowed"
            return decision
        if decision.fallback == "stop":
            record.decision = "denied"
            record.error = f"stopped by rule '{decision.rule}': {decision.reason}"
            raise PlanEnded(PlanOutcome("stopped", record.error))
        if decision.fallback == "ask" and self.ask_user is not None:
            if self.ask_user(request, decision):
                record.decision = "approved"
                return Decision(True, decision.rule, "approved by the user", decision.fallback)
            record.error = f"{request.skill} needs approval and the user declined: "
        elif decision.fallback == "ask":
            record.error = f"{request.skill} needs approval and no one can be asked: "
        else:
            record.error = f"{request.skill} denied by rule '{decision.rule}': "
        record.decision = "denied"
        record.error = (record.error + decision.reason)[:TEXT_LIMIT]
        return decision

    # ------------------------------------------------------------------ execution
    def _execute(self, call_id, skill, bound, request, state, record) -> dict:
        """Run the allowed call; a correction's interrupt re-decides it and runs it again from
        where the arm stopped (``MAX_RESTARTS`` at most)."""
        for _ in range(MAX_RESTARTS + 1):
            try:
                value = self._execute_once(skill, request, state, record)
            except CorrectionInterrupt:
                request = self._regate(skill, bound, state, record)
                if request is None:
                    self.backend.hold()
                    return error_reply(call_id, "denied", record.error)
                continue
            except Lang2PolicyError as exc:
                self.backend.hold()
                record.error = str(exc)[:TEXT_LIMIT]
                return error_reply(call_id, "skill", record.error)
            record.ok = True
            return {"type": "result", "id": call_id, "ok": True, "value": value}
        self.backend.hold()
        record.error = f"{skill.name}: corrected more than {MAX_RESTARTS} times; given up"
        return error_reply(call_id, "skill", record.error)

    def _regate(self, skill, bound, state, record) -> PolicyRequest | None:
        self.restarts += 1
        try:
            return self._gate(skill, bound, state, record)
        except MotionAborted as exc:
            raise PlanEnded(PlanOutcome("stopped", str(exc)[:TEXT_LIMIT])) from exc

    def _background_cpu(self) -> float:
        """CPU an in-process emulated arm spent so far (``SimSkillBackend.background_cpu``)."""
        return float(getattr(self.backend, "background_cpu", lambda: 0.0)())

    def _execute_once(self, skill: Skill, request: PolicyRequest, state, record) -> object:
        """One execution of an allowed call. Robot time is charged to the motion budget; the
        wall time of a motion is taken off the plan's wall clock (``motion_wall``), so what
        stays on it is the child's compute and the host's planning, including failed calls."""
        time_limit = None
        if skill.category == "motion":
            time_limit = state.policy.budgets.max_motion_seconds - state.motion_seconds
            if time_limit <= 0:
                raise PlanEnded(motion_budget_outcome(state))
        limits = {"time_limit": time_limit}
        if request.skill == VLA_SKILL:  # the policy acts on its own: in the gate's box
            limits["workspace"] = call_workspace(state.policy, request)
        started, wall_started = self.backend.clock(), time.monotonic()
        cpu_started = time.process_time() - self._background_cpu()  # the plan's own CPU
        moved = False
        try:
            value = self.backend.execute(request.skill, request.args, **limits)
            moved = True
            return value
        except CorrectionInterrupt:
            moved = True
            raise
        except MotionTimeExceeded as exc:
            moved = True
            record.error = str(exc)[:TEXT_LIMIT]
            raise PlanEnded(motion_budget_outcome(state)) from exc
        except MotionAborted as exc:
            raise PlanEnded(PlanOutcome("stopped", str(exc)[:TEXT_LIMIT])) from exc
        finally:
            robot_seconds = self.backend.clock() - started
            record.motion_seconds += robot_seconds
            state.motion_seconds += robot_seconds
            if moved and skill.category == "motion":
                state.motion_wall += time.monotonic() - wall_started
                state.motion_cpu += time.process_time() - self._background_cpu() - cpu_started


def _points(points) -> tuple[tuple[float, float, float], ...]:
    return tuple((float(x), float(y), float(z)) for x, y, z in points)
