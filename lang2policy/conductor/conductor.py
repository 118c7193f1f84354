"""The conductor: instructions, corrections and ``stop`` in; plans run; typed status out.

One object owns what happens between a person's words and the arm, with no ROS in it:

* **routing**: each instruction goes to a plan kind (``code``: Code as Policies through the
  sandbox's privilege gate; ``reward``: Language to Rewards on an MPC) as
  ``planning.route.choose_planner`` decides under the ``route`` setting. With a
  ``SkillExecutor`` (a VLA in the graph: ``skill_route.SkillRoute``) an instruction the VLA's
  task vocabulary covers is a ``skill`` plan under route ``auto``, through the same privilege
  gate; route ``skill`` sends every instruction there and refuses what the VLA cannot do
  (listing what it can). Policy code's ``vla_skill(...)`` calls run through it too;
* **one plan at a time**: ``instruct`` runs a plan in a worker thread and answers ``busy`` while
  one runs; ``handle`` runs one in the caller's thread (``lang2policy run``);
* **stop**: aborts the running motion at its next control step, skips the repair, cancels a
  running reward task (``stop``; ``safety_state`` turns the safety node's report into one);
* **corrections** (``correct``): routed, applied or refused by the gate, remembered and
  recalled (``lang2policy.conductor.corrections``);
* **status**: every step is a ``StatusEvent`` handed to the host's ``Outlet``, one per event,
  under one contract for every route: ``received`` -> ``planning`` -> ``plan`` -> ``running``
  -> ``done`` | ``failed`` | ``stopped``, where ``done`` means the plan's goal was verified
  (code: the goal checked in the scene; reward: the controller's ``success``, which the reward
  route waits for, ``spec_handoff``; skill: the skill's success check) and the final detail
  says the ``verdict``, the ``goal`` and, when it was missed, why and by how much;
* **keep-out zones**: each plan's (those of the privilege policy that gates it) go to the
  safety node through the host's ``ZonePort`` before the plan moves anything, and are
  withdrawn when it ends (``zone_announcer``), so a VLA skill or an MPC is held to them too.

The planner node is a thin adapter around it, and ``lang2policy run`` drives the same object,
so the graph and the command line cannot drift.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from lang2policy.conductor.corrections import CorrectionDesk
from lang2policy.conductor.ports import (
    CodeExecutor,
    Outlet,
    Positions,
    RewardRun,
    SkillExecutor,
    ZonePort,
)
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.conductor.skill_route import SkillScene
from lang2policy.conductor.zone_announcer import ZoneAnnouncer
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph.topics import PLANNER_NODE, StatusEvent
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.planning.loop import InstructionResult, PlanLoop
from lang2policy.planning.progress import waiting
from lang2policy.planning.route import check_instruction, choose_planner
from lang2policy.robots.streamed_robot import MotionAborted
from lang2policy.session.readout import scene_readout

ROUTES = ("code", "reward", "skill")  # plan kinds


@dataclass
class PlanResult:
    """How one instruction ended: its final status, and what each route produced."""

    instruction: str
    route: str
    state: str  # "done" | "failed" | "stopped"
    detail: Any
    code: InstructionResult | None = None  # code route
    reward_plan: Any = None  # reward route: the RewardPlan
    reward_run: RewardRun | None = None

    @property
    def ok(self) -> bool:
        return self.state == "done"


class Conductor:
    """Routes instructions, runs one plan at a time, takes corrections and stop."""

    def __init__(
        self,
        outlet: Outlet,
        code: CodeExecutor,
        planning: PlanLoop,
        reward: RewardRoute,
        router: CorrectionRouter,
        route_setting: str = "auto",
        skills: SkillExecutor | None = None,
        zones: ZonePort | None = None,
    ) -> None:
        _check_route_setting(route_setting, skills)
        self.outlet, self.code, self.planning, self.reward = outlet, code, planning, reward
        self.skills = skills
        self.zones = ZoneAnnouncer(zones)
        self.route_setting = route_setting
        self.instruction, self.route = "", ""  # what runs (or ran last)
        self.positions: Positions = {}  # live objects: name -> [x, y, z]
        self.headings: dict[str, float] = {}  # name -> yaw (degrees)
        self.safety = "unknown"
        self._busy = threading.Lock()
        self._stopped = threading.Event()  # set by a stop during the running instruction
        self._stop_reason = ""
        self._worker: threading.Thread | None = None
        self.planning.cancelled = self._stopped.is_set
        self.planning.on_event = lambda state, detail: self.say(state, self.instruction, detail)
        self.planning.runner.cancelled = self.stop_pending
        self.corrections = CorrectionDesk(self, router)
        if skills is not None:  # vla_skill(...) in policy code runs on the same VLA
            code.backend.vla = self._vla_call
            skills.stop_pending = self.stop_pending  # a stop while a skill is being started

    # ------------------------------------------------------------------ status
    def say(self, state: str, instruction: str, detail: Any = "") -> None:
        self.outlet.status(StatusEvent(PLANNER_NODE, state, instruction, detail))

    @property
    def busy(self) -> bool:
        return self._busy.locked()

    def running(self, route: str) -> bool:
        """True while an instruction of ``route`` runs."""
        return self.busy and self.route == route

    # ------------------------------------------------------------------ the scene
    def update_objects(self, positions: Positions, headings: dict[str, float]) -> None:
        """The objects heard (perception, or the simulator): what reward specs and
        corrections name."""
        self.positions, self.headings = dict(positions), dict(headings)

    def scene_names(self) -> list[str]:
        return list(self.positions) if self.positions else self.code.object_names()

    def skill_scene(self) -> SkillScene:
        """The objects a skill's gate sees: their positions, and every name in the scene."""
        return SkillScene(dict(self.positions), self.scene_names())

    # ------------------------------------------------------------------ instructions
    def instruct(self, text: object) -> bool:
        """Start planning ``text`` in a worker thread; False when it was refused (status
        ``rejected`` or ``busy`` says why)."""
        accepted = self._accept(text)
        if accepted is None:
            return False
        self._worker = threading.Thread(target=self._run, args=accepted, daemon=True)
        self._worker.start()
        return True

    def handle(self, text: object) -> PlanResult | None:
        """Plan and run ``text`` in this thread; None when it was refused."""
        accepted = self._accept(text)
        return None if accepted is None else self._run(*accepted)

    def _accept(self, text: object) -> tuple[str, str] | None:
        try:
            instruction = check_instruction(text)
            route = self._choose(instruction)
        except Lang2PolicyError as exc:
            self.say("rejected", str(text)[:200], str(exc))
            return None
        if not self._busy.acquire(blocking=False):
            self.say("busy", instruction, "another instruction is running")
            return None
        self.instruction, self.route = instruction, route
        self.say("received", instruction, {"route": route})
        return instruction, route

    def _choose(self, instruction: str) -> str:
        """The plan kind: a skill plan when the VLA can do it (route auto or skill), else as
        ``choose_planner`` says; under route skill what the VLA cannot do is refused."""
        if self.skills is not None and self.route_setting in ("auto", "skill"):
            refusal = self.skills.refusal(instruction)
            if not refusal:
                return "skill"
            if self.route_setting == "skill":
                raise Lang2PolicyError(f"route skill: {refusal}")
        return choose_planner(instruction, self.route_setting)

    def _run(self, instruction: str, route: str) -> PlanResult:
        runs = {"code": self._run_code, "reward": self._run_reward, "skill": self._run_skill}
        try:
            # Every route's motion is held to the zones: the skill route's and the code plan's
            # vla_skill calls are gated by this policy too (build_conductor), the MPC by none.
            self.zones.start(self.planning.runner.policy)
            result = runs[route](instruction)
        except Exception as exc:  # the host must survive any planning error
            result = PlanResult(instruction, route, "failed", f"{type(exc).__name__}: {exc}")
        finally:
            stopped = bool(self.stop_pending())  # read before the next plan may clear it
            try:  # a spec handed to the controller node runs on: its zones stay until the stop
                self.zones.withdraw(unless=lambda: self.reward.running is not None)
            finally:  # before the final status: whoever hears it may send more
                self._busy.release()
        if stopped and result.state == "failed":
            result.state = "stopped"  # a stop ended it, not a failure of the plan's own
        self.say(result.state, instruction, result.detail)
        return result

    def _run_code(self, instruction: str) -> PlanResult:
        self._stopped.clear()
        self._stop_reason = ""
        self.code.prepare()
        self.reward.cancel()  # the arm is the code plan's now
        self.corrections.start_code_edits(instruction)
        result = self.planning.handle(
            instruction, on_status=lambda line: self.say(_phase(line), instruction, line)
        )
        self.code.finish()
        detail = {
            "route": "code",
            **_verdict_detail(result),
            "attempts": result.attempts,
            "code": result.program.code if result.program else "",
            "said": list(result.outcome.said),
            "relations": scene_readout(self.code.session)["relations"],
            **_choice_detail(self.planning.choice, result),
        }
        return PlanResult(instruction, "code", "done" if result.ok else "failed", detail, result)

    def _run_reward(self, instruction: str) -> PlanResult:
        self._stopped.clear()
        self._stop_reason = ""
        self.say("planning", instruction, f"planning: {instruction}")
        status = lambda line: self.say("planning", instruction, line)  # noqa: E731
        with waiting(status, "the LLM to write the reward", None):
            plan = self.reward.plan(
                instruction, self.scene_names(), self.positions, self.headings
            )
        self.say("planning", instruction, _plan_line(plan))
        spec, remembered = self.corrections.recall_into_spec(instruction, plan.spec)
        about = {"route": "reward", "spec": spec.to_dict(), "description": plan.description}
        self.say("plan", instruction, about)
        run = self.reward.run(spec, lambda line: self.say("running", instruction, line))
        detail = {
            "route": "reward",
            "new_task": plan.new_task,
            "spec": spec.to_dict(),
            "notes": [*plan.notes, *remembered],
            "description": plan.description,
            "code": plan.code,
            **run.detail,
        }
        state = "done" if run.ok else "failed"
        return PlanResult(instruction, "reward", state, detail, reward_plan=plan, reward_run=run)

    def _run_skill(self, instruction: str) -> PlanResult:
        assert self.skills is not None  # route "skill" only with a skill executor (_choose)
        self._stopped.clear()
        self._stop_reason = ""
        self.reward.cancel()  # the arm is the skill's now
        motions = self.corrections.recall_motions(instruction)
        run = self.skills.run(
            instruction,
            self.skill_scene(),
            lambda line: self.say("running", instruction, line),
            motions,
        )
        detail = {"route": "skill", **run.detail, **_skill_verdict(run)}
        return PlanResult(instruction, "skill", "done" if run.ok else "failed", detail)

    def _vla_call(self, args: dict) -> bool:
        """``vla_skill(**args)`` of a running code plan on the graph's VLA: True when the
        skill's success check held; a skill the gate or the VLA refuses raises."""
        instruction = self.instruction
        assert self.skills is not None  # set as the backend's vla only with skills (__init__)
        run = self.skills.run_call(
            args, self.skill_scene(), lambda line: self.say("running", instruction, line)
        )
        outcome, message = run.detail.get("outcome"), run.detail.get("message", "")
        self.say("running", instruction, f"vla_skill({args['instruction']!r}): {outcome}")
        if self.stop_pending():  # the plan ends here, as after any stopped motion
            raise MotionAborted(self.stop_pending())
        if outcome in ("denied", "rejected", "no_vla"):
            raise Lang2PolicyError(f"vla_skill: {message}")
        return run.ok

    # ------------------------------------------------------------------ stop
    def stop_pending(self) -> str:
        """The reason of a stop during the running instruction ("" while none)."""
        return self._stop_reason if self._stopped.is_set() else ""

    def safety_state(self, state: str) -> None:
        """The safety node's state; entering ``stopped`` stops what runs here."""
        if state == "stopped" and self.safety != "stopped":
            self.stop("stopped by a stop request (/lang2policy/stop)")
        self.safety = state

    def stop(self, reason: str) -> None:
        """Abort the running motion (no repair) and cancel a running reward task."""
        if self._stopped.is_set() and self.reward.running is None:
            return  # already handled (the stop request, then the safety node's report)
        self.end_motion(reason)
        self.reward.cancel()
        self.zones.withdraw(unless=lambda: self.busy)  # a running plan withdraws them at its end
        if self.skills is not None:  # a skill plan, or a code plan's vla_skill call
            self.skills.cancel()
        self.say("stopped", "", reason)

    def request_stop(self, reason: str) -> None:
        """Ask the safety layer to stop and hold the arm, and stop what runs here."""
        self.outlet.request_stop()
        self.stop(reason)

    def end_motion(self, reason: str) -> None:
        """Mark the running plan stopped (no repair; its next call ends it) and abort its
        motion."""
        self._stop_reason = reason
        self._stopped.set()
        if self.busy:
            self.code.abort(reason)

    def wait_idle(self, timeout: float | None = None) -> None:
        if self._worker is not None:
            self._worker.join(timeout)

    def close(self) -> None:
        self.reward.executor.close()
        spare = getattr(self.planning, "spare_child", None)
        if spare is not None:  # the child started ahead dies with its planner
            spare.close()


def _verdict_detail(result: InstructionResult) -> dict[str, Any]:
    """The honest outcome: the verdict by the plan's goal, and why when it is not success."""
    outcome, verdict = result.outcome, result.verdict
    if verdict is None:  # nothing ran (the LLM failed)
        return {"verdict": "failed", "goal": "", "outcome": outcome.kind,
                "message": outcome.message}
    message = outcome.message if verdict.ok or not verdict.reason else verdict.reason
    return {"verdict": verdict.verdict, "goal": verdict.goal.describe(),
            "outcome": outcome.kind, "message": message}


def _skill_verdict(run: RewardRun) -> dict[str, Any]:
    """A skill plan's verdict: the skill's own success check (the VLA node's ``success``), a
    skill that ran and missed it, or one that never ran (denied, rejected, no VLA)."""
    outcome = run.detail.get("outcome")
    if run.ok:
        verdict = "goal_reached"
    elif outcome in ("timeout", "failed"):
        verdict = "goal_not_reached"
    else:
        verdict = "failed"
    skill = run.detail.get("skill", "")
    return {"verdict": verdict, "goal": f"the success check of '{skill}'" if skill else ""}


def _phase(line: str) -> str:
    """A code plan's progress line as a status state: ``planning`` while the LLM writes (or
    repairs) the program, ``running`` once it is checked and run."""
    line = re.sub(r"^step \d+ of \d+: ", "", line)  # a step of a compound instruction
    return "planning" if line.startswith(("planning", "repairing")) else "running"


def _choice_detail(choice, result: InstructionResult) -> dict[str, Any]:
    """The chosen candidate's score and the others, when the plan loop scored candidates and
    the program that ran is the chosen one."""
    if choice is None or result.program is not choice.program:
        return {"score": None, "alternatives": []}
    return {"score": choice.score.total, "alternatives": choice.alternatives}


def _check_route_setting(setting: str, skills: SkillExecutor | None) -> None:
    """A clear error for an unknown setting, or for ``skill`` without a skill executor."""
    if setting == "skill":
        if skills is None:
            raise ConfigError("route 'skill' needs a skill policy (a VLA); none is configured")
        return
    choose_planner("", setting)


def _plan_line(plan) -> str:
    what = "new task" if plan.new_task else "edits the running task"
    return f"{what}, planned in {plan.plan_ms / 1000:.1f} s"
