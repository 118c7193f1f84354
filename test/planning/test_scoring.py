"""SayCan-style scores of candidate programs (planning/scoring.py), the candidates themselves
(planning/candidates.py) and the LLM layer's token log-probabilities they rest on (issue 15)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lang2policy.errors import LLMRequestError
from lang2policy.llm.client import _parse
from lang2policy.llm.config import LLMConfig
from lang2policy.llm.exchange import LLMReply, LLMRequest, build_request
from lang2policy.planning import CodeAsPoliciesPlanner
from lang2policy.planning.candidates import candidates, choose, mean_logprob, plan
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.planning.scoring import (
    LIKELIHOOD,
    LIKELIHOOD_FLOOR,
    asks_for_motion,
    instruction_objects,
    moves,
    program_problems,
    score,
)

OBJECTS = ["red block", "green block", "yellow bowl", "blue bowl"]
INSTRUCTION = "put the red block in the yellow bowl"
RIGHT = "put_first_on_second('red block', 'yellow bowl')"
WRONG_OBJECT = "put_first_on_second('green block', 'yellow bowl')"
SAY_ONLY = "say('I see no blue bowl, only the green block')"


# ---------------------------------------------------------------- scores
def test_the_program_naming_the_instructions_objects_ranks_first_and_say_only_last():
    totals = {
        code: score(code, INSTRUCTION, OBJECTS).total for code in (RIGHT, WRONG_OBJECT, SAY_ONLY)
    }
    assert totals[RIGHT] == 0.0
    assert totals[RIGHT] > totals[WRONG_OBJECT] > totals[SAY_ONLY], totals
    # saying the objects is not acting on them
    said = "say('putting the red block in the yellow bowl')\n" + WRONG_OBJECT
    assert score(said, INSTRUCTION, OBJECTS).total == totals[WRONG_OBJECT]
    reasons = score(SAY_ONLY, INSTRUCTION, OBJECTS).reasons
    assert any("never moves" in r for r in reasons) and any("red block" in r for r in reasons)


def test_likelihood_breaks_ties_but_never_outweighs_grounding():
    likely_wrong = score(WRONG_OBJECT, INSTRUCTION, OBJECTS, mean_logprob=-0.01).total
    unlikely_right = score(RIGHT, INSTRUCTION, OBJECTS, mean_logprob=-50.0).total
    assert unlikely_right == pytest.approx(-LIKELIHOOD * LIKELIHOOD_FLOOR)  # clipped
    assert unlikely_right > likely_wrong
    # two grounded programs: the likelier one wins
    two_steps = "pick('red block')\nplace('yellow bowl')"
    assert (
        score(two_steps, INSTRUCTION, OBJECTS, mean_logprob=-0.2).total
        > score(RIGHT, INSTRUCTION, OBJECTS, mean_logprob=-0.9).total
    )


def test_grammar_problems_and_the_checks_callback_lower_the_score():
    assert program_problems(RIGHT, OBJECTS) == []
    assert program_problems("put_first_on_second('red block',", OBJECTS)  # does not parse
    assert program_problems("put_first_on_second('red block', 'pink bowl')", OBJECTS)
    assert program_problems("put_first_on_second('red block')", OBJECTS)  # arity
    assert program_problems("teleport('red block')", OBJECTS)  # no such function
    defined = "def drop(x):\n    put_first_on_second(x, 'yellow bowl')\ndrop('red block')"
    assert program_problems(defined, OBJECTS) == [] and moves(defined)

    def unreachable(code, objects):
        return ["yellow bowl is out of reach"] if "yellow bowl" in code else []

    checked = score(RIGHT, INSTRUCTION, OBJECTS, checks=[unreachable])
    assert checked.total == -1.0 and "yellow bowl is out of reach (-1.0)" in checked.reasons


def test_which_instructions_ask_for_motion():
    assert asks_for_motion(INSTRUCTION, OBJECTS)
    assert asks_for_motion("stack all the blocks", OBJECTS)
    assert not asks_for_motion("what objects can you see?", OBJECTS)
    assert not asks_for_motion("say hello", OBJECTS)
    # the object is not there: saying so is the right answer, not a say-only failure
    assert not asks_for_motion("put the red block in the pink bowl", OBJECTS)
    assert score(SAY_ONLY, "what objects can you see?", OBJECTS).total == 0.0
    assert instruction_objects("Put the Red Block in the yellow bowl.", OBJECTS) == [
        "red block",
        "yellow bowl",
    ]


# ---------------------------------------------------------------- candidates
class _ScriptedLLM:
    """Answers in turn from ``answers`` (text, logprob sum, tokens); keeps every call's options."""

    config = None

    def __init__(self, answers, reject_logprobs: bool = False) -> None:
        self.answers, self.calls, self.reject = list(answers), [], reject_logprobs

    def complete(self, prompt, **options) -> LLMReply:
        self.calls.append(options)
        if self.reject and options.get("logprobs") is not None:
            raise LLMRequestError("logprobs not supported")
        text, logprob, tokens = self.answers.pop(0)
        return LLMReply(
            text, "stop", None, tokens, 0.01, "fake", logprob=logprob, logprob_tokens=tokens
        )


def test_candidates_are_the_greedy_program_and_distinct_samples(prompts):
    llm = _ScriptedLLM(
        [(RIGHT, -2.0, 10), (RIGHT, -3.0, 10), (WRONG_OBJECT, -6.0, 10), (SAY_ONLY, -1.0, 10)]
    )
    planner = CodeAsPoliciesPlanner(llm, prompts, max_depth=0)
    programs = candidates(planner, INSTRUCTION, OBJECTS, [], 4)
    assert [p.main for p in programs] == [RIGHT, WRONG_OBJECT, SAY_ONLY]  # duplicate dropped
    assert mean_logprob(programs[0]) == pytest.approx(-0.2)
    assert llm.calls[0].get("temperature") is None and llm.calls[0]["logprobs"] == 1
    seeds = [c["seed"] for c in llm.calls[1:]]
    assert len(set(seeds)) == 3 and all(c["temperature"] > 0 for c in llm.calls[1:])
    choice = choose(programs, INSTRUCTION, OBJECTS)
    assert choice.program.main == RIGHT
    assert [a["code"].strip() for a in choice.alternatives] == [WRONG_OBJECT, SAY_ONLY]
    assert choice.alternatives[0]["score"] > choice.alternatives[1]["score"]
    assert choice.llm_calls == 4  # the duplicate's call was made and is counted


def test_a_better_grounded_sample_beats_the_greedy_program(prompts):
    llm = _ScriptedLLM([(SAY_ONLY, -0.5, 10), (RIGHT, -9.0, 10)])
    planner = CodeAsPoliciesPlanner(
        llm, prompts, max_depth=0, grounding=GroundingSettings(grammar=False, candidates=2)
    )
    choice = plan(planner, INSTRUCTION, OBJECTS, [])
    assert choice.program.main == RIGHT and choice.alternatives[0]["code"].strip() == SAY_ONLY


def test_candidates_go_on_without_logprobs_where_the_endpoint_rejects_them(prompts):
    llm = _ScriptedLLM([(RIGHT, None, None), (WRONG_OBJECT, None, None)], reject_logprobs=True)
    programs = candidates(
        CodeAsPoliciesPlanner(llm, prompts, max_depth=0), INSTRUCTION, OBJECTS, [], 2
    )
    assert [p.main for p in programs] == [RIGHT, WRONG_OBJECT]
    assert all(p.logprob is None and mean_logprob(p) is None for p in programs)
    assert [c.get("logprobs") for c in llm.calls] == [1, None, None]  # asked once only


# ---------------------------------------------------------------- the LLM layer
CONFIG = LLMConfig(model="m", base_url="http://127.0.0.1:1/v1", api_key_env=None, mode="completion")


def test_logprobs_and_seed_enter_the_request_key_only_when_set():
    plain = build_request(CONFIG, "p", max_tokens=5)
    assert "logprobs" not in plain.to_dict() and "seed" not in plain.to_dict()
    asked = build_request(CONFIG, "p", max_tokens=5, logprobs=1, seed=3)
    assert asked.key() != plain.key()
    assert LLMRequest.from_dict(asked.to_dict()) == asked
    assert LLMRequest.from_dict(plain.to_dict()).key() == plain.key()


def test_the_reply_carries_the_answers_log_likelihood():
    raw = SimpleNamespace(
        choices=[
            SimpleNamespace(
                text="x",
                finish_reason="stop",
                logprobs=SimpleNamespace(token_logprobs=[-0.5, -1.5, None]),
            )
        ],
        usage=None,
        model="m",
    )
    reply = _parse(raw, build_request(CONFIG, "p", logprobs=1), 0.1)
    assert reply.logprob == -2.0 and reply.logprob_tokens == 2
    back = LLMReply.from_dict(reply.to_dict(), latency_s=0.0, cached=True)
    assert back.logprob == -2.0 and back.logprob_tokens == 2
    plain = LLMReply("x", "stop", None, None, 0.1, "m")
    assert "logprob" not in plain.to_dict()


# ---------------------------------------------------------------- the real model
@pytest.mark.llm
@pytest.mark.slow
def test_the_local_model_gives_distinct_candidates_with_log_likelihoods(prompts):
    from lang2policy.llm import make_client

    planner = CodeAsPoliciesPlanner(
        make_client("local"), prompts, grounding=GroundingSettings(retrieved_examples=6)
    )
    programs = candidates(planner, "place the green block in the blue bowl", OBJECTS, [], 4)
    for p in programs:
        print(f"\n{mean_logprob(p)}: {p.main}")
    assert len({p.main for p in programs}) == len(programs) > 1
    assert all(p.logprob is not None and p.logprob < 0 and p.logprob_tokens for p in programs)
