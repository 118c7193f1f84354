"""The geometry behind the compound goals (``goals``): whether an arrangement holds in a world.

Each check reads a ``lang2policy.scene.world.World`` (the simulation, its copy, or the graph's
mirror of the real arm) and returns None when the arrangement holds, else a sentence that says
what does not hold, with the measured distances: the verdict's reason, which the re-plan quotes
to the LLM, so it has to say how far off the program was.

Directions are the robot's (``skills.geometry``): "top" is the far side of the table (+x),
"left" is +y. A block "rests on the table" when its centre is within ``REST_TOLERANCE`` of a
block's half size above the table (not in a bowl, not on another block, not held).
"""

from __future__ import annotations

import math

import numpy as np

from lang2policy.skills.geometry import corner_point

REST_TOLERANCE = 0.004  # metres: a block's centre this close to its rest height lies on the table
# unit vectors in the table plane, in the robot's frame: top = +x (far side), left = +y
DIRECTIONS: dict[str, tuple[float, float]] = {
    "left": (0.0, 1.0),
    "right": (0.0, -1.0),
    "top": (1.0, 0.0),
    "bottom": (-1.0, 0.0),
}
BESIDE_REACH = 6.0  # block halves beyond the reference's footprint that still count as beside
BESIDE_SLANT = 0.6  # at most this much sideways offset per unit of offset in the direction
CORNER_REACH = 4.0  # block halves from the named spot that count as being at it
LINE_GAP = 2.2  # block halves: two blocks of a line closer than this touch
LINE_RESIDUAL = 1.2  # block halves: how far a block may be off the line's axis
# line orientation -> allowed angle from the left-right (y) axis, degrees
LINE_ANGLES: dict[str, tuple[float, float]] = {
    "horizontal": (0.0, 15.0),
    "vertical": (75.0, 90.0),
    "diagonal": (30.0, 60.0),
}


def xy(world, name: str) -> np.ndarray:
    """The object's centre in the table plane."""
    return np.asarray(world.object_pose(name).position[:2], dtype=float)


def resting_on_table(world, block: str) -> bool:
    """The block lies on the table itself (its centre at rest height, within tolerance)."""
    z = float(world.object_pose(block).position[2])
    return abs(z - world.description.objects.block_half) < REST_TOLERANCE


def footprint(world, name: str) -> float:
    """How far from its centre an object reaches in the table plane: a bowl's radius, a
    block's half diagonal."""
    sizes = world.description.objects
    if world.object_kind(name) == "bowl":
        return sizes.bowl_radius
    return sizes.block_half * math.sqrt(2)


def place_name(corner: str) -> str:
    """How a corner key reads in a sentence: "the top left corner", "the left side", "the
    centre of the table"."""
    if corner == "center":
        return "the centre of the table"
    return f"the {corner} {'corner' if ' ' in corner else 'side'}"


def beside(world, a: str, direction: str, b: str) -> str | None:
    """``a`` lies on the table next to ``b`` on its ``direction`` side: along the direction it
    is past ``b``'s footprint by at most ``BESIDE_REACH`` block halves, and not off to the side
    more than ``BESIDE_SLANT`` of that. None when it holds, else why not."""
    missing = _missing(world, (a, b))
    if missing:
        return missing
    half = world.description.objects.block_half
    unit = np.array(DIRECTIONS[direction])
    offset = xy(world, a) - xy(world, b)
    along = float(offset @ unit)
    across = abs(float(offset[0] * unit[1] - offset[1] * unit[0]))
    edge = footprint(world, b)
    side = f"to the {direction} of the {b}"
    if not resting_on_table(world, a):
        where = " (it is in the bowl)" if _is_in(world, a, b) else ""
        return f"the {a} is not lying on the table{where}, so it is not {side}"
    if along <= 0:
        return f"the {a} is not {side}: it is {-along * 100:.1f} cm the other way"
    if along < edge:
        return (
            f"the {a} is {along * 100:.1f} cm {side} (not next to it: within its "
            f"{edge * 100:.1f} cm footprint)"
        )
    if along > edge + BESIDE_REACH * half:
        return f"the {a} is {along * 100:.1f} cm {side} (too far: not next to it)"
    if across > BESIDE_SLANT * along:
        return (
            f"the {a} is {along * 100:.1f} cm {side} but {across * 100:.1f} cm off to the side "
            f"(not next to it)"
        )
    return None


def one_tower(world, blocks: tuple[str, ...]) -> str | None:
    """The blocks form a single tower: the lowest lies on the table and each next one (by
    height) rests on the one below. None when it holds, else why not."""
    missing = _missing(world, blocks)
    if missing:
        return missing
    ordered = sorted(blocks, key=lambda b: float(world.object_pose(b).position[2]))
    if not resting_on_table(world, ordered[0]):
        return f"the lowest block ({ordered[0]}) is not on the table: no single tower"
    for upper, lower in zip(ordered[1:], ordered, strict=False):
        if not world.is_on(upper, lower):
            return f"the {upper} is not on the {lower}: no single tower"
    return None


def in_a_line(world, blocks: tuple[str, ...], orientation: str = "") -> str | None:
    """The blocks lie on the table in a line: none touching, none farther than
    ``LINE_RESIDUAL`` block halves from the line through them (the principal axis of their
    centres), and the line at the angle ``orientation`` names ("" for any). None when it
    holds, else why not."""
    missing = _missing(world, blocks)
    if missing:
        return missing
    half = world.description.objects.block_half
    off_table = [b for b in blocks if not resting_on_table(world, b)]
    if off_table:
        return f"not in a line: not lying on the table: {', '.join(off_table)}"
    points = np.array([xy(world, b) for b in blocks])
    closest = min(math.dist(p, q) for i, p in enumerate(points) for q in points[i + 1 :])
    if closest < LINE_GAP * half:
        return f"not in a line: two blocks touch ({closest * 100:.1f} cm apart)"
    centred = points - points.mean(axis=0)
    _, _, axes = np.linalg.svd(centred)
    axis = axes[0]
    residual = float(np.max(np.abs(centred @ np.array([-axis[1], axis[0]]))))
    if residual > LINE_RESIDUAL * half:
        return f"not in a line: a block is {residual * 100:.1f} cm off it"
    if not orientation:
        return None
    angle = math.degrees(math.atan2(abs(axis[0]), abs(axis[1])))  # 0 = left-right
    low, high = LINE_ANGLES[orientation]
    if not low <= angle <= high:
        return f"a line {angle:.0f} deg from left-right: not {orientation}"
    return None


def at_corner(world, block: str, corner: str) -> str | None:
    """``block`` lies on the table within ``CORNER_REACH`` block halves of the spot
    ``skills.geometry.corner_point`` gives for ``corner``. None when it holds, else why not."""
    missing = _missing(world, (block,))
    if missing:
        return missing
    if not resting_on_table(world, block):
        return f"the {block} is not lying on the table"
    target = corner_point(world.description, corner)[:2]
    distance = math.dist(xy(world, block), target)
    if distance > CORNER_REACH * world.description.objects.block_half:
        return f"the {block} is {distance * 100:.1f} cm from {place_name(corner)}"
    return None


def at_points(world, goal, on_table: bool) -> str | None:
    """Each of ``goal.objects`` lies within ``goal.tolerance`` of its point (``goal.points``,
    x, y), on the table itself when ``on_table``. None when it holds, else the distances."""
    missing = _missing(world, goal.objects)
    if missing:
        return missing
    problems = []
    for name, point in zip(goal.objects, goal.points, strict=True):
        distance = math.dist(xy(world, name), point)
        if on_table and not resting_on_table(world, name):
            problems.append(f"the {name} is not lying on the table")
        elif distance > goal.tolerance:
            problems.append(
                f"the {name} is {distance * 100:.1f} cm from {goal.place} (at most "
                f"{goal.tolerance * 100:.1f} cm)"
            )
    return "; ".join(problems) or None


def _missing(world, names) -> str | None:
    gone = [n for n in names if n not in world.present]
    return f"not on the table any more: {', '.join(gone)}" if gone else None


def _is_in(world, a: str, b: str) -> bool:
    try:
        return world.object_kind(b) == "bowl" and bool(world.is_in(a, b))
    except Exception:  # an object that left the scene
        return False
