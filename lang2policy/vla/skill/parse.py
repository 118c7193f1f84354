"""Skill instructions the VLA node can run and check (issue 18): text in, a ``Task`` out.

The VLA was trained on three task families (``tasks``), each asked in a fixed set of
phrasings (``PHRASINGS``; a push's direction in the words of ``SIDE_PHRASES``). A skill
instruction is one of those phrasings with a block (and bowl) colour filled in, so that its
success can be judged from the object poses as the demonstrations were (``judge``). Anything
else is refused with ``UnknownSkillError``, whose message lists what the VLA can do.

The text is compared in lower case, with runs of white space made one and a final ``.``,
``!`` or ``?`` dropped; that normal form is what the policy is given.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from lang2policy.errors import Lang2PolicyError
from lang2policy.scene.objects import COLORS
from lang2policy.vla.eval.rollout import MAX_SECONDS
from lang2policy.vla.spec.tasks import FAMILIES, PHRASINGS, SIDE_PHRASES, SIDES, Task

MAX_SKILL_CHARS = 300  # longer than any phrasing with the longest names


class UnknownSkillError(Lang2PolicyError):
    """The text is not an instruction the VLA was trained on and can check."""


@dataclass(frozen=True)
class Skill:
    """A parsed skill: the task, the instruction the policy is given, the time budget (s)."""

    task: Task
    instruction: str
    budget: float


def normal_form(text: str) -> str:
    """``text`` in lower case, white space collapsed, one final ``.``/``!``/``?`` dropped."""
    return " ".join(text.lower().split()).rstrip(".!?").rstrip()


def _field_pattern(field: str) -> str:
    colours = "|".join(sorted(COLORS, key=len, reverse=True))
    patterns = {
        "block": rf"(?P<block>(?:{colours}) block)",
        "bowl": rf"(?P<bowl>(?:{colours}) bowl)",
        "side": rf"(?P<side>{'|'.join(SIDES)})",
        "side_phrase": "(?P<side_phrase>" + "|".join(map(re.escape, SIDE_PHRASES.values())) + ")",
    }
    return patterns[field]


def _template_regex(template: str) -> re.Pattern[str]:
    """The phrasing ``template`` as a full-match regular expression with named groups."""
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field:
            parts.append(_field_pattern(field))
    return re.compile("".join(parts))


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, _template_regex(template)) for family in FAMILIES for template in PHRASINGS[family]
)
_SIDE_OF_PHRASE = {phrase: side for side, phrase in SIDE_PHRASES.items()}


def parse_skill(text: object) -> Skill:
    """The skill ``text`` asks for; ``UnknownSkillError`` (listing what the VLA can do) for
    text that matches none of the trained phrasings."""
    if not isinstance(text, str) or not text.strip():
        raise UnknownSkillError(f"a skill instruction must be non-empty text. {skill_help()}")
    if len(text) > MAX_SKILL_CHARS:
        raise UnknownSkillError(
            f"a skill instruction of {len(text)} characters; at most {MAX_SKILL_CHARS}. "
            f"{skill_help()}"
        )
    instruction = normal_form(text)
    for family, pattern in _PATTERNS:
        match = pattern.fullmatch(instruction)
        if match is None:
            continue
        found = match.groupdict()
        side = found.get("side") or _SIDE_OF_PHRASE.get(found.get("side_phrase") or "", "")
        task = Task(family, found["block"], found.get("bowl") or "", side)
        return Skill(task, instruction, MAX_SECONDS[family])
    raise UnknownSkillError(f"the VLA cannot check {instruction[:120]!r}. {skill_help()}")


def skill_help() -> str:
    """What the VLA can do: each family with examples, the colours and the sides."""
    names = {"block": "red block", "bowl": "blue bowl", "side": "left"}
    names["side_phrase"] = SIDE_PHRASES["left"]
    examples = "; ".join(
        f"{family}: " + " | ".join(repr(t.format(**names)) for t in PHRASINGS[family][:3])
        for family in FAMILIES
    )
    return (
        f"The VLA can do {len(FAMILIES)} kinds of skill ({examples}; more phrasings in "
        f"lang2policy/vla/spec/tasks.py). Colours: {', '.join(sorted(COLORS))}. Push sides: "
        f"{', '.join(SIDES)}."
    )
