"""Putting a conductor together: the LLM clients, the sandbox gate, the executors, memory.

``build_conductor`` is shared by the planner node and ``lang2policy run``: they differ only in
the outlet (topics or a terminal), the code executor (the arm in the graph or the simulated
one here) and the reward executor (the controller node or an in-process MPC).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from lang2policy.conductor.conductor import Conductor
from lang2policy.conductor.ports import CodeExecutor, Outlet, RewardExecutor, ZonePort
from lang2policy.conductor.reward_route import RewardRoute
from lang2policy.conductor.skill_route import SkillPort, SkillRoute, SkillSettings
from lang2policy.llm.warm import Progress, Warmth, warm_up
from lang2policy.planning.correcting import CorrectionRouter
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.loop import TYPICAL_INSTRUCTION, PlanLoop
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.sandbox.spare_child import SpareChild
from lang2policy.skills.backend import SimSkillBackend
from lang2policy.skills.catalog import SKILLS

log = logging.getLogger("lang2policy.planner")


@dataclass(frozen=True)
class ConductorSettings:
    """What a person chooses: the LLMs, the route, the corrections memory."""

    llm: str = "local"  # local | openai | replay:FILE | record:FILE
    reward_llm: str = ""  # the reward planner's LLM; "" = ``llm``
    route: str = "auto"  # code | reward | auto | skill (needs a VLA)
    memory: Path | None = None  # corrections memory (JSONL); None = off
    memory_threshold: float = 0.8  # cosine similarity to recall
    memory_scope: str = "objects"  # objects | run (corrections.memory.RECALL_SCOPES)
    grounding: GroundingSettings = field(default_factory=GroundingSettings)  # code plans
    skill: SkillSettings = field(default_factory=SkillSettings)  # skill plans (with a VLA)
    # A sandbox child started ahead for each program (the graph's planner: first motion sooner)
    spare_child: bool = False


def build_plan_loop(
    backend: SimSkillBackend,
    llm: str,
    grounding: GroundingSettings | None = None,
    vla: bool = False,
    spare_child: bool = False,
) -> PlanLoop:
    """Code-as-Policies planning over ``backend``: the LLM client, the default privilege
    policy of the backend's robot, the sandbox runner, grounded as ``grounding`` says; with
    ``vla`` the prompt and grammars offer ``vla_skill`` (a VLA runs its calls)."""
    from lang2policy.llm import make_client
    from lang2policy.planning import CodeAsPoliciesPlanner

    grounding = grounding or GroundingSettings()
    policy = default_policy(backend.description, known_skills=SKILLS)
    planner = CodeAsPoliciesPlanner(make_client(llm), grounding=grounding, vla=vla)
    spare = SpareChild() if spare_child else None
    return PlanLoop(
        planner, SandboxRunner(backend, policy), backend, grounding=grounding, spare_child=spare
    )


def build_conductor(
    settings: ConductorSettings,
    outlet: Outlet,
    code: CodeExecutor,
    reward: RewardExecutor,
    skill_port: SkillPort | None = None,
    zone_port: ZonePort | None = None,
) -> Conductor:
    """A conductor over ``code`` and ``reward``; status and specs go to ``outlet``. With a
    ``skill_port`` (a VLA node in the graph) skill plans run there (``SkillRoute``), decided by
    the code plans' privilege policy; with a ``zone_port`` (a safety node in the graph) each
    plan's keep-out zones go there."""
    vla = skill_port is not None or code.backend.vla is not None
    planning = build_plan_loop(
        code.backend, settings.llm, settings.grounding, vla, settings.spare_child
    )
    skills = None
    if skill_port is not None:
        skills = SkillRoute(skill_port, planning.runner.policy, settings.skill)

    def reward_planner(objects):
        from lang2policy.l2r.planner import RewardPlanner
        from lang2policy.llm import make_client

        setting = settings.reward_llm or settings.llm
        llm = planning.planner.llm if setting == settings.llm else make_client(setting)
        return RewardPlanner(llm, objects)

    return Conductor(
        outlet,
        code,
        planning,
        RewardRoute(reward, reward_planner),
        correction_router(settings),
        settings.route,
        skills,
        zone_port,
    )


def warm_conductor(
    conductor: Conductor, settings: ConductorSettings, on_progress: Progress | None = None
) -> Warmth:
    """Process the fixed parts of the prompts the conductor's routes will send (issue 16): the
    code planner's, and the reward planner's when it shares the LLM. Blocks for as long as
    the server takes (seconds on two cores); hosts run it in a thread and say when it is done."""
    from lang2policy.l2r.prompts import RewardPrompts

    planning = conductor.planning
    code, typical = [], []
    if settings.route not in ("reward", "skill"):  # a skill plan asks no LLM
        try:
            log.info("planner prepared: %s", planning.prepare())
        except Exception as exc:  # a warm-up never keeps the node from being ready
            log.warning("preparing the planner failed (the first instruction pays): %r", exc)
        code = planning.planner.fixed_prompts()
        # The examples a typical first instruction gets (without retrieval: the fixed main
        # prompt again, which warm_up sends once).
        typical = [planning.planner.main_prompt(TYPICAL_INSTRUCTION)]
    reward = []
    if settings.route in ("auto", "reward") and settings.reward_llm in ("", settings.llm):
        reward = RewardPrompts.load().fixed_prompts()
    # What a first instruction meets first: the main code prompt (with a typical instruction's
    # examples), the reward prompts, then the helper-writing and parsing prompts (which share
    # most of the code prompt).
    prompts = [*code[:1], *typical, *reward, *code[1:]]
    return warm_up(planning.planner.llm, prompts, on_progress)


def correction_router(settings: ConductorSettings) -> CorrectionRouter:
    """The router, with the memory on disk when one is set."""
    memory = None
    if settings.memory is not None:
        from lang2policy.corrections import CorrectionMemory

        memory = CorrectionMemory(settings.memory.expanduser(), scope=settings.memory_scope)
    return CorrectionRouter(memory, settings.memory_threshold)
