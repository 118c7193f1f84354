"""Deterministic classification of a correction: stop, speed, offset, target change or re-plan.

A correction is routed by what it asks for instead of being re-prompted to an LLM:

==========  ==========================================  ======================================
kind        examples                                    carries
==========  ==========================================  ======================================
stop        "stop", "halt!", "freeze", "wait"           nothing (no LLM, no edit: halt now)
speed       "slower", "much faster", "at 3 cm/s"        ``factor`` or an absolute ``speed``
offset      "a bit to the left", "3 cm higher"          ``offset`` (dx, dy, dz) in metres
target      "no, the blue one", "the yellow bowl"       ``target`` (+ ``replaces`` if known)
replan      anything else                               the text, for the planner
==========  ==========================================  ======================================

Frame: the arm sits at the origin reaching toward +x; for a person behind it, left is +y, right
-y, forward / away / further +x, closer / back -x, up / higher +z. "too far left" asks for the
opposite direction. Sizes: "slightly" / "a touch" 1 cm, "a little" 1.5 cm, "a bit" (or none)
2 cm, "a lot" / "much" 5 cm; an explicit "3 cm" / "30 mm" / "0.03 m" wins.

The rules only claim what they fully understand: speed and offset corrections must consist of
their own words and fillers (so "lower it slowly" is left to the planner), and a text naming an
object is a target change only with a cue ("no", "not", "instead", "I meant", "the blue one")
and nothing but the object. Everything else is ``replan``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lang2policy.errors import Lang2PolicyError, UnknownObjectError
from lang2policy.instruction_text import text_problem
from lang2policy.scene.objects import COLORS, KINDS

KINDS_OF_CORRECTION = ("stop", "speed", "offset", "target", "replan")
MAX_TEXT = 300
MAX_NAME = 80  # characters of an object name in a correction
MAX_OFFSET = 0.15  # m per axis: more than this is a new goal, not a correction
SPEED_RANGE = (0.005, 1.0)  # m/s, for absolute speeds
FACTOR_RANGE = (0.05, 5.0)

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
_UNITS = {
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
_DISTANCE = re.compile(rf"\b{_NUM}\s*{_UNIT}(?![a-z/])")
_SPEED_VALUE = re.compile(rf"\b{_NUM}\s*{_UNIT}\s*(?:/|per\s*)\s*(?:s|sec|second)s?\b")

_STOP = re.compile(r"\b(stop|halt|freeze|abort|e-?stop|emergency)\b")
_NOT_STOP = re.compile(r"\b(don'?t|do not|never|no need to)\s+(stop|halt|freeze)\b")
_PAUSE = re.compile(r"^(wait|hold on|hold it|cancel|whoa|woah)\b")


def _vocab(words: str) -> frozenset[str]:
    return frozenset(words.split())


_FILLERS = _vocab(
    "no nope ok okay oh uh um hmm hey please just now again still it its it's that this the "
    "a an you your robot arm gripper hand tool bit be is was go move put bring make do can "
    "could would should try keep needs need to me my so more yes yeah sorry actually"
)
# Sizes of an offset by the words that qualify it (checked in this order).
_SIZE_WORDS = (
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
    _FILLERS
    | set(_AXES)
    | set(_TOO)
    | _vocab(
        "slightly touch tad hair tiny tiniest smidge teeny lot lots much way far good little too "
        "of over on side and then bit shift nudge position target spot point aim mm cm m "
        "millimeters millimetres centimeters centimetres meters metres inches by about around "
        "than there from make get come some somewhat us base"
    )
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
_SPEED_WORDS = _FILLERS | _vocab(
    "slower slow slowly faster speed quicker quickly hurry too fast quick careful carefully "
    "gently gentle gentler easy calm calmer rapid rapidly pace much way lot lots far bit little "
    "slightly touch tad somewhat as at with of even than and"
)
_TARGET_CUE = re.compile(
    r"^(no|nope|not|wrong|i meant|i mean|meant|i said|actually|sorry|"
    r"other)\b|\b(instead|the other|i meant|i wanted|i said|wrong one)\b"
)
_TARGET_WORDS = _FILLERS | _vocab(
    "not wrong one instead i meant mean said want wanted other use take pick grab get lift "
    "choose for of with and but rather than object thing"
)
_KIND_SYNONYMS = {"cube": "block", "box": "block", "dish": "bowl", "cup": "bowl"}


class CorrectionError(Lang2PolicyError):
    """A correction is malformed or cannot be applied; the message says what would work."""


@dataclass(frozen=True)
class Correction:
    """One classified correction; the fields that do not belong to its ``kind`` are None."""

    kind: str
    text: str
    factor: float | None = None  # speed: multiply the speed (limit) by this
    speed: float | None = None  # speed: an absolute speed in m/s instead of a factor
    offset: tuple[float, float, float] | None = None  # offset: (dx, dy, dz) in metres
    target: str | None = None  # target: the scene object meant
    replaces: str | None = None  # target: the object it replaces, when it is known

    def __post_init__(self) -> None:
        """Every correction, classified or read back from the memory, is within the ranges the
        rules produce: a record on disk cannot carry a 5 m offset or a 50 m/s speed."""
        if self.kind not in KINDS_OF_CORRECTION:
            raise CorrectionError(
                f"unknown correction kind {self.kind!r}; kinds: {list(KINDS_OF_CORRECTION)}"
            )
        if not isinstance(self.text, str) or len(self.text) > MAX_TEXT:
            raise CorrectionError(
                f"a correction's text is a string of at most {MAX_TEXT} characters"
            )
        _check_in_range(self.factor, FACTOR_RANGE, "speed factor")
        _check_in_range(self.speed, SPEED_RANGE, "speed (m/s)")
        if self.offset is not None:
            for value in self.offset:
                _check_in_range(value, (-MAX_OFFSET, MAX_OFFSET), "offset per axis (m)")
        for name in (self.target, self.replaces):
            if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME):
                raise CorrectionError(
                    f"an object name is a string of at most {MAX_NAME} characters"
                )

    def edit(self) -> dict[str, Any]:
        """The edit as JSON data: the kind's own fields, without the text."""
        fields = {
            "factor": self.factor,
            "speed": self.speed,
            "target": self.target,
            "replaces": self.replaces,
            "offset": list(self.offset) if self.offset is not None else None,
        }
        return {k: v for k, v in fields.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.edit()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Correction:
        """The inverse of ``to_dict`` (records read back from the memory), checked."""
        if not isinstance(data, Mapping) or data.get("kind") not in KINDS_OF_CORRECTION:
            raise CorrectionError(
                f"a correction needs a 'kind' in {list(KINDS_OF_CORRECTION)}; got {data!r:.200}"
            )
        unknown = set(data) - {"kind", "text", "factor", "speed", "offset", "target", "replaces"}
        if unknown:
            raise CorrectionError(f"unknown correction fields {sorted(unknown)}")
        offset = data.get("offset")
        if offset is not None:
            if not isinstance(offset, list | tuple) or len(offset) != 3:
                raise CorrectionError(f"offset must be [dx, dy, dz] in metres, got {offset!r}")
            offset = tuple(_finite(v, "offset") for v in offset)
        return cls(
            kind=data["kind"],
            text=str(data.get("text", "")),
            factor=_optional(data.get("factor"), "factor"),
            speed=_optional(data.get("speed"), "speed"),
            offset=offset,  # type: ignore[arg-type]
            target=_name(data.get("target"), "target"),
            replaces=_name(data.get("replaces"), "replaces"),
        )

    def describe(self) -> str:
        """A short human description: "offset 2.0 cm left", "speed x0.5", "target blue block"."""
        if self.kind == "offset" and self.offset is not None:
            return "offset " + describe_offset(self.offset)
        if self.kind == "speed":
            return (
                f"speed {self.speed:g} m/s" if self.speed is not None else f"speed x{self.factor:g}"
            )
        if self.kind == "target":
            swap = f"{self.replaces} -> " if self.replaces else ""
            return f"target {swap}{self.target}"
        return self.kind if self.kind == "stop" else f"replan: {self.text}"


def _check_in_range(value: float | None, bounds: tuple[float, float], name: str) -> None:
    if value is None:
        return
    low, high = bounds
    if not (isinstance(value, int | float) and math.isfinite(value) and low <= value <= high):
        raise CorrectionError(f"{name} must be within [{low:g}, {high:g}], got {value!r:.40}")


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CorrectionError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _name(value: object, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise CorrectionError(f"{name} must be an object name, got {value!r:.80}")
    return value


def _optional(value: object, name: str) -> float | None:
    return None if value is None else _finite(value, name)


def describe_offset(offset: Sequence[float]) -> str:
    """ "2.0 cm left, 1.0 cm up" for (0, 0.02, 0.01)."""
    names = (("forward", "closer"), ("left", "right"), ("up", "down"))
    parts = [
        f"{abs(v) * 100:.1f} cm {names[i][0] if v > 0 else names[i][1]}"
        for i, v in enumerate(offset)
        if abs(v) > 1e-9
    ]
    return ", ".join(parts) or "none"


# --------------------------------------------------------------------------- the rules
def classify(text: str, scene_objects: Sequence[str], acting_on: Sequence[str] = ()) -> Correction:
    """Classify ``text``; ``scene_objects`` resolve target changes, ``acting_on`` (the objects
    the running plan uses) picks the kind meant by "the blue one" and what it replaces.

    Raises ``CorrectionError`` for bad input or sizes, ``UnknownObjectError`` (listing the
    objects) for a target change that names no single object of the scene.
    """
    text = check_text(text)
    objects = _check_objects(scene_objects, "scene_objects")
    acting = _check_objects(acting_on, "acting_on")
    lowered = _normalise(text)
    if _is_stop(lowered):
        return Correction("stop", text)
    lowered = _PAUSE.sub("", lowered).strip(" ,;") or lowered
    target = _target(text, lowered, objects, acting)
    if target is not None:
        return target
    for rule in (_speed, _offset):
        found = rule(text, lowered)
        if found is not None:
            return found
    return Correction("replan", text)


def check_text(text: object) -> str:
    """The correction, stripped; a clear error when it is not text, empty, too long or has
    control characters."""
    if not isinstance(text, str):
        raise CorrectionError(f"a correction must be text, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise CorrectionError(
            "the correction is empty; say what to change, e.g. 'a bit to "
            "the left', 'slower', 'no, the blue one' or 'stop'"
        )
    if len(text) > MAX_TEXT:
        raise CorrectionError(
            f"the correction has {len(text)} characters; at most {MAX_TEXT} "
            "are allowed (give a longer request as a new instruction)"
        )
    problem = text_problem(text, "correction")  # the one check of typed text
    if problem is not None:
        raise CorrectionError(problem)
    return text


def _check_objects(objects: object, name: str) -> list[str]:
    if isinstance(objects, str) or not isinstance(objects, Iterable):
        raise CorrectionError(f"{name} must be a list of object names, got {objects!r:.80}")
    names = list(objects)
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise CorrectionError(f"{name} must hold non-empty object names, got {names!r:.200}")
    return names


def _normalise(text: str) -> str:
    lowered = text.lower().replace("’", "'").replace("grey", "gray")
    lowered = re.sub(r"[!?\"()]+|\.(?!\d)", " ", lowered)
    return " ".join(lowered.split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text)


def _is_stop(lowered: str) -> bool:
    if _STOP.search(lowered) and not _NOT_STOP.search(lowered):
        return True
    rest = _PAUSE.sub("", lowered).strip(" ,;")
    return bool(_PAUSE.search(lowered)) and all(w in _FILLERS for w in _words(rest))


# --------------------------------------------------------------------------- speed
def _speed(text: str, lowered: str) -> Correction | None:
    slower = bool(_TOO_FAST.search(lowered) or _SLOWER.search(lowered))
    faster = bool(_TOO_SLOW.search(lowered) or _FASTER.search(lowered))
    if _TOO_FAST.search(lowered) or _TOO_SLOW.search(lowered):
        slower, faster = bool(_TOO_FAST.search(lowered)), bool(_TOO_SLOW.search(lowered))
    absolute = _SPEED_VALUE.search(lowered)
    multiple = _MULTIPLE.search(lowered)
    if not (absolute or slower or faster or (multiple and "speed" in lowered)):
        return None
    rest = _SPEED_VALUE.sub(" ", _MULTIPLE.sub(" ", lowered))
    rest = re.sub(r"\b(slow (it )?down|speed (it )?up|hurry up)\b", " ", rest)
    if any(w not in _SPEED_WORDS for w in _words(rest)):
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
    speed = _number(match.group(1)) * _UNITS[_unit(match.group(2))]
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
    if _SIZE_WORDS[0][0].search(lowered) or re.search(r"\b(a )?(little|bit)\b", lowered):
        return "mild"
    if re.search(r"\b(much|way|a lot|lots|far)\b", lowered):
        return "strong"
    return "normal"


def _number(token: str) -> float:
    return float(_NUMBER_WORDS[token]) if token in _NUMBER_WORDS else float(token)


def _unit(token: str) -> str:
    for unit in ("mm", "cm", "inch"):
        if token.startswith(unit):
            return unit
    if token.startswith("milli"):
        return "mm"
    if token.startswith("centi"):
        return "cm"
    return "m"


# --------------------------------------------------------------------------- offset
def _offset(text: str, lowered: str) -> Correction | None:
    if any(w not in _OFFSET_WORDS for w in _words(_DISTANCE.sub(" ", lowered))):
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
    words = _words(segment)
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
    explicit = _DISTANCE.search(segment)
    if explicit:
        return _number(explicit.group(1)) * _UNITS[_unit(explicit.group(2))]
    for pattern, size in _SIZE_WORDS:
        if pattern.search(segment):
            return size
    return _DEFAULT_STEP


# --------------------------------------------------------------------------- target
@dataclass(frozen=True)
class _Mention:
    color: str | None
    kind: str | None
    negated: bool
    span: tuple[int, int]


def _target(text: str, lowered: str, objects: list[str], acting: list[str]) -> Correction | None:
    colors = sorted({*COLORS, *(o.split()[0] for o in objects)}, key=len, reverse=True)
    kinds = sorted(
        {*KINDS, *_KIND_SYNONYMS, *(o.split()[-1] for o in objects)}, key=len, reverse=True
    )
    mentions = _mentions(lowered, colors, kinds)
    other = re.search(r"\bthe other (one|block|bowl|cube)\b", lowered)
    if not mentions and not other:
        return None
    positive = [m for m in mentions if not m.negated]
    rest = lowered
    for m in sorted(mentions, key=lambda m: -m.span[0]):
        rest = rest[: m.span[0]] + " " + rest[m.span[1] :]
    clean = all(w in _TARGET_WORDS for w in _words(rest))
    cue = (
        _TARGET_CUE.search(lowered)
        or re.search(r"\bone\b", lowered)
        or any(m.negated for m in mentions)  # "the blue block, not the red block"
        or all(w in _FILLERS for w in _words(rest))  # just the object: "the blue block"
    )
    if not clean or not cue or len(positive) > 1 or (not positive and not other):
        return None  # names objects in a longer request: the planner's job
    if not positive:
        return _other(text, lowered, objects, acting)
    meant = _resolve(positive[0], objects, acting, text)
    negated = [m for m in mentions if m.negated]
    replaces = _resolve_replaced(negated, meant, objects, acting)
    return Correction("target", text, target=meant, replaces=replaces)


def _mentions(lowered: str, colors: list[str], kinds: list[str]) -> list[_Mention]:
    pattern = re.compile(
        rf"\b(?:({'|'.join(map(re.escape, colors))})\s*({'|'.join(map(re.escape, kinds))}|one)?"
        rf"|({'|'.join(map(re.escape, kinds))}))s?\b"
    )
    found = []
    for match in pattern.finditer(lowered):
        color = match.group(1)
        kind = match.group(2) or match.group(3)
        kind = None if kind == "one" else _KIND_SYNONYMS.get(kind or "", kind)
        before = lowered[: match.start()]
        negated = bool(
            re.search(
                r"(\bnot|\bnot that|\binstead of|\brather than|\bisn't|"
                r"\bnot the|\bwrong)\s+(the\s+|that\s+)?$",
                before,
            )
        )
        found.append(_Mention(color, kind, negated, match.span()))
    return found


def _resolve(mention: _Mention, objects: list[str], acting: list[str], text: str) -> str:
    said = " ".join(p for p in (mention.color, mention.kind) if p) or "that"
    candidates = [o for o in objects if _matches(o, mention)]
    if len(candidates) > 1:
        kinds = {_kind(a) for a in acting}
        same_kind = [o for o in candidates if _kind(o) in kinds]
        unused = [o for o in (same_kind or candidates) if o not in acting]
        candidates = same_kind if len(same_kind) == 1 else unused or same_kind or candidates
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise UnknownObjectError(
            f"'{text}': there is no {said} on the table; objects: {sorted(objects)}"
        )
    raise UnknownObjectError(
        f"'{text}': '{said}' could be any of {sorted(candidates)}; say "
        f"which (objects: {sorted(objects)})"
    )


def _matches(name: str, mention: _Mention) -> bool:
    words = name.split()
    return (mention.color is None or words[0] == mention.color) and (
        mention.kind is None or words[-1] == mention.kind
    )


def _kind(name: str) -> str:
    return name.split()[-1]


def _resolve_replaced(
    negated: list[_Mention], meant: str, objects: list[str], acting: list[str]
) -> str | None:
    """The object the correction swaps out: the one named after "not", else the only object
    of the meant object's kind that the plan acts on."""
    for mention in negated:
        named = [o for o in objects if _matches(o, mention) and o != meant]
        if len(named) == 1:
            return named[0]
    same_kind = [a for a in acting if _kind(a) == _kind(meant) and a != meant]
    return same_kind[0] if len(same_kind) == 1 else None


def _other(text: str, lowered: str, objects: list[str], acting: list[str]) -> Correction:
    """ "the other one": the single scene object of the acted-on kind the plan does not use."""
    said = re.search(r"\bthe other (one|block|bowl|cube)\b", lowered).group(1)  # type: ignore
    kinds = {_KIND_SYNONYMS.get(said, said)} if said != "one" else {_kind(a) for a in acting}
    candidates = [o for o in objects if _kind(o) in kinds and o not in acting]
    if len(candidates) != 1 or not acting:
        raise UnknownObjectError(
            f"'{text}': cannot tell which object 'the other {said}' is "
            f"(the plan acts on {acting or 'nothing'}); name it, e.g. "
            f"'the blue block'; objects: {sorted(objects)}"
        )
    replaced = [a for a in acting if _kind(a) == _kind(candidates[0])]
    return Correction(
        "target", text, target=candidates[0], replaces=replaced[0] if len(replaced) == 1 else None
    )
