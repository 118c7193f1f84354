"""Test doubles around the conductor (no ROS): the host's outlet recorded, scripted LLM
planners, a stand-in VLA node on the skill topic, and conductors built from them on a simulated
arm. Shared by the conductor, skill-route, reward-outcome, plan-zone and VLA-skill tests."""

from __future__ import annotations

import json
import threading
import time

from lang2policy.bench.live_arm import OBJECTS
from lang2policy.conductor import Conductor, SimCodeExecutor, SpecHandOff
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.conductor.skill_route import SkillRoute
from lang2policy.graph.topics import StatusEvent
from lang2policy.planning.cap import GeneratedProgram
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.planning.loop import PlanLoop
from lang2policy.rewards.spec import validate_spec
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxLimits, SandboxRunner
from lang2policy.session.sim import SimSession
from lang2policy.skills.catalog import SKILLS

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)


class RecordingOutlet:
    """The host's side, recorded: status events, specs handed on, stop requests. With
    ``handoff`` set, a stand-in for the controller node answers each spec on its status lines:
    ``accepted``, then ``answer`` (``success`` unless a test says otherwise; None: silent)."""

    def __init__(self) -> None:
        self.events: list[StatusEvent] = []
        self.specs: list = []
        self.stop_requests = 0
        self.handoff: SpecHandOff | None = None
        self.answer: str | None = "success"

    def status(self, event: StatusEvent) -> None:
        self.events.append(event)

    def send_spec(self, spec) -> None:
        self.specs.append(spec)
        if spec is None or self.handoff is None or self.answer is None:
            return
        for state in ("accepted", self.answer):
            line = {"node": "controller", "state": state, "task": spec.task, "detail": ""}
            self.handoff.on_status(line | {"stats": {"time": 1.0, "measures": {}}})

    def request_stop(self) -> bool:
        self.stop_requests += 1
        return True

    def states(self, instruction: str | None = None) -> list[str]:
        return [e.state for e in self.events if instruction is None or e.instruction == instruction]

    def last(self, state: str) -> StatusEvent:
        return next(e for e in reversed(self.events) if e.state == state)

    def wait(self, state: str, timeout: float = 60.0) -> StatusEvent:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.events if e.state == state]
            if found:
                return found[-1]
            time.sleep(0.01)
        raise AssertionError(f"no {state!r} status within {timeout} s: {self.states()}")


class ScriptedPlanner:
    """Stands in for the Code-as-Policies LLM planner: the program each instruction gets."""

    def __init__(self, programs: dict[str, str]) -> None:
        self.programs = programs
        self.repairs = 0

    def generate(self, instruction, objects, history) -> GeneratedProgram:
        code = self.programs[instruction]
        return GeneratedProgram(code=code, main=code)

    def repair(self, instruction, objects, history, program, feedback) -> GeneratedProgram:
        self.repairs += 1
        return program


class ScriptedRewardPlanner:
    """Stands in for the reward LLM planner: lifts the red block, 5 cm higher each follow-up."""

    def __init__(self, objects) -> None:
        self.objects = list(objects)

    def plan(self, instruction, current=None, *, positions=None, headings=None):
        from lang2policy.l2r.planner import RewardPlan

        height = 0.1 if current is None else current.term("object_height").params["height"] + 0.05
        term = {"term": "object_height", "params": {"object": "red block", "height": height}}
        spec = validate_spec({"task": instruction, "terms": [term]}, self.objects).spec
        return RewardPlan(spec, current is None, (), "description", "set_height(...)")


def make(code, programs: dict[str, str], *, policy=None, memory=None, route="auto"):
    outlet = RecordingOutlet()
    policy = policy or default_policy(code.backend.description, known_skills=SKILLS)
    runner = SandboxRunner(code.backend, policy, limits=LIMITS)
    planning = PlanLoop(ScriptedPlanner(programs), runner, code.backend)
    outlet.handoff = SpecHandOff(outlet)
    reward = RewardRoute(outlet.handoff, ScriptedRewardPlanner)
    conductor = Conductor(outlet, code, planning, reward, CorrectionRouter(memory), route)
    return conductor, outlet


def sim_code() -> SimCodeExecutor:
    code = SimCodeExecutor(SimSession("so101"))
    code.reset(1, list(OBJECTS))
    return code


class FakeVLA:
    """The VLA node as the skill topic sees it: records each message and answers a start with
    ``running`` then ``final`` (None: no end), a motion with ``applied``, a cancel with
    ``cancelled``; every line carries the plan id as the node's do (detail and top level)."""

    def __init__(self, final: str | None = "success", listeners: int = 1) -> None:
        self.final, self.listeners = final, listeners
        self.sent: list[str] = []
        self.route: SkillRoute | None = None
        self.plan_id = ""
        self.skill = ""

    def send_skill(self, text: str) -> None:
        self.sent.append(text)
        if not text:
            if self.plan_id:
                self.say("cancelled", "cancelled (an empty skill)")
            return
        message = json.loads(text)
        if "skill" in message:
            self.plan_id, self.skill = message["plan_id"], message["skill"]
            self.say("running", {"reason": "pick_place, budget 30 s"})
            if self.final is not None:
                self.say(self.final, "the success check held for 1 s")
        elif "motion" in message:  # answered at the node's next control cycle
            answer = {"text": message["motion"], "action": "applied", "offset": [0, 0.02, 0]}
            threading.Timer(0.05, self.say, ("motion", answer)).start()

    def say(self, state: str, detail, plan_id: str | None = None) -> None:
        plan_id = self.plan_id if plan_id is None else plan_id
        detail = dict(detail) if isinstance(detail, dict) else {"reason": detail}
        line = {"node": "vla", "state": state, "instruction": self.skill,
                "detail": {**detail, "plan_id": plan_id}, "plan_id": plan_id}  # fmt: skip
        if state in ("success", "timeout", "failed", "stopped", "cancelled"):
            line["stats"] = {"steps": 12}
            if plan_id == self.plan_id:
                self.plan_id = ""
        self.route.on_status(line)

    def skill_listeners(self) -> int:
        return self.listeners

    def started(self) -> dict:
        return json.loads(next(t for t in self.sent if t.startswith('{"skill"')))


def make_skill(vla: FakeVLA, route="auto", memory=None, settings=None, programs=None):
    """A conductor with a skill route on ``vla``; the scene's objects and positions heard;
    ``programs``: the code plans' programs by instruction."""
    outlet, code = RecordingOutlet(), sim_code()
    policy = default_policy(code.backend.description, known_skills=SKILLS)
    runner = SandboxRunner(code.backend, policy, limits=LIMITS)
    skills = SkillRoute(vla, policy, settings)
    vla.route = skills
    conductor = Conductor(
        outlet,
        code,
        PlanLoop(ScriptedPlanner(programs or {}), runner, code.backend),
        RewardRoute(SpecHandOff(outlet), ScriptedRewardPlanner),
        CorrectionRouter(memory),
        route,
        skills,
    )
    world = code.session.world
    positions = {n: tuple(world.object_pose(n).position) for n in world.object_names()}
    conductor.update_objects(positions, {n: 0.0 for n in positions})
    return conductor, outlet


def poll_until(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.01)
