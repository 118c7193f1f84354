"""Episodes of the Code-as-Policies tabletop benchmark, with splits and success checks.

Modelled on the simulated tabletop benchmark of Code as Policies (Liang et al., 2023, Table III):
long-horizon tasks ("put all the blocks in the bowls with matching colors", "stack all the
blocks", "put all the blocks in the <colour> bowl"), spatial-geometric tasks ("put the blocks in
a horizontal line", "put the <colour> block to the left of the <colour> bowl", "put the <colour>
block in the <corner> corner") and plain pick-and-place ("put the <colour> block in the
<colour> bowl").

Each family has instruction templates with SEEN and UNSEEN phrasings, and draws its object
attributes from a SEEN or an UNSEEN set (colours; and corners, directions and line orientations
where the task has them): the four splits are seen/unseen attributes x seen/unseen phrasings.
A family also picks the objects of an episode, says which seeded layouts leave room for the task
(``scene_ok``), writes the REFERENCE program for it (policy code against the skills API, the
oracle track) and judges the final simulator state (``check``). Directions are the robot's:
"left" is +y, "top" is the far side of the table (+x).

The splits are in ``cap_splits``, the families in ``cap_families`` and ``cap_spatial``.
Episodes are a pure function of (family, split, seed, index, robot): ``make_episode``.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field

import numpy as np

from lang2policy.bench.cap_checks import Check, Task
from lang2policy.bench.cap_families import (
    AllInBowl,
    MatchingBowls,
    PickPlace,
    StackAll,
    TaskFamily,
)
from lang2policy.bench.cap_spatial import BesideBowl, Corner, Line
from lang2policy.bench.cap_splits import EPISODE_SPLITS
from lang2policy.errors import ConfigError
from lang2policy.scene.world import World


@dataclass(frozen=True)
class Episode:
    family: str
    category: str
    split: str
    index: int
    seed: int  # the benchmark seed it was drawn from
    instruction: str
    template: str
    objects: tuple[str, ...]
    params: dict[str, str]
    reset_seed: int  # session.reset(reset_seed, objects) gives its scene
    reference: str = field(repr=False)

    def as_dict(self) -> dict:
        data = asdict(self)
        data.pop("reference")
        data["objects"] = list(self.objects)
        return data


FAMILIES: tuple[TaskFamily, ...] = (
    PickPlace(),
    MatchingBowls(),
    AllInBowl(),
    StackAll(),
    Corner(),
    BesideBowl(),
    Line(),
)
FAMILY_NAMES = tuple(f.name for f in FAMILIES)
CATEGORIES = ("simple", "long-horizon", "spatial")


def family(name: str) -> TaskFamily:
    for f in FAMILIES:
        if f.name == name:
            return f
    raise ConfigError(f"unknown task family '{name}'; valid: {', '.join(FAMILY_NAMES)}")


# ----------------------------------------------------------------------------- episodes
_LAYOUT_TRIES = 200


def episode_rng(seed: int, family_name: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(family_name.encode()), index])


def make_episode(session, task_family: TaskFamily, seed: int, index: int) -> Episode:
    """Draw episode ``index`` of a family: split, objects, instruction, and a seeded layout
    that leaves room for the task and does not already satisfy it. Resets ``session``."""
    rng = episode_rng(seed, task_family.name, index)
    split = EPISODE_SPLITS[index % len(EPISODE_SPLITS)]
    description = session.world.description
    task = task_family.draw(rng, split.attributes, description.workspace.max_objects)
    templates = task_family.phrasings(split)
    template = str(templates[int(rng.integers(len(templates)))])
    instruction = template.format(**task.params)
    reset_seed = seeded_layout(session, task_family, task, rng)
    return Episode(
        family=task_family.name,
        category=task_family.category,
        split=split.name,
        index=index,
        seed=seed,
        instruction=instruction,
        template=template,
        objects=task.objects,
        params=dict(task.params),
        reset_seed=reset_seed,
        reference=task_family.reference(task, description),
    )


def seeded_layout(session, task_family: TaskFamily, task: Task, rng: np.random.Generator) -> int:
    """The first seed drawn from ``rng`` whose layout of ``task.objects`` leaves room for the
    task and does not already satisfy it (``session`` is left in that layout)."""
    description = session.world.description
    for _ in range(_LAYOUT_TRIES):
        reset_seed = int(rng.integers(0, 2**31 - 1))
        try:
            session.reset(reset_seed, list(task.objects))
        except ConfigError:  # these objects did not fit with this seed
            continue
        world = session.world
        if task_family.scene_ok(session, task) and not task_family.check(world, task).success:
            return reset_seed
    raise ConfigError(
        f"{task_family.name}: no layout of {list(task.objects)} on {description.name} "
        f"leaves room for the task in {_LAYOUT_TRIES} tries"
    )


def check_episode(world: World, episode: Episode) -> Check:
    """Judge the simulator state against the episode's task."""
    return family(episode.family).check(world, Task(episode.objects, episode.params))
