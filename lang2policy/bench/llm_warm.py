"""``lang2policy bench llm-warm``: warming the planners' fixed prompts on a fresh local LLM
server, with no processed prefixes on disk (a first start) and again on a restarted server
that finds the first one's on disk, in one run (issue 16).

Each round starts the local server (Gemma 3 270M on llama.cpp) on the same fresh prefix
directory, sends the code planner's and reward planner's fixed prompts for one token each
(``llm.warm.warm_up``, what the planner node does before it says ``ready``), then one
instruction-sized extension of the code prompt, and stops the server.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time

from lang2policy.errors import LLMResponseError

INSTRUCTION_TAIL = "\n# put the red block in the blue bowl.\n"


def fixed_prompts() -> list[str]:
    """The prompts the planner node warms: the code planner's, then the reward planner's."""
    from lang2policy.l2r.prompts import RewardPrompts
    from lang2policy.planning import CodeAsPoliciesPlanner
    from lang2policy.planning.grounding import GroundingSettings

    code = CodeAsPoliciesPlanner(None, grounding=GroundingSettings()).fixed_prompts()
    return [*code, *RewardPrompts.load().fixed_prompts()]


def warm_round(prefix_root: str, prompts: list[str]) -> dict:
    """Start a server on ``prefix_root``, warm ``prompts``, time one extension, stop it."""
    from lang2policy.llm import LLMClient
    from lang2policy.llm.factory import local_config
    from lang2policy.llm.local_server import LocalModelServer
    from lang2policy.llm.warm import warm_up

    started = time.monotonic()
    with LocalModelServer(prefix_root=prefix_root) as server:
        up = time.monotonic() - started
        client = LLMClient(local_config(server.base_url))
        warmth = warm_up(client, prompts)
        began = time.monotonic()
        with contextlib.suppress(LLMResponseError):  # cut off at one token, as asked
            client.complete(prompts[0] + INSTRUCTION_TAIL, max_tokens=1, temperature=0.0)
        after = time.monotonic() - began
        time.sleep(2.0)  # the prefixes' background writes
    return {
        "server_start_s": round(up, 2),
        "warm_s": round(warmth.seconds, 2),
        "prompts": warmth.prompts,
        "errors": warmth.errors,
        "first_instruction_prompt_s": round(after, 2),
    }


def run_args(args: argparse.Namespace) -> dict:
    prompts = fixed_prompts()
    with tempfile.TemporaryDirectory(prefix="lang2policy-bench-prefixes-") as root:
        rounds = {"first start": warm_round(root, prompts)}
        for number in range(1, args.restarts + 1):
            rounds[f"restart {number}"] = warm_round(root, prompts)
    return {"benchmark": "llm-warm", "prompts": len(prompts), "rounds": rounds}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--restarts", type=int, default=2, help="restarts after the first start")


def format_text(report: dict) -> str:
    lines = [f"lang2policy bench llm-warm: {report['prompts']} fixed prompts"]
    for name, r in report["rounds"].items():
        lines.append(
            f"  {name:<12} server up {r['server_start_s']:.1f} s, warmed {r['prompts']} in "
            f"{r['warm_s']:.1f} s, then an instruction's prompt "
            f"{r['first_instruction_prompt_s']:.2f} s"
            + (f"; errors: {r['errors']}" if r["errors"] else "")
        )
    return "\n".join(lines)
