"""The words corrections are made of: numbers, units, distances, sizes and fillers.

Shared by the speed, offset and target rules: ``words_of`` splits a normalised text into words,
``FILLERS`` are the words every rule lets through, and a distance ("3 cm", "thirty mm") is a
number (``parse_number``) times a unit (``UNITS[unit_name(...)]``).
"""

from __future__ import annotations

import re

_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "half": 0.5,
}
UNITS = {
    "mm": 0.001,
    "millimeter": 0.001,
    "millimetre": 0.001,
    "cm": 0.01,
    "centimeter": 0.01,
    "centimetre": 0.01,
    "m": 1.0,
    "meter": 1.0,
    "metre": 1.0,
    "inch": 0.0254,
}
_NUM = r"(\d+(?:\.\d+)?|" + "|".join(_NUMBER_WORDS) + r")"
_UNIT = r"(mm|millimet(?:er|re)s?|cm|centimet(?:er|re)s?|m|met(?:er|re)s?|inch(?:es)?)"
DISTANCE = re.compile(rf"\b{_NUM}\s*{_UNIT}(?![a-z/])")
SPEED_VALUE = re.compile(rf"\b{_NUM}\s*{_UNIT}\s*(?:/|per\s*)\s*(?:s|sec|second)s?\b")


def vocab(words: str) -> frozenset[str]:
    return frozenset(words.split())


FILLERS = vocab(
    "no nope ok okay oh uh um hmm hey please just now again still it its it's that this the "
    "a an you your robot arm gripper hand tool bit be is was go move put bring make do can "
    "could would should try keep needs need to me my so more yes yeah sorry actually"
)
# Sizes of an offset by the words that qualify it (checked in this order).
SIZE_WORDS = (
    (
        re.compile(
            r"\b(slightly|a touch|touch|a tad|tad|a hair|hair|tiny|tiniest|smidge|"
            r"teeny)\b"
        ),
        0.01,
    ),
    (re.compile(r"\b(a lot|lots|much|way|far more|a good bit|loads|plenty)\b"), 0.05),
    (re.compile(r"\b(a little|little)\b"), 0.015),
)


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text)


def parse_number(token: str) -> float:
    return float(_NUMBER_WORDS[token]) if token in _NUMBER_WORDS else float(token)


def unit_name(token: str) -> str:
    for unit in ("mm", "cm", "inch"):
        if token.startswith(unit):
            return unit
    if token.startswith("milli"):
        return "mm"
    if token.startswith("centi"):
        return "cm"
    return "m"
