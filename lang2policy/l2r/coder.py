"""Stage 2, the reward coder: a filled description to calls of the reward API (stateless).

The coder sees only the API, its examples and one description, as in the paper. Its code runs
in the sandbox (``sandboxed.run_reward_code``). With ``constrained=True`` (a llama.cpp server)
the answer is decoded under a grammar that admits only a list of API calls: function names
from the API, object names from the scene (never an object placed on itself), numbers of a
fixed shape, ``reset_reward()`` first exactly when the task is new and ``execute_plan()``
last. Such code always runs; out-of-range numbers are clamped by the spec validation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations

from lang2policy.l2r.api import REWARD_API
from lang2policy.l2r.template import NUMBER_RULES, Description, gbnf_literal
from lang2policy.llm.exchange import LLM, Message

CODE_START, CODE_END = "[start of code]", "[end of code]"
MAX_TOKENS = 300
MAX_CALLS = 8  # calls between reset_reward() and execute_plan() in constrained code
_FENCE = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)
_FIXED = ("reset_reward", "execute_plan")


@dataclass(frozen=True)
class CodeReply:
    code: str
    llm_seconds: float


def extract_code(reply: str) -> str:
    """The code between the code delimiters, else in a Markdown fence, else the reply."""
    text = reply
    if CODE_START in text:
        text = text.split(CODE_START, 1)[1]
    if CODE_END in text:
        text = text.split(CODE_END, 1)[0]
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    return text.strip("\n") + "\n"


def _args_rule(name: str, objects: Sequence[str]) -> str:
    skill = REWARD_API[name]
    kinds = [p.kind for p in skill.params]
    if name == "set_place_on":  # two different objects
        pairs = [f'{gbnf_literal(repr_name(a))} ", " {gbnf_literal(repr_name(b))}'
                 for a, b in permutations(objects, 2)]
        return "(" + " | ".join(f"({p})" for p in pairs) + ")" if pairs else ""
    parts = []
    for kind in kinds:
        parts.append({"object": "obj", "number": "snum",
                      "point": '"[" snum ", " snum ", " snum "]"'}[kind])
    return ' ", " '.join(parts)


def repr_name(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def code_grammar(objects: Sequence[str], new_task: bool) -> str:
    """GBNF for the constrained coder's answer (the text after ``[start of code]\\n``)."""
    calls = []
    for name in REWARD_API:
        if name in _FIXED:
            continue
        args = _args_rule(name, objects)
        if name == "set_place_on" and not args:
            continue  # needs two objects
        calls.append(f'"{name}(" {args} ")\\n"' if args else f'"{name}()\\n"')
    first = '"reset_reward()\\n" ' if new_task else ""
    optional = " ".join(["call?"] * (MAX_CALLS - 1))
    objects_rule = " | ".join(gbnf_literal(repr_name(o)) for o in objects)
    return "\n".join([
        f'root ::= {first}call {optional} "execute_plan()\\n" {gbnf_literal(CODE_END)}',
        "call ::= " + " | ".join(f"({c})" for c in calls),
        f"obj ::= {objects_rule}",
        NUMBER_RULES,
    ])


class RewardCoder:
    """Writes reward code for one description (no memory between calls)."""

    def __init__(self, llm: LLM, prompt: str, *, constrained: bool) -> None:
        self.llm, self.prompt, self.constrained = llm, prompt, constrained

    def write(self, description: Description, new_task: bool,
              objects: Sequence[str]) -> CodeReply:
        grammar = code_grammar(objects, new_task) if self.constrained else None
        stop = None if self.constrained else [CODE_END]
        reply = self.llm.complete(self._request(description), stop=stop, max_tokens=MAX_TOKENS,
                                  grammar=grammar)
        return CodeReply(extract_code(reply.text), reply.latency_s)

    def _request(self, description: Description) -> str | list[Message]:
        if self.llm.config.mode == "completion":
            return f"{self.prompt.rstrip(chr(10))}\n\n{description.block()}\n{CODE_START}\n"
        return [{"role": "system", "content": self.prompt},
                {"role": "user", "content": description.block()}]
