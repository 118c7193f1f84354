"""What an instruction narrows in the main code's grammar (``code_grammar.code_grammars``):
which objects it may name as literals, and whether it may pass a speed of its own."""

from __future__ import annotations

import re
from collections.abc import Sequence

_SPEED_WORDS = re.compile(
    r"\b(slow\w*|fast\w*|quick\w*|gentl\w*|careful\w*|speed\w*|rapid\w*|hurr\w*|"
    r"brisk\w*)\b|\d\s*(m|cm|mm)\s*/\s*s\b|\bper second\b"
)


def kind_focus(objects: Sequence[str], named: Sequence[str], instruction: str) -> tuple[str, ...]:
    """The objects the main code may name as literals when the instruction names fewer than
    ``FOCUS_MIN``: of a kind (block, bowl) it names one of and never speaks of in the plural
    ("blocks"), only the named ones; of other kinds, all. "Put all the blocks in the orange
    bowl" may name any block but no bowl other than the orange one (a 270M model otherwise
    writes its nearest example's bowl)."""
    words = set(re.findall(r"[a-z]+", instruction.lower()))
    kind_of = {o: o.split()[-1] for o in objects if o.split()}
    narrowed = (
        {kind_of[n] for n in named if n in kind_of}
        - {k + "s" for k in words}
        - {k[:-1] for k in words if k.endswith("s")}
    )
    return tuple(o for o in objects if kind_of.get(o) not in narrowed or o in named)


def asks_for_speed(instruction: str) -> bool:
    """Whether the instruction speaks of speed ("slowly", "quickly", "at 5 cm/s"): only then
    may the main code pass a speed other than the default (a small model otherwise copies the
    0.5 m/s of a repair example, which the privilege policy refuses)."""
    return bool(_SPEED_WORDS.search(instruction.lower()))


# "right" as an intensifier ("drop it right into the bowl", "right there"), not a direction.
_RIGHT_AS_INTENSIFIER = re.compile(
    r"\bright\s+(?=(in|into|inside|on|onto|there|here|away|now|next|beside|by|over)\b)"
)


def instruction_words(instruction: str) -> set[str]:
    """The lower-case words of ``instruction`` that say what it asks for: "right" is left out
    where it only stresses what follows ("right into the yellow bowl"), so it does not let
    the main code aim at a place to the right of something."""
    text = _RIGHT_AS_INTENSIFIER.sub("", instruction.lower())
    return set(re.findall(r"[a-z]+", text))
