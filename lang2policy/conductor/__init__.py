"""The conductor: the stack's orchestration, with no ROS in it.

    conductor = build_conductor(settings, outlet, SimCodeExecutor(session), InProcessMPC(session))
    conductor.handle("put the red block in the blue bowl")   # or .instruct() in a thread
    conductor.correct("a bit to the left"); conductor.stop("stop said")

The planner node (``lang2policy.ros.planner_node``) and ``lang2policy run`` are its hosts.
"""

from lang2policy.conductor.build import ConductorSettings, build_conductor, build_plan_loop
from lang2policy.conductor.conductor import ROUTES, Conductor, PlanResult
from lang2policy.conductor.executors import (
    InProcessMPC,
    LiveCodeExecutor,
    SimCodeExecutor,
)
from lang2policy.conductor.ports import (
    CodeExecutor,
    Outlet,
    RewardExecutor,
    RewardRun,
    SkillExecutor,
)
from lang2policy.conductor.spec_handoff import SpecHandOff

__all__ = [
    "ROUTES",
    "CodeExecutor",
    "Conductor",
    "ConductorSettings",
    "InProcessMPC",
    "LiveCodeExecutor",
    "Outlet",
    "PlanResult",
    "RewardExecutor",
    "RewardRun",
    "SimCodeExecutor",
    "SkillExecutor",
    "SpecHandOff",
    "build_conductor",
    "build_plan_loop",
]
