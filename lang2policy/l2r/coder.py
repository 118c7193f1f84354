"""Stage 2, the reward coder: a filled description to calls of the reward API (stateless).

The coder sees only the shared header (template, API, examples) and one description, never
the conversation, as in the paper. Its code runs in the sandbox (``sandboxed``).

With a small local model (``constrained=True``) the description is already a filled template
(the descriptor's grammar saw to that), and each template line maps to exactly one API call
(``LINE_CALLS``), so the code is written from the description directly (``description_code``):
the program a grammar-constrained decode would be forced to produce, without the model's
latency or its chance to contradict the description. ``llm_for_constrained=True`` asks the model
instead, under ``grammar.code_grammar`` (API calls only; always runs). Chat models write free
code, as in the paper.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lang2policy.l2r.grammar import CODE_END, code_grammar, number_text, quoted
from lang2policy.l2r.template import Description
from lang2policy.llm.exchange import LLM, Message
from lang2policy.text_quote import prompt_block

CODE_START = "[start of code]"
MAX_TOKENS = 300
_FENCE = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)

__all__ = ["CODE_END", "CODE_START", "LINE_CALLS", "CodeReply", "RewardCoder",
           "description_code", "extract_code"]

# Template line -> (API function, arguments): "obj" is the description's object, "place_on"
# and other slot names are that slot's value; "open" is 1.0 or 0.0 from the gripper choice;
# "[avoid_x, avoid_y]" is the region's centre (0.05 m high).
LINE_CALLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "grasp": ("set_grasp", ("obj",)),
    "lift": ("set_lift", ("obj", "lift")),
    "move": ("set_object_target", ("obj", "move_x", "move_y")),
    "place": ("set_place_on", ("obj", "place_on")),
    "push": ("set_push", ("obj", "push_x", "push_y")),
    "push_by": ("set_push_by", ("obj", "push_distance", "push_direction")),
    "yaw": ("set_yaw", ("obj", "yaw")),
    "turn": ("set_turn", ("obj", "turn")),
    "upright": ("set_upright", ("obj",)),
    "hover": ("set_hover", ("hover_x", "hover_y", "hover_height")),
    "tool": ("set_tool_target", ("tool_x", "tool_y", "tool_z")),
    "speed": ("set_speed_limit", ("speed",)),
    "avoid": ("avoid_region", ("[avoid_x, avoid_y]", "avoid_half")),
    "gripper": ("set_gripper", ("open",)),
    "duration": ("set_duration", ("duration",)),
}


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


def _argument(arg: str, description: Description) -> str:
    values = description.values
    if arg == "obj":
        return quoted(description.object or "none")
    if arg == "open":
        return "1.0" if values.get("gripper") == "open" else "0.0"
    if arg.startswith("["):
        x, y = (number_text(float(values[a])) for a in arg.strip("[]").split(", "))
        return f"[{x}, {y}, 0.05]"
    value = values[arg]
    return number_text(value) if isinstance(value, float) else quoted(str(value))


def description_code(description: Description, new_task: bool) -> str:
    """The reward code of a template-only description: one call per line, in order."""
    lines = ["reset_reward()"] if new_task else []
    for key in description.lines:
        if key not in LINE_CALLS:
            continue
        name, args = LINE_CALLS[key]
        if key == "speed" and description.values.get("speed_mode") == "at least":
            name = "set_min_speed"
        lines.append(f"{name}({', '.join(_argument(a, description) for a in args)})")
    return "\n".join([*lines, "execute_plan()"]) + "\n"


class RewardCoder:
    """Writes reward code for one description (no memory between calls)."""

    def __init__(self, llm: LLM, prompt: str, *, constrained: bool,
                 llm_for_constrained: bool = False) -> None:
        self.llm, self.prompt, self.constrained = llm, prompt, constrained
        self.llm_for_constrained = llm_for_constrained

    def write(self, description: Description, new_task: bool,
              objects: Sequence[str]) -> CodeReply:
        """Code for ``description``; ``new_task`` decides ``reset_reward()`` when constrained."""
        if self.constrained and not self.llm_for_constrained and not description.unknown:
            return CodeReply(description_code(description, new_task), 0.0)
        grammar = code_grammar(objects, new_task) if self.constrained else None
        stop = None if self.constrained else [CODE_END]
        reply = self.llm.complete(self._request(description), stop=stop, max_tokens=MAX_TOKENS,
                                  grammar=grammar)
        return CodeReply(extract_code(reply.text), reply.latency_s)

    def _request(self, description: Description) -> str | list[Message]:
        # The description is an earlier answer that repeats scene names: quoted line by line.
        block = prompt_block(description.block())
        if self.llm.config.mode == "completion":
            return f"{self.prompt}\nNow:\n\n{block}\n{CODE_START}\n"
        return [{"role": "system", "content": self.prompt},
                {"role": "user", "content": block}]
