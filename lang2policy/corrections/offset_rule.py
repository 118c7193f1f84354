"""The offset rule: "a bit to the left", "3 cm higher", "too far right".

Frame: the arm sits at the origin reaching toward +x; for a person behind it, left is +y, right
-y, forward / away / further +x, closer / back -x, up / higher +z. "too far left" asks for the
opposite direction. A text is an offset only when it consists of offset words and fillers.
"""

from __future__ import annotations

import re

from lang2policy.corrections.correction import (
    MAX_OFFSET,
    Correction,
    CorrectionError,
    describe_offset,
)
from lang2policy.corrections.vocabulary import (
    DISTANCE,
    FILLERS,
    SIZE_WORDS,
    UNITS,
    parse_number,
    unit_name,
    vocab,
    words_of,
)

_DEFAULT_STEP = 0.02
_AXES = {  # word -> unit vector (dx, dy, dz)
    **dict.fromkeys(("left", "leftward", "leftwards"), (0, 1, 0)),
    **dict.fromkeys(("right", "rightward", "rightwards"), (0, -1, 0)),
    **dict.fromkeys(("forward", "forwards", "away", "ahead", "further", "farther"), (1, 0, 0)),
    **dict.fromkeys(
        ("closer", "nearer", "back", "backward", "backwards", "toward", "towards"), (-1, 0, 0)
    ),
    **dict.fromkeys(("up", "upward", "upwards", "higher", "raise"), (0, 0, 1)),
    **dict.fromkeys(("down", "downward", "downwards", "lower"), (0, 0, -1)),
}
# "too X" names what is wrong; the fix is the opposite.
_TOO = {"high": (0, 0, -1), "low": (0, 0, 1), "close": (1, 0, 0), "near": (1, 0, 0)}
_TOO["far"] = (-1, 0, 0)
_OFFSET_WORDS = (
    FILLERS
    | set(_AXES)
    | set(_TOO)
    | vocab(
        "slightly touch tad hair tiny tiniest smidge teeny lot lots much way far good little too "
        "of over on side and then bit shift nudge position target spot point aim mm cm m "
        "millimeters millimetres centimeters centimetres meters metres inches by about around "
        "than there from make get come some somewhat us base"
    )
)


def offset_correction(text: str, lowered: str) -> Correction | None:
    if any(w not in _OFFSET_WORDS for w in words_of(DISTANCE.sub(" ", lowered))):
        return None
    total = [0.0, 0.0, 0.0]
    for segment in re.split(r",|;|\band\b|\bthen\b", lowered):
        size = _size(segment)
        for axis in _directions(segment):
            for i in range(3):
                total[i] += axis[i] * size
    offset = tuple(round(v, 6) for v in total)
    if not any(offset):
        return None
    if max(abs(v) for v in offset) > MAX_OFFSET:
        raise CorrectionError(
            f"an offset of {describe_offset(offset)} is more than "
            f"{MAX_OFFSET * 100:.0f} cm: give a new goal as an instruction"
        )
    return Correction("offset", text, offset=offset)  # type: ignore[arg-type]


def _directions(segment: str) -> list[tuple[int, ...]]:
    """Unit directions asked for in one segment; "too far left" asks for the right."""
    words = words_of(segment)
    too = "too" in words
    named = [w for i, w in enumerate(words) if w in _AXES and _counts(words, i)]
    if not named and too:
        return [_TOO[w] for w in words if w in _TOO][:1]  # "too high": already the fix
    unique = list(dict.fromkeys(_AXES[w] for w in named))  # "further away" is one step
    return [tuple(-a for a in axis) if too else axis for axis in unique]


def _counts(words: list[str], i: int) -> bool:
    """Whether direction word ``words[i]`` names a direction here: "further" only without a
    sideways word ("further left" is more of the same), "toward" only "toward me"."""
    word = words[i]
    if word in ("further", "farther"):
        return not any(w in ("left", "right", "up", "down", "higher", "lower") for w in words)
    if word in ("toward", "towards"):
        return i + 1 < len(words) and words[i + 1] in ("me", "you", "us", "the", "robot")
    return True


def _size(segment: str) -> float:
    explicit = DISTANCE.search(segment)
    if explicit:
        return parse_number(explicit.group(1)) * UNITS[unit_name(explicit.group(2))]
    for pattern, size in SIZE_WORDS:
        if pattern.search(segment):
            return size
    return _DEFAULT_STEP
