"""Warming the LLM server at start-up, and several prompt prefixes kept at once (issue 16).

The slow test runs the real local server (Gemma 3 270M on llama.cpp) and reads its log: after
warming two different prompts, a request that extends the *first* one is served from the
prefix cache (the live context then holds the second prompt, so without the cache the whole
first prompt would be evaluated again).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lang2policy.errors import LLMResponseError
from lang2policy.l2r.prompts import RewardPrompts
from lang2policy.llm import LLMClient, make_client
from lang2policy.llm.factory import local_config
from lang2policy.llm.warm import live_completion_client, warm_up
from lang2policy.planning import CodeAsPoliciesPlanner, PromptSet
from lang2policy.planning.grounding import GroundingSettings

FIXTURE = Path(__file__).parents[1] / "fixtures" / "llm" / "cap_session.jsonl"


def test_a_replay_client_has_nothing_to_warm():
    llm = make_client(f"replay:{FIXTURE}")
    assert live_completion_client(llm) is None
    warmth = warm_up(llm, ["a prompt"])
    assert warmth.prompts == 0 and "not warmed" in warmth.describe()


@pytest.mark.parametrize("mode", ["completion", "chat"])
def test_an_unreachable_server_is_reported_by_its_url_not_raised(mode):
    url = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    config = local_config(url).replace(timeout_s=2.0, max_retries=0, mode=mode)
    warmth = warm_up(LLMClient(config), ["one prompt", "another"])
    assert warmth.prompts == 0 and warmth.reachable is False
    assert f"unreachable: cannot reach the LLM server at {url}" in warmth.describe()


def test_the_planners_fixed_prompts_are_the_starts_of_what_they_send():
    """What is warmed must be a prefix of the real prompts, or warming buys nothing."""
    prompts = PromptSet.load()
    grounded = CodeAsPoliciesPlanner(None, prompts, grounding=GroundingSettings(grammar=False))
    main, function, *parsers = grounded.fixed_prompts()
    sent = grounded.prompt_for("put the red block in the blue bowl", ["red block"], [])
    assert sent.startswith(main) and len(main) > 1000
    assert function == prompts.function and parsers == list(prompts.parsers.values())
    baseline = CodeAsPoliciesPlanner(None, prompts, grounding=GroundingSettings.off())
    assert baseline.fixed_prompts()[0] == prompts.main
    reward = RewardPrompts.load()
    descriptor, coder = reward.fixed_prompts()
    assert reward.descriptor_prompt("lift the red block").startswith(descriptor)
    assert coder == reward.coder_prompt()


@pytest.mark.llm
@pytest.mark.slow
def test_two_warmed_prompts_are_both_kept_by_the_local_server():
    from lang2policy.llm.local_server import get_local_server

    server = get_local_server()
    llm = make_client("local")
    cap = PromptSet.load().main
    reward = RewardPrompts.load().coder_prompt()
    warmth = warm_up(llm, [cap, reward])
    assert warmth.prompts == 2 and not warmth.errors, warmth.describe()
    assert warmth.reachable and f"the LLM server at {server.base_url} answers" in warmth.describe()
    before = server.log_tail(100000).count("cache hit")
    with pytest.raises(LLMResponseError):  # cut off at one token, as asked
        llm.complete(cap + "objects = ['red block']\n# put it down.\n", max_tokens=1)
    log = server.log_tail(100000)
    assert log.count("cache hit") == before + 1, log[-2000:]


def test_preparing_the_plan_loop_loads_the_retriever_and_rehearses_on_the_copy():
    """Start-up pays the first instruction's one-time costs (issue 16): after ``prepare`` the
    example retriever is built with its embeddings and the dry run's copy exists, with a
    rehearsed pick-and-place that reached its end there; the real scene is not touched."""
    from lang2policy.conductor.build import build_plan_loop
    from lang2policy.planning.loop import TYPICAL_INSTRUCTION
    from lang2policy.session.sim import SimSession
    from lang2policy.skills.backend import SimSkillBackend

    session = SimSession("so101")
    session.reset(1)
    before = session.world.data.qpos.copy()
    loop = build_plan_loop(SimSkillBackend(session), f"replay:{FIXTURE}")
    said = loop.prepare()
    assert "example retriever loaded" in said and "rehearsed (ok:" in said, said
    assert loop.planner._retriever is not None
    assert loop._dry_run._copy is not None and loop._dry_run._copy.world.time > 1.0
    assert (session.world.data.qpos == before).all()
    typical = loop.planner.main_prompt(TYPICAL_INSTRUCTION)  # what warm_conductor warms
    assert loop.planner.prompt_for(TYPICAL_INSTRUCTION, ["red block"], []).startswith(typical)
