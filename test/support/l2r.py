"""The Language to Rewards planner on a scripted chat LLM: a fixed scene, the description and
code answers a test scripts, and the planner built on them (l2r planner and validated-once
tests)."""

from __future__ import annotations

from collections.abc import Sequence

from lang2policy.l2r.planner import RewardPlanner
from lang2policy.llm import LLMConfig, LLMReply, build_request

SCENE = {"red block": (0.2, 0.1, 0.0124), "blue bowl": (0.22, -0.08, 0.0),
         "green block": (0.15, -0.12, 0.0124)}


HEADINGS = {"red block": 10.0, "blue bowl": 0.0, "green block": -20.0}


CHAT = LLMConfig(model="scripted-chat", base_url="http://127.0.0.1:9/v1", api_key_env=None,
                 mode="chat")


class ScriptedLLM:
    """A chat LLM that answers from a list, recording every request it was sent."""

    def __init__(self, answers: Sequence[str], config: LLMConfig = CHAT) -> None:
        self.config, self.answers, self.requests = config, list(answers), []

    def complete(self, prompt_or_messages, *, stop=None, max_tokens=None, temperature=None,
                 grammar=None, response_format=None) -> LLMReply:
        request = build_request(self.config, prompt_or_messages, stop=stop,
                                max_tokens=max_tokens, temperature=temperature, grammar=grammar)
        self.requests.append(request)
        if not self.answers:
            raise AssertionError(f"unexpected LLM call: {request.messages or request.prompt}")
        return LLMReply(self.answers.pop(0), "stop", None, None, 0.01, self.config.model)


def described(*lines: str, new: bool = True, obj: str = "red block") -> str:
    body = [f"* This {'is' if new else 'is not'} a new task.",
            f"* The object to manipulate is {obj}.", *lines]
    return "[start of description]\n" + "\n".join(body) + "\n[end of description]"


def chat_planner(answers: Sequence[str], **kwargs) -> tuple[RewardPlanner, ScriptedLLM]:
    llm = ScriptedLLM(answers)
    planner = RewardPlanner(llm, SCENE, **kwargs)
    planner.set_scene(SCENE, HEADINGS)
    return planner, llm


LIFT = "* The object should be lifted 0.1 m above the table."


LIFT_CODE = '```python\nreset_reward()\nset_lift("red block", 0.1)\nexecute_plan()\n```'
