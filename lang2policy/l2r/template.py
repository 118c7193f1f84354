"""The motion-descriptor template for our tabletop arm: typed slots, parsing and a grammar.

As in Language to Rewards, the descriptor fills a fixed template whose slots are written
``{CHOICE: [a, b]}`` and ``[NUM: default]``; optional lines are left out when the instruction
does not need them. The filled description sits between ``[start of description]`` and
``[end of description]``. The same ``TEMPLATE`` gives

- the template text for the prompt (``template_text``),
- the parser of a filled description (``parse_description``: slot values per line, unfilled
  slots detected, lines outside the template kept as notes), and
- the GBNF grammar that only admits filled descriptions (``grammar.description_grammar``),
  for constrained decoding with a small local model: its answer always parses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from lang2policy.errors import Lang2PolicyError
from lang2policy.l2r.api import DIRECTIONS

START, END = "[start of description]", "[end of description]"
_UNFILLED = re.compile(r"CHOICE|NUM\s*:|\[NUM\]")
_BLOCK = re.compile(re.escape(START) + r"(.*?)" + re.escape(END), re.DOTALL)
_NUMBER = r"(-?\d+(?:\.\d+)?)"


class DescriptionError(Lang2PolicyError):
    """A motion description is unusable: unfilled slots, a missing line, an unknown choice."""


@dataclass(frozen=True)
class Num:
    """``[NUM: default]``: a number of a ``kind`` ("length", "x", "y", "z", "speed", "angle",
    "time"); only x, y and angles may be negative."""

    name: str
    default: float
    kind: str = "length"

    @property
    def signed(self) -> bool:
        return self.kind in ("x", "y", "angle")


@dataclass(frozen=True)
class Choice:
    """``{CHOICE: [...]}``: one of ``options``, or of the scene's objects when None."""

    name: str
    options: tuple[str, ...] | None = None
    extra: tuple[str, ...] = ()

    def choices(self, objects: Sequence[str]) -> list[str]:
        return [*(self.options if self.options is not None else objects), *self.extra]


Part = str | Num | Choice


@dataclass(frozen=True)
class Line:
    key: str
    parts: tuple[Part, ...]
    optional: bool = True

    @property
    def about_object(self) -> bool:
        """Whether the line says what happens to the object to manipulate."""
        return isinstance(self.parts[0], str) and self.parts[0].startswith("The object should")


def _point(prefix: str) -> tuple[Part, ...]:
    return ("x = ", Num(f"{prefix}_x", 0.2, "x"), " m, y = ", Num(f"{prefix}_y", 0.0, "y"), " m")


TEMPLATE: tuple[Line, ...] = (
    Line("new_task", ("This ", Choice("new_task", ("is", "is not")), " a new task."), False),
    Line("object", ("The object to manipulate is ", Choice("object", None, ("none",)), "."),
         False),
    Line("grasp", ("The object should be grasped.",)),
    Line("lift", ("The object should be lifted ", Num("lift", 0.1), " m above the table.")),
    Line("move", ("The object should be moved to the point ", *_point("move"), ".")),
    Line("place", ("The object should be placed on ", Choice("place_on"), ".")),
    Line("push", ("The object should be pushed, without grasping it, to the point ",
                  *_point("push"), ".")),
    Line("push_by", ("The object should be pushed, without grasping it, ",
                     Num("push_distance", 0.05), " m ", Choice("push_direction", DIRECTIONS),
                     ".")),
    Line("yaw", ("The object should be turned to a heading of ", Num("yaw", 0.0, "angle"),
                 " degrees.")),
    Line("turn", ("The object should be turned by ", Num("turn", 45.0, "angle"), " degrees.")),
    Line("upright", ("The object should stand upright.",)),
    Line("hover", ("The gripper should hover ", Num("hover_height", 0.1),
                   " m above the point ", *_point("hover"), ".")),
    Line("tool", ("The gripper should move to the point ", *_point("tool"), ", z = ",
                  Num("tool_z", 0.1, "z"), " m.")),
    Line("speed", ("The gripper should move ", Choice("speed_mode", ("no faster than",
                                                                    "at least")),
                   " ", Num("speed", 0.1, "speed"), " m/s.")),
    Line("avoid", ("The gripper should stay out of the box centred at ", *_point("avoid"),
                   ", with a half size of ", Num("avoid_half", 0.05), " m.")),
    Line("gripper", ("The gripper should be ", Choice("gripper", ("open", "closed")), ".")),
    Line("duration", ("The task should take at most ", Num("duration", 10.0, "time"), " seconds.")),
)
LINES = {line.key: line for line in TEMPLATE}


@dataclass(frozen=True)
class Description:
    """A filled description: its text (the lines between the delimiters) and slot values."""

    text: str
    new_task: bool
    object: str | None
    values: dict[str, float | str] = field(default_factory=dict)
    lines: tuple[str, ...] = ()  # template line keys, in the order written
    unknown: tuple[str, ...] = ()  # lines that are not template lines (kept for the coder)

    def block(self) -> str:
        return f"{START}\n{self.text}\n{END}"


# ---------------------------------------------------------------- template text
def _slot_text(part: Part) -> str:
    if isinstance(part, Num):
        return f"[NUM: {part.default:g}]"
    if isinstance(part, Choice):
        if part.options is None:
            options = ["<an object from the objects line>", *part.extra]
        else:
            options = [*part.options, *part.extra]
        return "{CHOICE: [" + ", ".join(options) + "]}"
    return part


def template_text() -> str:
    """The template as the prompt shows it."""
    lines = []
    for line in TEMPLATE:
        body = "".join(_slot_text(p) for p in line.parts)
        lines.append(f"* {'[optional] ' if line.optional else ''}{body}")
    return "\n".join([START, *lines, END])


# ---------------------------------------------------------------- parsing
def _line_pattern(line: Line, objects: Sequence[str]) -> re.Pattern[str]:
    pattern = ""
    for part in line.parts:
        if isinstance(part, Num):
            pattern += _NUMBER
        elif isinstance(part, Choice):
            options = sorted(part.choices(objects), key=len, reverse=True)
            pattern += "(" + "|".join(re.escape(o) for o in options) + ")"
        else:
            pattern += re.escape(part)
    return re.compile(pattern, re.IGNORECASE)


def _slots(line: Line) -> list[Num | Choice]:
    return [p for p in line.parts if not isinstance(p, str)]


def extract_block(reply: str) -> str:
    """The text between the delimiters (the last such block); the whole reply if it has
    bullet lines but no delimiters. Raises ``DescriptionError`` when there is none."""
    blocks = _BLOCK.findall(reply)
    if blocks:
        return blocks[-1].strip()
    if START in reply:  # started but not ended (e.g. cut off)
        return reply.split(START, 1)[1].strip()
    if re.search(r"^\s*\*", reply, re.MULTILINE):
        return reply.strip()
    raise DescriptionError(f"the answer has no description between {START} and {END}")


def unfilled_slots(text: str) -> list[str]:
    """Lines that still contain ``CHOICE`` or ``NUM`` template slots."""
    return [line.strip() for line in text.splitlines() if _UNFILLED.search(line)]


def parse_description(reply: str, objects: Sequence[str]) -> Description:
    """Read a filled description out of an LLM answer.

    Raises ``DescriptionError`` for unfilled slots, a missing "new task" or "object" line, or
    an object that is not in the scene; lines outside the template are kept in ``unknown``.
    """
    text = extract_block(reply)
    unfilled = unfilled_slots(text)
    if unfilled:
        raise DescriptionError(f"the description still has unfilled slots: {unfilled[:3]}")
    patterns = [(line, _line_pattern(line, objects)) for line in TEMPLATE]
    values: dict[str, float | str] = {}
    keys: list[str] = []
    kept: list[str] = []
    unknown: list[str] = []
    for raw in text.splitlines():
        body = re.sub(r"^\s*[*-]\s*(\[optional\]\s*)?", "", raw).strip()
        if not body:
            continue
        kept.append(f"* {body}")
        match = next(((ln, m) for ln, p in patterns if (m := p.fullmatch(body))), None)
        if match is None:
            unknown.append(body)
            continue
        line, found = match
        keys.append(line.key)
        for slot, value in zip(_slots(line), found.groups(), strict=True):
            values[slot.name] = float(value) if isinstance(slot, Num) else _canonical(
                value, slot.choices(objects))
    _require(values, objects, text)
    obj = values["object"]
    return Description(text="\n".join(kept), new_task=values["new_task"] == "is",
                       object=None if obj == "none" else str(obj), values=values,
                       lines=tuple(keys), unknown=tuple(unknown))


def _canonical(value: str, choices: Sequence[str]) -> str:
    return next(c for c in choices if c.lower() == value.lower())


def _require(values: dict[str, float | str], objects: Sequence[str], text: str) -> None:
    if "new_task" not in values:
        raise DescriptionError("the description lacks the line '* This {CHOICE: [is, is not]} "
                               "a new task.'")
    if "object" not in values:
        found = re.search(r"The object to manipulate is (.*?)\.?$", text, re.MULTILINE)
        if found:
            raise DescriptionError(f"the object to manipulate {found.group(1)!r} is not in "
                                   f"the scene; objects: {sorted(objects)} or none")
        raise DescriptionError("the description lacks the line '* The object to manipulate "
                               "is ...'")
