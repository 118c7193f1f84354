"""What the Code-as-Policies tabletop tasks judge by: the objects and parameters a family drew
(``Task``), a verdict (``Check``), and the geometry of the table (a block in a bowl, resting on
the table; a free and reachable spot to put a block down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import UnreachableError
from lang2policy.scene.layout import footprint_radius
from lang2policy.scene.world import World


@dataclass(frozen=True)
class Task:
    """What a family drew for one episode: the objects on the table and the task's
    parameters (object names, corner, direction, ...) that the instruction and checks use."""

    objects: tuple[str, ...]
    params: dict[str, str]


@dataclass(frozen=True)
class Check:
    success: bool
    reason: str


_REST_TOLERANCE = 0.004  # a block lies on the table when its centre is this close to rest height
_GAP = 0.01  # free space required around a spot the reference program puts a block on


def xy(world: World, name: str) -> np.ndarray:
    return world.object_pose(name).position[:2].copy()


def resting_on_table(world: World, block: str) -> bool:
    z = world.object_pose(block).position[2]
    return abs(z - world.description.objects.block_half) < _REST_TOLERANCE


def in_bowl(world: World, block: str, bowl: str) -> bool:
    """The block is in the bowl: resting inside it, or on a block that rests inside it."""
    if world.is_in(block, bowl):
        return True
    return any(
        world.is_in(other, bowl) and world.is_on(block, other)
        for other in world.object_names()
        if other != block and world.object_kind(other) == "block"
    )


def spot_is_free(world: World, point, ignore: tuple[str, ...] = ()) -> bool:
    """No object (but those in ``ignore``) is near enough to ``point`` to be in the way of a
    block put down there."""
    sizes = world.description.objects
    need = footprint_radius("block", sizes) + _GAP
    return all(
        math.dist(point[:2], xy(world, name)) >= footprint_radius(name, sizes) + need
        for name in world.object_names()
        if name not in ignore
    )


def spot_is_reachable(session, point) -> bool:
    """The arm can put a block down at ``point`` the way the reference programs do it
    (move_to above the spot, then down to it) and the spot is on the table's working area."""
    description = session.world.description
    ws = description.workspace
    margin = footprint_radius("block", description.objects)
    x, y = float(point[0]), float(point[1])
    if not (
        ws.x[0] + margin <= x <= ws.x[1] - margin and ws.y[0] + margin <= y <= ws.y[1] - margin
    ):
        return False
    # Close to the base the IK depends on where the arm comes from: keep the layout's inner
    # reach limit (the outer one is conservative; the IK check below covers it).
    if math.hypot(x, y) < ws.min_radius + margin:
        return False
    low = description.objects.block_half + 0.004
    try:
        for z in (low, low + 0.04):
            session.primitives.plan_move_to(np.array([x, y, z]))
    except UnreachableError:
        return False
    return True


def blocks_of(names) -> list[str]:
    return [n for n in names if n.endswith("block")]
