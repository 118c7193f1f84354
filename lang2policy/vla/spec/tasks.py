"""The VLA's task families: what is asked, in which words, and which combinations are held out.

Three families (issue 17): put a named block in a named bowl, push a named block toward a
named side, lift a named block. A task is one family with its objects (``Task``); the
instruction is one of the family's phrasings filled with the objects' names.

Held out from training, for the benchmark's splits:

- **unseen combinations**: a fixed fifth of each family's combinations (block colour x bowl
  colour, block colour x side, block colour for lifting) never appears in a demonstration,
  although each colour does, in other combinations and other families;
- **unseen phrasings**: the last phrasings of each family's list are never used to train.

Both are fixed functions of the names, so the demonstrations, the training and the benchmark
agree without sharing a file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.scene.objects import COLORS

FAMILIES = ("pick_place", "push", "lift")
SIDES = ("left", "right", "top", "bottom")
# World-frame direction of each side, named as the skills name them (``skills.geometry``): as
# seen from the robot, "top" is the far side of the table (+x) and "left" is +y.
SIDE_DIRECTIONS = {
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
    "top": (1.0, 0.0),
    "bottom": (-1.0, 0.0),
}
PUSH_DISTANCE = 0.07  # m the oracle pushes a block
PUSH_SUCCESS = 0.04  # m a pushed block must move along its side (and at most half that across)
LIFT_HEIGHT = 0.08  # m the oracle lifts a block above where it rested
LIFT_SUCCESS = 0.05  # m a lifted block must be above its resting height at the end

# Phrasings per family; the last UNSEEN_PHRASINGS of each are held out from training.
PHRASINGS: dict[str, tuple[str, ...]] = {
    "pick_place": (
        "put the {block} in the {bowl}",
        "place the {block} into the {bowl}",
        "pick up the {block} and put it in the {bowl}",
        "move the {block} to the {bowl}",
        "drop the {block} into the {bowl}",
        "the {block} goes in the {bowl}",
        "could you put the {block} inside the {bowl}",
        "transfer the {block} over to the {bowl}",
    ),
    "push": (
        "push the {block} {side_phrase}",
        "slide the {block} {side_phrase}",
        "nudge the {block} toward the {side}",
        "push the {block} toward the {side} side",
        "shove the {block} a little {side_phrase}",
        "move the {block} {side_phrase} by pushing it",
        "give the {block} a push toward the {side}",
        "scoot the {block} over {side_phrase}",
    ),
    "lift": (
        "lift the {block}",
        "pick up the {block}",
        "raise the {block} off the table",
        "lift the {block} up",
        "grab the {block} and hold it up",
        "take the {block} off the table",
        "hoist the {block} into the air",
        "please pick the {block} up and keep holding it",
    ),
}
UNSEEN_PHRASINGS = 2
SIDE_PHRASES = {
    "left": "to the left",
    "right": "to the right",
    "top": "toward the top of the table",
    "bottom": "toward the bottom of the table",
}
HELD_OUT_FRACTION = 0.2


@dataclass(frozen=True)
class Task:
    """One family with its objects: ``block`` always, ``bowl`` (pick_place), ``side`` (push)."""

    family: str
    block: str
    bowl: str = ""
    side: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(f"unknown task family {self.family!r}; families: {FAMILIES}")
        if (self.family == "pick_place") != bool(self.bowl):
            raise ConfigError(f"{self.family}: a bowl is named only for pick_place")
        if self.family == "push" and self.side not in SIDES:
            raise ConfigError(f"push: side {self.side!r} is not one of {SIDES}")

    @property
    def combination(self) -> str:
        """What the held-out split is drawn over (names, not phrasing)."""
        return "|".join(filter(None, (self.family, self.block, self.bowl, self.side)))

    @property
    def seen_combination(self) -> bool:
        return not held_out(self.combination)

    def objects(self) -> list[str]:
        """The objects the task needs on the table."""
        return [self.block, self.bowl] if self.bowl else [self.block]

    def instruction(self, phrasing: int) -> str:
        """The instruction in phrasing number ``phrasing`` of the family."""
        templates = PHRASINGS[self.family]
        if not 0 <= phrasing < len(templates):
            raise ConfigError(f"{self.family} has phrasings 0..{len(templates) - 1}")
        return templates[phrasing].format(
            block=self.block, bowl=self.bowl, side=self.side,
            side_phrase=SIDE_PHRASES.get(self.side, ""),
        )  # fmt: skip


def held_out(combination: str) -> bool:
    """Whether a combination is one of the fixed held-out fifth (a hash of its names)."""
    digest = hashlib.sha256(combination.encode()).digest()
    return digest[0] < 256 * HELD_OUT_FRACTION


def seen_phrasings(family: str) -> range:
    return range(len(PHRASINGS[family]) - UNSEEN_PHRASINGS)


def unseen_phrasings(family: str) -> range:
    count = len(PHRASINGS[family])
    return range(count - UNSEEN_PHRASINGS, count)


def sample_task(rng: np.random.Generator, family: str, seen: bool = True) -> Task:
    """A random task of ``family`` whose combination is seen (or, ``seen=False``, held out)."""
    colours = sorted(COLORS)
    for _ in range(1000):
        block = f"{rng.choice(colours)} block"
        bowl = f"{rng.choice(colours)} bowl" if family == "pick_place" else ""
        side = str(rng.choice(SIDES)) if family == "push" else ""
        task = Task(family, block, bowl, side)
        if task.seen_combination == seen:
            return task
    raise ConfigError(f"no {'seen' if seen else 'unseen'} combination found for {family}")
