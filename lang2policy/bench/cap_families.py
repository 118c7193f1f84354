"""The task families of the Code-as-Policies tabletop benchmark: the base ``TaskFamily`` and the
simple and long-horizon ones (pick-and-place; matching bowls, all in one bowl, one tower).

A family draws the objects and parameters of an episode, says which seeded layouts leave room for
the task (``scene_ok``), writes the REFERENCE program for it (policy code against the skills
API, the oracle track) and judges the final simulator state (``check``).
"""

from __future__ import annotations

import numpy as np

from lang2policy.bench.cap_checks import (
    Check,
    Task,
    blocks_of,
    in_bowl,
    resting_on_table,
    spot_is_free,
)
from lang2policy.bench.cap_programs import program
from lang2policy.bench.cap_splits import PHRASINGS, Attributes, Split
from lang2policy.scene.robot_description import RobotDescription
from lang2policy.scene.world import World
from lang2policy.skills.geometry import corner_point


class TaskFamily:
    """One kind of instruction (its templates in ``cap_splits.PHRASINGS``). Subclasses fill in
    ``name``, ``category``, ``draw``, ``reference`` and ``check``; ``scene_ok`` defaults to any
    layout."""

    name = ""
    category = ""  # "simple" | "long-horizon" | "spatial"

    def draw(self, rng: np.random.Generator, attrs: Attributes, max_objects: int) -> Task:
        raise NotImplementedError

    def scene_ok(self, session, task: Task) -> bool:
        """Does the layout just drawn (``session.world``) leave room for the task?"""
        return True

    def reference(self, task: Task, description: RobotDescription) -> str:
        raise NotImplementedError

    def check(self, world: World, task: Task) -> Check:
        raise NotImplementedError

    @property
    def seen_phrasings(self) -> tuple[str, ...]:
        return PHRASINGS[self.name][0]

    @property
    def unseen_phrasings(self) -> tuple[str, ...]:
        return PHRASINGS[self.name][1]

    def phrasings(self, split: Split) -> tuple[str, ...]:
        return self.unseen_phrasings if split.unseen_phrasing else self.seen_phrasings


def _colors(rng: np.random.Generator, attrs: Attributes, count: int) -> list[str]:
    return [str(c) for c in rng.choice(attrs.colors, size=count, replace=False)]


def blocks_and_bowls(
    rng: np.random.Generator, attrs: Attributes, blocks: int, bowls: int
) -> tuple[list[str], list[str]]:
    """``blocks`` blocks and ``bowls`` bowls of colours drawn from ``attrs`` (each kind of its
    own colours; the blocks' drawn first)."""
    block_names = [f"{c} block" for c in _colors(rng, attrs, blocks)]
    return block_names, [f"{c} bowl" for c in _colors(rng, attrs, bowls)]


def _extra_bowls(rng, attrs, used: list[str], count: int) -> list[str]:
    left = [c for c in attrs.colors if c not in used]
    return [f"{c} bowl" for c in rng.choice(left, size=count, replace=False)]


class PickPlace(TaskFamily):
    name = "pick_place"
    category = "simple"

    def draw(self, rng, attrs, max_objects):
        blocks, bowls = blocks_and_bowls(rng, attrs, 2, 2)
        params = {"block": blocks[0], "bowl": bowls[0]}
        return Task(tuple(blocks + bowls), params)

    def reference(self, task, description):
        p = task.params
        return program(f"put_first_on_second({p['block']!r}, {p['bowl']!r})\ngo_home()")

    def check(self, world, task):
        block, bowl = task.params["block"], task.params["bowl"]
        if in_bowl(world, block, bowl):
            return Check(True, f"the {block} is in the {bowl}")
        return Check(False, f"the {block} is not in the {bowl}")


class MatchingBowls(TaskFamily):
    name = "matching_bowls"
    category = "long-horizon"

    def draw(self, rng, attrs, max_objects):
        pairs = 3 if max_objects >= 7 else 2
        colors = _colors(rng, attrs, pairs)
        names = [f"{c} block" for c in colors] + [f"{c} bowl" for c in colors]
        if len(names) < max_objects:  # a bowl no block matches
            names += _extra_bowls(rng, attrs, colors, 1)
        return Task(tuple(names), {})

    def reference(self, task, description):
        return program(
            """
            names = get_obj_names()
            for block in [n for n in names if n.endswith('block')]:
                bowl = block.replace('block', 'bowl')
                if bowl in names:
                    put_first_on_second(block, bowl)
            go_home()
            """
        )

    def check(self, world, task):
        names = set(task.objects)
        missing = [
            b
            for b in blocks_of(task.objects)
            if b.replace("block", "bowl") in names
            and not in_bowl(world, b, b.replace("block", "bowl"))
        ]
        if missing:
            return Check(False, f"not in their bowls: {', '.join(missing)}")
        return Check(True, "every block is in the bowl of its colour")


class AllInBowl(TaskFamily):
    name = "all_in_bowl"
    category = "long-horizon"

    def draw(self, rng, attrs, max_objects):
        # Two blocks: a bowl holds two side by side on every arm (three get wedged in a Panda's)
        blocks, bowls = blocks_and_bowls(rng, attrs, 2, 3 if max_objects >= 7 else 2)
        return Task(tuple(blocks + bowls), {"bowl": bowls[0]})

    def reference(self, task, description):
        # Side by side across the bowl (seen from the robot), so the jaws open away from the
        # rim; three or more on a ring. Each spot is taken from where the bowl is now: a block
        # set down in it can nudge it.
        return program(
            f"""
            bowl = {task.params["bowl"]!r}
            blocks = [n for n in get_obj_names() if n.endswith('block')]
            for i, block in enumerate(blocks):
                centre = get_obj_pos(bowl)
                radius = (get_bbox(bowl)[1][0] - get_bbox(bowl)[0][0]) / 2
                across = np.array([-centre[1], centre[0], 0.0]) / np.linalg.norm(centre[:2])
                if len(blocks) == 1:
                    spot = centre
                elif len(blocks) == 2:
                    spot = centre + across * 0.38 * radius * (1 if i else -1)
                else:
                    angle = 2 * np.pi * i / len(blocks)
                    spot = centre + 0.5 * radius * np.array([np.cos(angle), np.sin(angle), 0.0])
                put_first_on_second(block, spot)
            go_home()
            """
        )

    def check(self, world, task):
        bowl = task.params["bowl"]
        missing = [b for b in blocks_of(task.objects) if not in_bowl(world, b, bowl)]
        if missing:
            return Check(False, f"not in the {bowl}: {', '.join(missing)}")
        return Check(True, f"every block is in the {bowl}")


def _stack_spot(description: RobotDescription) -> np.ndarray:
    """Where the reference builds a tower: halfway from the centre to the right side. SO-101
    reaches 6-10 cm above the table only over its right half (y <= 0)."""
    return (corner_point(description, "center") + corner_point(description, "right")) / 2


class StackAll(TaskFamily):
    name = "stack_all"
    category = "long-horizon"

    def draw(self, rng, attrs, max_objects):
        # Three blocks: four take a Panda close to the 120 s motion budget of one program
        blocks, bowls = blocks_and_bowls(rng, attrs, 3, 2 if max_objects >= 7 else 1)
        return Task(tuple(blocks + bowls), {})

    def scene_ok(self, session, task):
        return spot_is_free(session.world, _stack_spot(session.world.description))

    def reference(self, task, description):
        return program(
            """
            blocks = [n for n in get_obj_names() if n.endswith('block')]
            # the tower goes halfway between the centre and the right side: in reach up high
            spot = (get_corner_pos('center') + get_corner_pos('right')) / 2
            put_at(blocks[0], spot)
            for block, below in zip(blocks[1:], blocks):
                put_on_top(block, below)
            go_home()
            """,
            helpers=True,
            description=description,
        )

    def check(self, world, task):
        blocks = sorted(blocks_of(task.objects), key=lambda b: world.object_pose(b).position[2])
        if not resting_on_table(world, blocks[0]):
            return Check(False, f"the lowest block ({blocks[0]}) is not on the table")
        for upper, lower in zip(blocks[1:], blocks, strict=False):
            if not world.is_on(upper, lower):
                return Check(False, f"the {upper} is not on the {lower}: no single tower")
        return Check(True, "one tower: " + " on ".join(reversed(blocks)))
