"""Splitting a compound instruction into the steps it names, by a small deterministic parser.

``split_steps(instruction, objects)`` returns the steps in order; one step (the instruction
as it is) when it names no sequence. It reads:

* sequence words: "A then B", "A, then B", "A and then B", "A; B", "A. B", "first A, then B",
  "A, after that B", "A and afterwards B";
* a second command joined by "and": "stack the red block on the blue block and put the green
  block in the yellow bowl" (the part after "and" starts with a verb of placing and names its
  own object, so "pick up the red block and put it in the bowl" stays one step);
* (a list of blocks for one bowl, "put the red block and the green block in the yellow bowl",
  is one step: ``spatial_phrases`` reads it as every named block into that bowl).

A step that says "it" or "them" gets the object of the step before it in their place ("stack
the red block on the blue block, then move it 5 cm to the left"). Each step is planned and
checked on its own (``loop.PlanLoop``), so a step's goal is read from its own words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lang2policy.planning.goal_phrases import named_in, normalise

MAX_STEPS = 8  # more steps than this in one line: read as one step (the LLM's)
_VERB = (
    r"(?:put|place|move|set|bring|take|shift|slide|carry|drop|stack|pile|push|lift|pick|"
    r"arrange|line|make|build|sort|gather|collect|go|return|say|tell|turn|rotate|open|close)"
)
_SEQUENCE = re.compile(
    r"\s*(?:,\s*|;\s*|\.\s+)?\b(?:and\s+)?(?:then|after\s+that|afterwards|finally)\b"
    r"\s*,?\s*|\s*;\s*|\.\s+(?=\w)",
    re.IGNORECASE,
)
_FIRST = re.compile(r"^\s*first(ly)?\s*,?\s*", re.IGNORECASE)
_AND_VERB = re.compile(rf",?\s+and\s+(?=(?:please\s+)?{_VERB}\b)", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(it|them)\b")


def split_steps(instruction: str, objects: Sequence[str]) -> list[str]:
    """The steps of ``instruction`` in order (see the module doc); ``[instruction]`` for one."""
    parts = [p.strip(" ,.") for p in _SEQUENCE.split(_FIRST.sub("", instruction.strip()))]
    parts = [p for p in parts if p]
    steps: list[str] = []
    for part in parts:
        steps.extend(_split_and(part, objects))
    if len(steps) <= 1 or len(steps) > MAX_STEPS:
        return [instruction]
    return _resolve_pronouns(steps, objects)


def _split_and(part: str, objects: Sequence[str]) -> list[str]:
    """``part`` split at "and <verb>" where the right side names an object of its own."""
    pieces = _AND_VERB.split(part)
    if len(pieces) == 1:
        return [part]
    merged = [pieces[0]]
    for piece in pieces[1:]:
        text = normalise(piece)
        own = named_in(text, objects) and not _PRONOUN.search(text)
        if own or _stands_alone(text):
            merged.append(piece)
        else:
            merged[-1] = f"{merged[-1]} and {piece}"
    return [m.strip(" ,.") for m in merged]


def _stands_alone(text: str) -> bool:
    """A command that needs no object of its own ("go home", "say done")."""
    return bool(re.match(r"^(go (back )?home|return home|say\b|tell\b)", text))


def list_names(phrase: str, objects: Sequence[str]) -> list[str] | None:
    """The blocks a list phrase names ("the red block and the blue block", "red, green and
    blue blocks"), or None when it is not a plain list of named blocks."""
    items = [i.strip() for i in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", phrase) if i.strip()]
    if len(items) < 2:
        return None
    plural = re.fullmatch(r"(.+) blocks", items[-1])
    if plural:
        items[-1] = plural[1]
    names = []
    for item in items:
        item = re.sub(r"^the ", "", item)
        name = item if item in objects else f"{item} block"
        if name not in objects or not name.endswith("block"):
            return None
        names.append(name)
    return names if len(set(names)) == len(names) else None


def _resolve_pronouns(steps: list[str], objects: Sequence[str]) -> list[str]:
    """ "it"/"them" in a step replaced by the first object the step before it names."""
    resolved = [steps[0]]
    for step in steps[1:]:
        named = named_in(normalise(resolved[-1]), objects)
        if named and _PRONOUN.search(step) and not named_in(normalise(step), objects):
            step = _PRONOUN.sub(f"the {named[0]}", step, count=1)
        resolved.append(step)
    return resolved
