"""Reading a compound request from an instruction's words, for the plan's goal (``goals``).

``read_request(instruction, objects, kinds)`` recognises six kinds of request that one
relation ("the red block in the yellow bowl") cannot state, so that ``goals.state_goal`` can
check what the person asked for instead of what the program happened to do:

* ``all_in_bowl``: every block into one named bowl ("put all the blocks in the orange bowl",
  "gather every block inside the brown bowl");
* ``matching``: each block into the bowl of its colour ("... the bowls with matching colors",
  "sort the blocks into the bowls by color");
* ``tower``: all the blocks in one tower, no destination named ("stack all the blocks",
  "build a single tower out of all the blocks");
* ``beside``: a block next to an object, on one side of it ("put the red block to the left of
  the green bowl", "move the purple block next to the pink bowl, on its right");
* ``line``: the blocks in a line, maybe of a named orientation ("arrange the blocks in a
  diagonal line", "make a horizontal row out of the blocks");
* ``corner``: a block at a corner, side or the centre of the table ("put the red block in the
  top left corner", "move the red block to the top side").

Directions are the robot's (``skills.geometry``): "top" is the far side of the table (+x),
"left" is +y. The reading is deliberately narrow: a request with several steps ("then",
"and put ..."), exceptions ("but", "except"), or objects named in a way that fits none of the
kinds exactly gives None, and the caller falls back to its simpler rules instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Words that make the request something these readings should not guess at: several steps,
# exceptions, conditions, choices.
_UNSURE = re.compile(
    r"\b(then|after|afterwards|before|except|but|other than|apart from|besides|not|dont|"
    r"never|unless|if|without|only|or|first|last|and (put|place|move|stack|pile|push|set|"
    r"take|drop|pick|bring|arrange|line|make|build|sort|go|return|say|lift|turn))\b"
)
# "all the blocks", "every block", "each block", "the blocks", "all of the blocks", "both ..."
_ALL_BLOCKS = re.compile(
    r"\b(all|every|each|both)( of)?( the)? blocks?\b|\bthe blocks\b|\ball blocks\b"
    r"|\b(stack|pile|line( up)?|arrange|gather|collect|sort|put|place|move) blocks\b"
)
_MATCHING = re.compile(
    r"\b(matching|same color|by color|by their colors?|(its|their)( own)? colors?|"
    r"corresponding|colors? match(es)?|according to (their )?colors?)\b"
)
_TOWER = re.compile(
    r"\b(stack|stacks|stacked|stacking|pile|piles|piled|piling|tower|towers)\b"
    r"|\bon top of (each other|one another)\b"
)
_LINE = re.compile(r"\b(a|one|the|single) (single )?((\w+) )?(line|row)\b|\bline (\w+ ){0,4}?up\b")
_ORIENTATION = re.compile(r"\b(horizontal|vertical|diagonal)(ly)?\b")
_DIRECTION_WORDS = r"left|right|top|bottom|upper|lower|far|near|back|front|rear"
_DIRECTION = {
    "left": "left",
    "right": "right",
    "top": "top",
    "upper": "top",
    "far": "top",
    "back": "top",
    "rear": "top",
    "bottom": "bottom",
    "lower": "bottom",
    "near": "bottom",
    "front": "bottom",
}
_VERTICAL = ("top", "bottom", "upper", "lower", "far", "near", "back", "front")
_CORNER = re.compile(
    rf"\b(in|into|to|at|on|onto|toward|towards)( the)? "
    rf"(?P<c>(({'|'.join(_VERTICAL)}) (left|right))|((left|right) ({'|'.join(_VERTICAL)}))"
    rf"|({_DIRECTION_WORDS})"
    rf"|middle|center|centre)"
    rf"(?P<w> (hand )?(corner|side|edge|part|half|area))?"
    rf"(?P<of> of( the)? (table|tabletop|workspace))?\b"
)
# An object named as a reference point: the request places something relative to it.
_RELATIVE = (
    r"(next to|beside|alongside|near|close to|behind|front of|by|"
    rf"({_DIRECTION_WORDS}|side|edge)( hand)?( side)? of)( the)? "
)
# Words before an object's name that make it a reference, not the thing to move.
_REFERRING = re.compile(
    r"\b(closest|nearest|farthest|furthest|near|next|beside|behind|left|right|top|bottom|of|"
    r"from|by|with|than|to)\b"
)


@dataclass(frozen=True)
class Request:
    """What a compound instruction asks for.

    ``pairs``: (block, bowl) pairs that must hold ``is_in`` (``all_in_bowl``, ``matching``);
    ``blocks``: the blocks of a ``tower`` or a ``line``; ``subject``/``reference``: the block to
    place and the object it goes beside (``beside``), or the block alone (``corner``);
    ``place``: the direction (``beside``), the line's orientation or "" (``line``), the corner
    name as ``skills.geometry.corner_point`` takes it (``corner``), the direction key of an
    ``offset`` (``spatial_phrases``); ``blocks`` also lists the blocks to return (``back``)."""

    kind: str  # "all_in_bowl" | "matching" | "tower" | "beside" | "line" | "corner", and
    # the spatial vocabulary's "offset" | "between" | "back" (``spatial_phrases``)
    pairs: tuple[tuple[str, str], ...] = ()
    blocks: tuple[str, ...] = ()
    subject: str = ""
    reference: str = ""
    place: str = ""
    other: str = ""  # "between": the second reference
    distance: float = 0.0  # "offset": metres


def read_request(instruction: str, objects: Sequence[str], kinds: dict[str, str]) -> Request | None:
    """The compound request ``instruction`` makes on a table with ``objects`` (``kinds``: name
    -> "block" | "bowl"; a name missing there is judged by its last word), or None when it
    makes none of the six, or it is not clear which."""
    text = normalise(instruction)
    if _UNSURE.search(text):
        return None
    named = named_in(text, objects)
    blocks = tuple(o for o in objects if kind_of(o, kinds) == "block")
    beside = _beside(text, named, kinds)
    if beside is not None:
        return beside
    if any(re.search(rf"\b{_RELATIVE}{re.escape(n)}\b", text) for n in named):
        return None  # placed relative to an object, but not in a way read above
    if _table_places(text):  # a spot of the table: only one named block can go there
        return _corner(text, named, kinds)
    for reader in (_matching, _line, _tower, _all_in_bowl):
        found = reader(text, named, blocks, objects, kinds)
        if found is not None:
            return found
    return None


def normalise(instruction: str) -> str:
    """Lower case, one space between words, punctuation and hyphens as spaces, "colour"
    spelled "color"."""
    text = re.sub(r"[^\w\s']", " ", instruction.lower()).replace("'", "")
    text = re.sub(r"\bcolour", "color", text)
    return " ".join(text.split())


def named_in(text: str, objects: Sequence[str]) -> list[str]:
    """The objects ``text`` (normalised) names, in the order it names them."""
    found = []
    for name in objects:
        match = re.search(rf"\b{re.escape(normalise(name))}\b", text)
        if match:
            found.append((match.start(), name))
    return [name for _, name in sorted(found)]


def kind_of(name: str, kinds: dict[str, str]) -> str:
    """ "block" or "bowl": from ``kinds``, else from the name's last word."""
    return kinds.get(name) or name.split()[-1]


def _subject_first(text: str, named: list[str]) -> bool:
    """The first named object is the thing to move: nothing before it refers to another one
    ("put the red block ..." but not "put the block closest to the red block ...")."""
    return not _REFERRING.search(text[: text.find(normalise(named[0]))])


def _beside(text: str, named: list[str], kinds: dict[str, str]) -> Request | None:
    """A named block placed on one side of another named object."""
    if len(named) != 2 or _ALL_BLOCKS.search(text) or not _subject_first(text, named):
        return None
    subject, reference = named
    if kind_of(subject, kinds) != "block":
        return None
    ref = re.escape(normalise(reference))
    found = set()
    for match in re.finditer(
        rf"\b(?P<pre>(to|on|at|onto|toward|towards) )?(the )?(?P<d>{_DIRECTION_WORDS})"
        rf"(?P<hand> hand)?(?P<side> (side|edge))? of( the)? {ref}\b",
        text,
    ):
        word = match["d"]
        if word == "front" and text[: match.start()].endswith("in "):
            continue  # "in front of": read below
        sideways = word in ("left", "right")
        # "to the top of the green bowl" is beside it; "to the top of the green block" stacks
        to_the = (match["pre"] or "").startswith("to") and "the " in match[0]
        of_bowl = to_the and word in _VERTICAL and kind_of(reference, kinds) == "bowl"
        if match["side"] or (sideways and not match["hand"]) or of_bowl:
            found.add(_DIRECTION[word])
        else:
            return None  # "on top of the green block", "the bottom of the bowl": not beside
    if re.search(rf"\bbehind( the)? {ref}\b", text):
        found.add("top")
    if re.search(rf"\bin front of( the)? {ref}\b", text):
        found.add("bottom")
    near = re.search(rf"\b(next to|beside|alongside|by|near|close to)( the)? {ref}\b", text)
    if near:
        for match in re.finditer(
            rf"\b(on|to|at|toward|towards) (its|the) (?P<d>{_DIRECTION_WORDS})( hand)?"
            rf"( side| edge)?\b(?! of)",
            text,
        ):
            found.add(_DIRECTION[match["d"]])
    if len(found) != 1:
        return None
    return Request("beside", subject=subject, reference=reference, place=found.pop())


def _table_places(text: str) -> list[re.Match]:
    """The phrases of ``text`` that name a spot of the table: a corner, a side, the centre
    ("on top of each other" is none)."""
    return [
        m
        for m in _CORNER.finditer(text)
        if m["w"] or m["of"] or m["c"] in ("middle", "center", "centre")
    ]


def _corner(text: str, named: list[str], kinds: dict[str, str]) -> Request | None:
    """One named block at a corner or side of the table, or at its centre."""
    if len(named) != 1 or _ALL_BLOCKS.search(text) or kind_of(named[0], kinds) != "block":
        return None
    if not _subject_first(text, named):
        return None
    places = set()
    for match in _table_places(text):
        if text[match.end() :].startswith(" of") and not match["of"]:
            return None  # "the left side of something else"
        words = match["c"].split()
        if words[0] in ("middle", "center", "centre"):
            places.add("center")
            continue
        corner = "corner" in (match["w"] or "")
        if (len(words) == 1 and corner) or (len(words) == 2 and match["w"] and not corner):
            return None  # "the left corner", "the top left side": not clear which spot
        names = {_DIRECTION[w] for w in words}
        if len(names) != len(words):
            return None  # "the top bottom corner"
        places.add(" ".join(sorted(names, key=("top", "bottom", "left", "right").index)))
    if len(places) != 1:
        return None
    place = places.pop()
    if place == "left right" or place == "top bottom":
        return None
    return Request("corner", subject=named[0], place=place)


def _matching(text, named, blocks, objects, kinds) -> Request | None:
    """Blocks into the bowls of their own colours."""
    if not (_MATCHING.search(text) and re.search(r"\bbowls?\b", text)):
        return None
    if any(kind_of(n, kinds) != "block" for n in named):
        return None  # a named bowl: which block goes where is not the colours' rule
    chosen = named or (blocks if _ALL_BLOCKS.search(text) or "blocks" in text.split() else [])
    pairs = []
    for block in chosen:
        bowl = block[: -len("block")] + "bowl" if block.endswith("block") else ""
        if bowl in objects:
            pairs.append((block, bowl))
    return Request("matching", pairs=tuple(pairs)) if pairs else None


def _line(text, named, blocks, objects, kinds) -> Request | None:
    """All the blocks in a line (of a named orientation, or any)."""
    if named or not _LINE.search(text) or not _ALL_BLOCKS.search(text) or _TOWER.search(text):
        return None
    orientations = {m[1] for m in _ORIENTATION.finditer(text)}
    if len(orientations) > 1 or len(blocks) < 2:
        return None
    return Request("line", blocks=blocks, place=orientations.pop() if orientations else "")


def _tower(text, named, blocks, objects, kinds) -> Request | None:
    """All the blocks in one tower, nowhere in particular."""
    if named or not _TOWER.search(text) or not _ALL_BLOCKS.search(text) or len(blocks) < 2:
        return None
    return Request("tower", blocks=blocks)


def _all_in_bowl(text, named, blocks, objects, kinds) -> Request | None:
    """Every block into the one bowl named as the destination."""
    if len(named) != 1 or kind_of(named[0], kinds) != "bowl" or not blocks:
        return None
    if not _ALL_BLOCKS.search(text) or _TOWER.search(text) or _LINE.search(text):
        return None
    bowl = named[0]
    into = rf"\b(in|into|inside|in to|within|to|onto|on|on top of)( the)? {re.escape(bowl)}\b"
    if not re.search(into, text) or _MATCHING.search(text):
        return None
    return Request("all_in_bowl", pairs=tuple((b, bowl) for b in blocks))
