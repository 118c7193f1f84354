"""The Code-as-Policies planner: instructions to policy programs that run in the sandbox.

    planner = CodeAsPoliciesPlanner(make_client("local"))
    session = PlanLoop(planner, SandboxRunner(backend, policy), backend)
    result = session.handle("put the red block in the blue bowl")
    result.outcome.ok, result.program.code

Prompts live in ``config/prompts/cap/`` (``PromptSet.load``). No ROS here.
"""

from lang2policy.planning.cap import CodeAsPoliciesPlanner, GeneratedProgram
from lang2policy.planning.codegen import (
    SANDBOX_NAMES,
    FunctionGenerator,
    clean_code,
    undefined_calls,
)
from lang2policy.planning.loop import InstructionResult, PlanLoop
from lang2policy.planning.prompts import PromptSet, default_prompt_dir

__all__ = [
    "SANDBOX_NAMES",
    "CodeAsPoliciesPlanner",
    "FunctionGenerator",
    "GeneratedProgram",
    "InstructionResult",
    "PlanLoop",
    "PromptSet",
    "clean_code",
    "default_prompt_dir",
    "undefined_calls",
]
