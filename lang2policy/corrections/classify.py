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

import re
from collections.abc import Iterable, Sequence

from lang2policy.corrections.correction import MAX_TEXT, Correction, CorrectionError
from lang2policy.corrections.offset_rule import offset_correction
from lang2policy.corrections.speed_rule import speed_correction
from lang2policy.corrections.target_rule import target_correction
from lang2policy.corrections.vocabulary import FILLERS, words_of
from lang2policy.instruction_text import text_problem

_STOP = re.compile(r"\b(stop|halt|freeze|abort|e-?stop|emergency)\b")
_NOT_STOP = re.compile(r"\b(don'?t|do not|never|no need to)\s+(stop|halt|freeze)\b")
_PAUSE = re.compile(r"^(wait|hold on|hold it|cancel|whoa|woah)\b")


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
    target = target_correction(text, lowered, objects, acting)
    if target is not None:
        return target
    for rule in (speed_correction, offset_correction):
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


def _is_stop(lowered: str) -> bool:
    if _STOP.search(lowered) and not _NOT_STOP.search(lowered):
        return True
    rest = _PAUSE.sub("", lowered).strip(" ,;")
    return bool(_PAUSE.search(lowered)) and all(w in FILLERS for w in words_of(rest))
