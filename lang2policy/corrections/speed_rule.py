"""The speed rule: "slower", "much faster", "half speed", "at 3 cm/s".

A text is a speed correction only when it consists of speed words and fillers ("lower it
slowly" is left to the planner); it carries a ``factor`` or an absolute ``speed`` in m/s.
"""

from __future__ import annotations

import re

from lang2policy.corrections.correction import (
    FACTOR_RANGE,
    SPEED_RANGE,
    Correction,
    CorrectionError,
)
from lang2policy.corrections.vocabulary import (
    FILLERS,
    SIZE_WORDS,
    SPEED_VALUE,
    UNITS,
    parse_number,
    unit_name,
    vocab,
    words_of,
)

_TOO_FAST = re.compile(r"\btoo (fast|quick\w*|rapid\w*)\b")
_TOO_SLOW = re.compile(r"\btoo slow\w*\b")
_SLOWER = re.compile(
    r"\b(slower|slow (it )?down|slow|more slowly|slowly|careful\w*|gentl[ey]\w*|"
    r"easy|calm\w*)\b"
)
_FASTER = re.compile(
    r"\b(faster|fast|quick|speed (it )?up|quicker|more quickly|quickly|hurry( up)?|"
    r"rapid\w*)\b"
)
_MULTIPLE = re.compile(r"\b(half|twice|double|(\d+(?:\.\d+)?)\s*(?:x|times))\b")
_SPEED_WORDS = FILLERS | vocab(
    "slower slow slowly faster speed quicker quickly hurry too fast quick careful carefully "
    "gently gentle gentler easy calm calmer rapid rapidly pace much way lot lots far bit little "
    "slightly touch tad somewhat as at with of even than and"
)


def speed_correction(text: str, lowered: str) -> Correction | None:
    slower = bool(_TOO_FAST.search(lowered) or _SLOWER.search(lowered))
    faster = bool(_TOO_SLOW.search(lowered) or _FASTER.search(lowered))
    if _TOO_FAST.search(lowered) or _TOO_SLOW.search(lowered):
        slower, faster = bool(_TOO_FAST.search(lowered)), bool(_TOO_SLOW.search(lowered))
    absolute = SPEED_VALUE.search(lowered)
    multiple = _MULTIPLE.search(lowered)
    if not (absolute or slower or faster or (multiple and "speed" in lowered)):
        return None
    rest = SPEED_VALUE.sub(" ", _MULTIPLE.sub(" ", lowered))
    rest = re.sub(r"\b(slow (it )?down|speed (it )?up|hurry up)\b", " ", rest)
    if any(w not in _SPEED_WORDS for w in words_of(rest)):
        return None  # speed plus something else ("lower it slowly"): the planner's job
    if absolute:
        return Correction("speed", text, speed=_absolute_speed(absolute))
    if multiple:
        return Correction("speed", text, factor=_multiple(multiple, slower))
    if slower == faster:
        return None
    strength = _strength(lowered)
    factors = (
        {"strong": 0.3, "mild": 0.75, "normal": 0.5}
        if slower
        else {"strong": 2.0, "mild": 1.25, "normal": 1.5}
    )
    return Correction("speed", text, factor=factors[strength])


def _absolute_speed(match: re.Match) -> float:
    speed = parse_number(match.group(1)) * UNITS[unit_name(match.group(2))]
    if not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]:
        raise CorrectionError(
            f"a speed of {speed:g} m/s is outside [{SPEED_RANGE[0]:g}, {SPEED_RANGE[1]:g}] m/s"
        )
    return round(speed, 6)


def _multiple(match: re.Match, slower: bool) -> float:
    factor = {"half": 0.5, "twice": 2.0, "double": 2.0}.get(match.group(1))
    factor = factor or float(match.group(2))
    if slower and factor > 1:  # "2 times slower"
        factor = 1 / factor
    if not FACTOR_RANGE[0] <= factor <= FACTOR_RANGE[1]:
        raise CorrectionError(
            f"a speed factor of {factor:g} is outside [{FACTOR_RANGE[0]:g}, {FACTOR_RANGE[1]:g}]"
        )
    return round(factor, 6)


def _strength(lowered: str) -> str:
    if SIZE_WORDS[0][0].search(lowered) or re.search(r"\b(a )?(little|bit)\b", lowered):
        return "mild"
    if re.search(r"\b(much|way|a lot|lots|far)\b", lowered):
        return "strong"
    return "normal"
