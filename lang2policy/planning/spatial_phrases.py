"""The spatial vocabulary: placements read from an instruction's words, resolved later by code.

Four readings that ``goal_phrases.read_request`` cannot make, so that a placement the person
states by an offset or a relation is planned and checked as stated, never as ``moved(x)``:

* ``offset``: a block moved by a distance in a direction, the number taken from the words
  ("move the red block 10 cm to the left", "shift the blue block a bit closer to the robot",
  "push the green block two inches forward" is not one: pushing is the reward route's);
* ``between``: a block halfway between two named objects ("put the red block between the
  blue bowl and the green bowl", "... in the middle of the two bowls" when there are two);
* ``stack_on``: one named block stacked on another ("stack the red block on the blue block");
* ``back``: a block returned to where it was before the instruction that moved it ("put it
  back", "put the red block back where it was"); the loop knows where that was.

Directions are the robot's (``skills.geometry``): "left" is +y, "forward"/"away" the far side
(+x) of the table; "closer to the robot" and "away from the robot" are along the line from the
base to the block. Sizes without a number: "a bit" 5 cm, "a little"/"slightly" 3 cm, "a lot"
10 cm. Nothing here reads the scene's positions: ``request_programs`` turns a reading into a
spot and a program.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lang2policy.corrections.vocabulary import DISTANCE, UNITS, parse_number, unit_name
from lang2policy.planning.goal_phrases import Request, kind_of, named_in, normalise
from lang2policy.planning.steps import list_names

MAX_OFFSET_METRES = 0.5  # a larger stated offset is surely a misreading: not read
_MOVE = r"(put|place|move|set|bring|take|shift|slide|carry|drop|get|position|nudge)"
# direction word -> (dx, dy) in the robot's frame, or "in"/"out" along the base-block line
_OFFSET_DIRECTIONS: dict[str, object] = {
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
    "forward": (1.0, 0.0),
    "forwards": (1.0, 0.0),
    "ahead": (1.0, 0.0),
    "backward": (-1.0, 0.0),
    "backwards": (-1.0, 0.0),
    "toward me": (-1.0, 0.0),
    "towards me": (-1.0, 0.0),
    "closer to the robot": "in",
    "nearer to the robot": "in",
    "closer to the base": "in",
    "toward the robot": "in",
    "towards the robot": "in",
    "away from the robot": "out",
    "farther from the robot": "out",
    "further from the robot": "out",
    "farther away": "out",
    "further away": "out",
    "away from the base": "out",
}
_SIZES = (
    (re.compile(r"\b(a lot|much|way|far)\b"), 0.10),
    (re.compile(r"\b(a little|little|slightly|a touch|a tad)\b"), 0.03),
    (re.compile(r"\b(a bit|bit|some|somewhat)\b"), 0.05),
)
_BACK = re.compile(
    r"\b(back( where (it|they) (was|were))?|back to (where|its|their) (it|they|original|"
    r"previous|old|start\w*)( \w+)?( (was|were|position|place|spot))?|where (it|they) "
    r"(was|were|came from|started)|to (its|their) (original|previous|old|starting) "
    r"(position|place|spot))\b"
)
_UNDO = re.compile(r"^(undo|undo (that|it)|put (it|them|that|everything) back|put back)$")
_UNSURE = re.compile(r"\b(then|after|before|except|but|not|dont|unless|if|or|and)\b")


def read_spatial(
    instruction: str, objects: Sequence[str], kinds: dict[str, str], last_moved: Sequence[str] = ()
) -> Request | None:
    """The ``offset``, ``between`` or ``back`` request ``instruction`` makes, or None.

    ``last_moved``: the blocks the previous finished instruction moved, which "it" and "them"
    stand for in "put it back"."""
    text = normalise(instruction)
    named = named_in(text, objects)
    back = _back(text, named, kinds, last_moved)
    if back is not None:
        return back
    listed = _list_into(instruction, objects, kinds)  # its "and" joins the list
    if listed is not None or _UNSURE.search(_without_between(text)):
        return listed
    return (
        _between(text, named, objects, kinds)
        or _stack(text, named, kinds)
        or _offset(text, named, kinds)
    )


def _list_into(instruction: str, objects, kinds) -> Request | None:
    """Named blocks, listed, into one bowl ("put the red block and the green block in the
    yellow bowl", "the red, green and blue blocks into the bowl"): each into it, side by side."""
    text = " ".join(re.sub(r"[^\w\s,']", " ", instruction.lower()).split()).replace(" ,", ",")
    into = r"(in|into|inside) (the )?(?P<bowl>.+?)( please)?$"
    match = re.match(rf"^(please )?{_MOVE}( the)? (?P<list>.+?) {into}", text)
    if match is None or not re.search(r"\band\b|,", match["list"]):
        return None
    bowl = match["bowl"]
    names = list_names(match["list"], objects)
    if names is None or bowl not in objects or kind_of(bowl, kinds) != "bowl":
        return None
    return Request("all_in_bowl", pairs=tuple((n, bowl) for n in names))


def _stack(text: str, named, kinds) -> Request | None:
    """One named block stacked on another ("stack the red block on the blue block"): a
    tower of two, the first named on top. The verb must say stacking; "put X on Y" stays
    the LLM's (one relation, as before)."""
    if len(named) != 2 or any(kind_of(n, kinds) != "block" for n in named):
        return None
    top, base = named
    pattern = (
        rf"^(please )?(stack|pile|set|place|put)( the)? {re.escape(top)} "
        rf"(on top of|onto|on)( the)? {re.escape(base)}( please)?$"
    )
    if not re.search(r"\b(stack|pile|on top of)\b", text) or not re.match(pattern, text):
        return None
    return Request("stack_on", blocks=(base, top))


def _back(text: str, named, kinds, last_moved: Sequence[str]) -> Request | None:
    """A block (or the last moved blocks) returned to where it was."""
    if not (_BACK.search(text) or _UNDO.match(text)) or re.search(r"\bthen\b", text):
        return None
    blocks = [n for n in named if kind_of(n, kinds) == "block"]
    if len(blocks) != len(named):
        return None  # "put it back in the bowl": a destination, not a return
    if not blocks:
        if not re.search(r"\b(it|them|that|everything|back)\b", text):
            return None
        blocks = [n for n in last_moved if kind_of(n, kinds) == "block"]
    return Request("back", blocks=tuple(blocks))  # none: the writer says nothing moved


def _without_between(text: str) -> str:
    """``text`` less its "between A and B": that "and" joins the two references."""
    return re.sub(r"\b(between|in between)\b.*", "", text)


def _between(text: str, named, objects, kinds) -> Request | None:
    """A block halfway between two named objects, or between "the two bowls"."""
    match = re.search(r"\b(between|in the middle of|midway between|halfway between)\b", text)
    if match is None or not re.search(rf"\b{_MOVE}\b", text[: match.start()]):
        return None
    before, after = named_in(text[: match.start()], named), named_in(text[match.end() :], named)
    if len(before) != 1 or kind_of(before[0], kinds) != "block":
        return None
    if len(after) != 2:
        kind = re.search(r"\b(the )?(two|both)( of the)? (bowls|blocks)\b", text[match.end() :])
        others = [o for o in objects if o != before[0]]
        after = [o for o in others if kind and kind_of(o, kinds) == kind[4][:-1]]
        if len(after) != 2:
            return None
    return Request("between", subject=before[0], reference=after[0], other=after[1])


def _offset(text: str, named, kinds) -> Request | None:
    """One named block moved by a distance in a direction."""
    if len(named) != 1 or kind_of(named[0], kinds) != "block":
        return None
    if not re.search(rf"\b{_MOVE}\b", text) or re.search(r"\b(of|push\w*)\b", text):
        return None  # "to the left of X" is beside (goal_phrases); a push is the reward route's
    direction = _offset_direction(text)
    distance = _distance(text)
    if direction is None or distance is None:
        return None
    return Request("offset", subject=named[0], place=direction, distance=distance)


def _offset_direction(text: str) -> str | None:
    """The one direction word of ``text`` (its key in ``_OFFSET_DIRECTIONS``), else None."""
    found = {
        key
        for key in _OFFSET_DIRECTIONS
        if re.search(rf"\b(to the |to |toward the |towards the )?{key}\b", text)
    }
    if "left" not in found and "right" not in found:
        found |= {k for k in ("top", "bottom") if re.search(rf"\b(to|toward) the {k}\b", text)}
    found = {k for k in found if not any(k != o and k in o for o in found)}  # the longest
    if len(found) != 1:
        return None
    return {"top": "forward", "bottom": "backward"}.get(next(iter(found)), next(iter(found)))


def offset_vector(direction: str) -> object:
    """(dx, dy) of a direction key, or "in"/"out" (along the base-block line)."""
    return _OFFSET_DIRECTIONS[direction]


def _distance(text: str) -> float | None:
    """The stated distance in metres ("10 cm", "two inches"), else the size words' ("a
    bit"); None when there is neither, or several numbers."""
    found = DISTANCE.findall(text)
    if len(found) > 1:
        return None
    if found:
        number, unit = found[0]
        metres = parse_number(number) * UNITS[unit_name(unit)]
        return metres if 0.0 < metres <= MAX_OFFSET_METRES else None
    for pattern, metres in _SIZES:
        if pattern.search(text):
            return metres
    return None
