"""The splits of the Code-as-Policies tabletop benchmark (see ``bench.cap_tasks``).

Each family draws its object attributes from a SEEN or an UNSEEN set (colours; and corners,
directions and line orientations where the task has them) and phrases its instruction with SEEN
or UNSEEN templates: the four splits are seen/unseen attributes x seen/unseen phrasings.
Directions are the robot's: "left" is +y, "top" is the far side of the table (+x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SEEN_COLORS = ("red", "green", "blue", "yellow", "orange")
UNSEEN_COLORS = ("purple", "pink", "cyan", "brown", "gray")
# corner key (get_corner_pos) -> how an instruction names it
SEEN_PLACES = {
    "top left": "the top left corner",
    "bottom right": "the bottom right corner",
    "top": "the top side",
    "left": "the left side",
}
UNSEEN_PLACES = {
    "top right": "the top right corner",
    "bottom left": "the bottom left corner",
    "bottom": "the bottom side",
    "right": "the right side",
}
SEEN_DIRECTIONS = ("left", "top")
UNSEEN_DIRECTIONS = ("right", "bottom")
# unit vectors in the robot's frame: top = +x (far side), left = +y
DIRECTIONS = {
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
    "top": (1.0, 0.0),
    "bottom": (-1.0, 0.0),
}
SEEN_LINES = ("horizontal", "vertical")
UNSEEN_LINES = ("diagonal",)
# line orientation -> direction of the line in the table plane (horizontal runs left-right)
LINES = {
    "horizontal": (0.0, 1.0),
    "vertical": (1.0, 0.0),
    "diagonal": (math.sqrt(0.5), math.sqrt(0.5)),
}


@dataclass(frozen=True)
class Attributes:
    """The object attributes one side of a split may use."""

    colors: tuple[str, ...]
    places: dict[str, str]
    directions: tuple[str, ...]
    lines: tuple[str, ...]


SEEN = Attributes(SEEN_COLORS, SEEN_PLACES, SEEN_DIRECTIONS, SEEN_LINES)
UNSEEN = Attributes(UNSEEN_COLORS, UNSEEN_PLACES, UNSEEN_DIRECTIONS, UNSEEN_LINES)


@dataclass(frozen=True)
class Split:
    name: str
    unseen_attributes: bool
    unseen_phrasing: bool

    @property
    def attributes(self) -> Attributes:
        return UNSEEN if self.unseen_attributes else SEEN


# Display order. SA/UA: seen/unseen attributes; SI/UI: seen/unseen instruction phrasings.
SPLITS = (
    Split("SA-SI", False, False),
    Split("SA-UI", False, True),
    Split("UA-SI", True, False),
    Split("UA-UI", True, True),
)
SPLIT_NAMES = tuple(s.name for s in SPLITS)
# Episode i of a family gets EPISODE_SPLITS[i % 4]: any two consecutive episodes cover seen and
# unseen attributes and phrasings.
EPISODE_SPLITS = (SPLITS[0], SPLITS[3], SPLITS[1], SPLITS[2])


# Instruction templates of each family: (SEEN phrasings, UNSEEN phrasings). The parameters in
# braces are the ones the family draws (``Task.params``).
PHRASINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pick_place": (
        ("put the {block} in the {bowl}", "place the {block} in the {bowl}"),
        (
            "drop the {block} into the {bowl}",
            "the {block} belongs in the {bowl}, move it there",
        ),
    ),
    "matching_bowls": (
        (
            "put all the blocks in the bowls with matching colors",
            "put each block in the bowl of the same color",
        ),
        (
            "sort the blocks into the bowls by color",
            "every block goes into the bowl that has its color",
        ),
    ),
    "all_in_bowl": (
        ("put all the blocks in the {bowl}", "put the blocks in the {bowl}"),
        (
            "gather every block inside the {bowl}",
            "collect all of the blocks into the {bowl}",
        ),
    ),
    "stack_all": (
        ("stack all the blocks", "stack the blocks on top of each other"),
        (
            "build a single tower out of all the blocks",
            "pile every block up into one stack",
        ),
    ),
    "corner": (
        ("put the {block} {at_place}", "move the {block} to {place}"),
        (
            "take the {block} over to {place} of the table",
            "I want the {block} sitting {at_place}",
        ),
    ),
    "beside_bowl": (
        (
            "put the {block} to the {direction} of the {bowl}",
            "place the {block} to the {direction} of the {bowl}",
        ),
        (
            "set the {block} down on the {direction} side of the {bowl}",
            "move the {block} next to the {bowl}, on its {direction}",
        ),
    ),
    "line": (
        ("put the blocks in a {line} line", "arrange the blocks in a {line} line"),
        (
            "line up all the blocks along a {line} line",
            "make a {line} row out of the blocks",
        ),
    ),
}


# Phrasing splits alone (pooled over attributes): seen and unseen instruction phrasings.
PHRASING_NAMES = ("SI", "UI")


def phrasing(record: dict) -> str:
    """``SI`` or ``UI``: the phrasing side of an episode record's split (``SA-UI`` -> ``UI``)."""
    return record["split"].rsplit("-", 1)[1]
