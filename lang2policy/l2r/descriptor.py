"""Stage 1, the motion descriptor: an instruction (and the conversation so far) to a filled
template, retried while the answer is unusable.

The descriptor keeps the conversation (instruction, description) of the session, as in the
paper: that is where corrections accumulate ("higher" is answered by repeating the previous
description with one number changed). An answer that still holds ``CHOICE``/``NUM`` slots,
lacks a required line or names an object not in the scene is asked again (at a slightly higher
temperature, so the retry can differ) up to ``attempts`` times, then ``DescriptionError``.
With ``constrained=True`` (a llama.cpp server) the answer is decoded under a grammar built from
the template, so it is always a filled description.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lang2policy.errors import LLMResponseError
from lang2policy.l2r.grammar import (
    about_gripper,
    description_grammar,
    grammar_regex,
    ground_numbers,
    mentioned,
)
from lang2policy.l2r.prompts import RewardPrompts, annotate
from lang2policy.l2r.template import (
    END,
    START,
    Description,
    DescriptionError,
    parse_description,
)
from lang2policy.llm.exchange import LLM, Message
from lang2policy.text_quote import prompt_block, prompt_quote

log = logging.getLogger("lang2policy.l2r")

MAX_TOKENS = 400
HISTORY_TURNS = 6  # earlier (instruction, description) pairs shown to the LLM
RETRY_TEMPERATURE = 0.3  # added per retry
CHAT_SUFFIX = " Make sure to ignore irrelevant options."


@dataclass(frozen=True)
class DescribeResult:
    description: Description
    attempts: int
    llm_seconds: float
    errors: tuple[str, ...]  # why earlier attempts were asked again


def objects_line(objects: Sequence[str], positions: Mapping[str, Sequence[float]]) -> str:
    """``objects: red block at (0.20, 0.05), blue bowl`` (positions where known). The names
    come from the scene (perception, the network): each is quoted with ``prompt_quote``, so a
    line break in one cannot start a ``User:`` turn of the conversation."""
    parts = []
    for name in objects:
        where = positions.get(name)
        quoted = prompt_quote(name)
        parts.append(f"{quoted} at ({where[0]:.2f}, {where[1]:.2f})" if where is not None
                     else quoted)
    return "objects: " + ", ".join(parts)


def _check_grammar(text: str, grammar: str | None) -> None:
    """A constrained answer must be one the grammar admits: a server that ignored the grammar
    (not llama.cpp?) is caught here rather than trusted."""
    if grammar is not None and not grammar_regex(grammar).fullmatch(text):
        raise DescriptionError(
            "the answer does not follow the grammar it was decoded under; does the LLM server "
            f"support llama.cpp grammars? It began {text[:80]!r}"
        )


def sentence(instruction: str) -> str:
    """One line ending in a full stop (or its own question or exclamation mark)."""
    text = " ".join(instruction.split()).rstrip(".")
    return text if text.endswith(("?", "!")) else text + "."


class MotionDescriptor:
    """Fills the template for each instruction; ``history`` holds the accepted turns."""

    def __init__(self, llm: LLM, prompts: RewardPrompts, *, constrained: bool,
                 attempts: int = 3) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.llm, self.prompts = llm, prompts
        self.constrained, self.attempts = constrained, attempts
        self.history: list[tuple[str, Description]] = []

    def reset(self) -> None:
        self.history.clear()

    def remember(self, instruction: str, description: Description) -> None:
        self.history.append((sentence(instruction), description))

    def describe(self, instruction: str, objects: Sequence[str],
                 positions: Mapping[str, Sequence[float]]) -> DescribeResult:
        """Ask until the answer parses (at most ``attempts`` times)."""
        request = self._request(instruction, objects, positions)
        grammar = self._grammar(instruction, objects, positions) if self.constrained else None
        errors: list[str] = []
        seconds = 0.0
        for attempt in range(self.attempts):
            temperature = None if attempt == 0 else min(1.0, RETRY_TEMPERATURE * attempt)
            try:
                reply = self.llm.complete(request, stop=self._stop(), max_tokens=MAX_TOKENS,
                                          temperature=temperature, grammar=grammar)
            except LLMResponseError as exc:  # cut off or empty: ask again
                errors.append(str(exc))
                continue
            text, seconds = reply.text, seconds + reply.latency_s
            try:
                _check_grammar(text, grammar)
                description = parse_description(self._full(text), objects)
            except DescriptionError as exc:
                log.info("description attempt %d unusable: %s", attempt + 1, exc)
                errors.append(str(exc))
                continue
            return DescribeResult(description, attempt + 1, seconds, tuple(errors))
        raise DescriptionError(
            f"no usable motion description after {self.attempts} attempts: "
            + "; ".join(errors[-3:])
        )

    def _grammar(self, instruction: str, objects: Sequence[str],
                 positions: Mapping[str, Sequence[float]]) -> str:
        focus = mentioned(instruction, objects)
        previous = self.history[-1][1].object if self.history else None
        numbers = ground_numbers(instruction, focus, positions)
        return description_grammar(objects, focus, previous, numbers, about_gripper(instruction))

    # ------------------------------------------------------------------ prompts
    def _completion_mode(self) -> bool:
        return self.llm.config.mode == "completion"

    def _stop(self) -> list[str] | None:
        return None if self.constrained else [END, "\nUser:"]

    def _full(self, text: str) -> str:
        """Completion answers continue after the prompt's ``[start of description]`` (and
        stop before ``[end of description]`` unless a grammar wrote it)."""
        if not self._completion_mode() or START in text:
            return text
        return f"{START}\n{text.rstrip()}\n" + ("" if END in text else END)

    def _request(self, instruction: str, objects: Sequence[str],
                 positions: Mapping[str, Sequence[float]]) -> str | list[Message]:
        """The conversation so far and the new instruction. Scene names, earlier descriptions
        (which repeat them) and instructions enter through ``prompt_quote``."""
        scene = objects_line(objects, positions)
        turns = [(prompt_quote(annotate(past)), prompt_block(described.block()))
                 for past, described in self.history[-HISTORY_TURNS:]]
        said = prompt_quote(annotate(sentence(instruction)))
        if self._completion_mode():
            lines = [self.prompts.descriptor_prompt(instruction), "Now the user:", "", scene]
            for past, block in turns:
                lines += [f"User: {past}", block]
            lines += [f"User: {said}", START]
            return "\n".join(lines) + "\n"
        messages: list[Message] = [{"role": "system", "content": self.prompts.descriptor_prompt()}]
        for past, block in turns:
            messages += [{"role": "user", "content": past},
                         {"role": "assistant", "content": block}]
        messages.append({"role": "user", "content": f"{scene}\n{said}{CHAT_SUFFIX}"})
        return messages
