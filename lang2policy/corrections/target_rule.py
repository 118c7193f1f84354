"""The target rule: "no, the blue one", "the yellow bowl", "the other block".

A text naming an object is a target change only with a cue ("no", "not", "instead", "I meant",
"the blue one") and nothing but the object; the object is resolved against the scene and the
objects the running plan acts on, which also say which object it replaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lang2policy.corrections.correction import Correction
from lang2policy.corrections.vocabulary import FILLERS, vocab, words_of
from lang2policy.errors import UnknownObjectError
from lang2policy.scene.objects import COLORS, KINDS

_TARGET_CUE = re.compile(
    r"^(no|nope|not|wrong|i meant|i mean|meant|i said|actually|sorry|"
    r"other)\b|\b(instead|the other|i meant|i wanted|i said|wrong one)\b"
)
_TARGET_WORDS = FILLERS | vocab(
    "not wrong one instead i meant mean said want wanted other use take pick grab get lift "
    "choose for of with and but rather than object thing"
)
_KIND_SYNONYMS = {"cube": "block", "box": "block", "dish": "bowl", "cup": "bowl"}


@dataclass(frozen=True)
class _Mention:
    color: str | None
    kind: str | None
    negated: bool
    span: tuple[int, int]


def target_correction(
    text: str, lowered: str, objects: list[str], acting: list[str]
) -> Correction | None:
    """A target change when ``lowered`` names one object with a cue and nothing else; None
    when it names no object or more than an object (a longer request: the planner's job)."""
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
    clean = all(w in _TARGET_WORDS for w in words_of(rest))
    cue = (
        _TARGET_CUE.search(lowered)
        or re.search(r"\bone\b", lowered)
        or any(m.negated for m in mentions)  # "the blue block, not the red block"
        or all(w in FILLERS for w in words_of(rest))  # just the object: "the blue block"
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
