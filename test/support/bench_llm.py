"""A scripted completion-mode LLM for the planning benchmarks' tests: it answers each prompt with
the program scripted for the instruction the prompt ends on (no local model needed)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from lang2policy.llm.config import LLMConfig
from lang2policy.llm.exchange import LLMReply

SCRIPTED = LLMConfig(
    model="scripted-completion",
    base_url="http://127.0.0.1:9/v1",
    api_key_env=None,
    mode="completion",
)


class ScriptedCodeLLM:
    """Answers with ``programs[instruction]`` for the instruction that occurs last in the prompt
    (the one the planner asks about; few-shot examples and history come before it), and counts
    the calls. Each answer takes ``delay_s``, so latencies are measurable."""

    def __init__(
        self, programs: Mapping[str, str], config: LLMConfig = SCRIPTED, delay_s: float = 0.005
    ) -> None:
        self.config, self.programs, self.calls, self.delay_s = config, dict(programs), 0, delay_s

    def complete(self, prompt_or_messages, **options) -> LLMReply:
        self.calls += 1
        time.sleep(self.delay_s)
        text = (
            prompt_or_messages if isinstance(prompt_or_messages, str) else str(prompt_or_messages)
        )
        lowered = text.lower()
        found = {i: lowered.rfind(i.lower().rstrip(".?!")) for i in self.programs}
        instruction = max(found, key=found.__getitem__)
        if found[instruction] < 0:
            raise AssertionError(f"no scripted instruction in the prompt: ...{text[-300:]}")
        answer = self.programs[instruction]
        return LLMReply(answer, "stop", None, None, self.delay_s, self.config.model)
