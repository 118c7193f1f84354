"""Programs for requests read from the instruction's words: the spots resolved by code.

When ``goal_phrases`` or ``spatial_phrases`` reads what an instruction asks for (every block
in a bowl, a tower, a line, a block beside a bowl, at a corner, moved by an offset, between
two objects, back where it was), the program that does it is plain policy code over the
skills API, and the spots it needs come from the scene here, not from the LLM: a 270M model
chooses badly among coordinates (CaP-X, 2026), and deterministic geometry does not. The
program goes through the same dry run, sandbox and goal verdict as an LLM's.

``write(request, scene)`` returns a ``Written`` program with the goal it must reach, or a
``Refusal`` that says why no spot works (out of reach, taken), so the arm does not move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lang2policy.planning.goal_checks import DIRECTIONS, place_name
from lang2policy.planning.goal_phrases import Request
from lang2policy.planning.goals import Goal, Relation, goal_of_request
from lang2policy.planning.spatial_phrases import offset_vector
from lang2policy.scene.robot_description import RobotDescription
from lang2policy.skills.geometry import corner_point

CLEARANCE = 0.006  # metres of free table between a placed block and any other object
LINE_STEP = 4.4  # block halves between neighbouring blocks of a line
BESIDE_GAP = 2.2  # block halves past the reference's footprint for a block beside it
LINES = {
    "horizontal": (0.0, 1.0),
    "vertical": (1.0, 0.0),
    "diagonal": (0.7071, 0.7071),
    "": (0.0, 1.0),
}


@dataclass(frozen=True)
class Scene:
    """What the spots are resolved from: positions (name -> [x, y, z]) now, kinds (name ->
    "block" | "bowl"), the arm's description (table, reach, sizes), and where the blocks the
    previous instruction moved were before it (for "back")."""

    positions: dict[str, np.ndarray]
    kinds: dict[str, str]
    description: RobotDescription
    previous: dict[str, np.ndarray]


@dataclass(frozen=True)
class Written:
    """A program, its goal, and the code the LLM's history shows for it: the program without
    helper definitions (a 270M model shown a ``def`` in its history wrote a ``def`` and no
    call for the next instruction), each placement as ``put_first_on_second``."""

    code: str
    goal: Goal
    history: str


@dataclass(frozen=True)
class Refusal:
    reason: str


def write(request: Request, scene: Scene) -> Written | Refusal:
    """The program and goal for ``request`` on ``scene``, or why none can be run."""
    writer = _WRITERS[request.kind]
    result = writer(request, scene)
    if isinstance(result, Refusal):
        return result
    code, goal = result if isinstance(result, tuple) else (result, goal_of_request(request))
    return Written(code.strip("\n") + "\n", goal, _history_code(code))


def _history_code(code: str) -> str:
    """``code`` without its helper definitions, ``put_on_top`` calls as the skill they do."""
    kept = [
        line.replace("put_on_top(", "put_first_on_second(")
        for line in code.split(_PUT_ON_TOP.strip())[-1].splitlines()
        if line.strip()
    ]
    return "\n".join(kept) + "\n"


def _pairs(request: Request, scene: Scene) -> str:
    """Each block into its bowl; several blocks for one bowl side by side across it (seen
    from the robot, so the jaws open away from the rim), three or more on a ring."""
    lines = []
    for bowl in dict.fromkeys(b for _, b in request.pairs):
        blocks = [a for a, b in request.pairs if b == bowl]
        for block, spot in zip(blocks, _spots_in_bowl(scene, bowl, len(blocks)), strict=True):
            lines.append(
                f"put_first_on_second({block!r}, {bowl!r})"
                if spot is None
                else f"put_first_on_second({block!r}, {_array(spot)})  # in the {bowl}"
            )
    return "\n".join(lines)


def _spots_in_bowl(scene: Scene, bowl: str, count: int) -> list:
    """Where ``count`` blocks go in ``bowl``: its centre for one (None: the bowl's name)."""
    if count == 1:
        return [None]
    centre = scene.positions[bowl][:2]
    radius = scene.description.objects.bowl_radius
    across = np.array([-centre[1], centre[0]]) / max(float(np.linalg.norm(centre)), 1e-6)
    if count == 2:
        return [centre - across * 0.38 * radius, centre + across * 0.38 * radius]
    angles = [2 * math.pi * i / count for i in range(count)]
    return [centre + 0.5 * radius * np.array([math.cos(a), math.sin(a)]) for a in angles]


# Arms whose put_first_on_second leaves a block on a block too far off-centre for a tower to
# stand (SO-101: the held block hangs ~1.3 cm off the tool point and place() turns the wrist);
# lowering it with move_to onto the centre stands. On a Panda put_first_on_second stacks well.
_LOWER_TO_STACK = frozenset({"so101"})
_PUT_ON_TOP = """
def put_on_top(block, base):
    \"\"\"Stack the block on base, centred: lower it with move_to, let go, back off.\"\"\"
    pick(block)
    top = get_bbox(base)[1][2]
    centre = get_obj_pos(base)
    height = get_bbox(block)[1][2] - get_bbox(block)[0][2]
    goal = np.array([centre[0], centre[1], top + height / 2 + 0.004])
    above = goal + np.array([0.0, 0.0, 0.04])
    move_to(above)
    hang = get_obj_pos(block)[2] - get_ee_pos()[2]
    move_to(goal - np.array([0.0, 0.0, hang]))
    open_gripper()
    move_to(above)
"""


def _stack_on(request: Request, scene: Scene):
    base, top = request.blocks
    goal = Goal("relations", (Relation(top, "on", base),), request="stack_on")
    return _tower(request, scene, ordered=True), goal


def _tower(request: Request, scene: Scene, ordered: bool = False) -> str:
    """Each block on the one before it: in height order (the lowest stays), or as given."""
    blocks = list(request.blocks)
    if not ordered:
        blocks.sort(key=lambda b: float(scene.positions[b][2]))
    lower = scene.description.name in _LOWER_TO_STACK
    put = "put_on_top" if lower else "put_first_on_second"
    lines = [_PUT_ON_TOP.strip()] if lower else []
    lines.append("# one tower: each block on the one before it")
    for upper, below in zip(blocks[1:], blocks, strict=False):
        lines.append(f"{put}({upper!r}, {below!r})")
    return "\n".join(lines)


def _corner(request: Request, scene: Scene) -> str:
    return (
        f"# {place_name(request.place)}: 'top' is the far side, 'left' is +y\n"
        f"put_first_on_second({request.subject!r}, get_corner_pos({request.place!r}))"
    )


def _beside(request: Request, scene: Scene):
    reference, block = request.reference, request.subject
    unit = np.array(DIRECTIONS[request.place])
    half = scene.description.objects.block_half
    start = _footprint(scene, reference) + BESIDE_GAP * half
    centre = scene.positions[reference][:2]
    for along in (start, start + half, start + 2 * half):
        for across in (0.0, half, -half, 2 * half, -2 * half):
            spot = centre + unit * along + np.array([-unit[1], unit[0]]) * across
            if _free(scene, spot, ignore=(block,)) is None:
                return _place_code(block, spot, f"to the {request.place} of the {reference}")
    why = _free(scene, centre + unit * start, ignore=(block,))
    return Refusal(f"no free spot to the {request.place} of the {reference}: {why}")


def _line(request: Request, scene: Scene):
    blocks = list(request.blocks)
    others = tuple(o for o in scene.positions if o not in blocks)
    for spots in _line_candidates(request.place, len(blocks), scene):
        if all(_free(scene, s, ignore=blocks, only=others) is None for s in spots):
            order = _assign(blocks, spots, scene)
            if order is not None:
                kind = f"{request.place} " if request.place else ""
                gap = math.dist(spots[0], spots[1]) * 100
                lines = [f"# the blocks in a {kind}line, {gap:.1f} cm apart"]
                lines += [_place_line(b, s) for b, s in order]
                return "\n".join(lines)
    return Refusal("no free straight stretch of table for the line (the bowls are in the way)")


def _line_candidates(orientation: str, count: int, scene: Scene):
    """Spots for a line of ``count`` blocks, nearest the table's centre first: the middle
    shifted across and along the line in half steps, at the usual spacing, then closer."""
    unit = np.array(LINES[orientation])
    normal = np.array([-unit[1], unit[0]])
    centre = corner_point(scene.description, "center")[:2]
    half = scene.description.objects.block_half
    shifts = sorted(
        ((a / 2, b / 2) for a in range(-4, 5) for b in range(-2, 3)),
        key=lambda ab: abs(ab[0]) + abs(ab[1]),
    )
    for halves in (LINE_STEP, LINE_STEP - 1.0):
        step = halves * half
        for across, along in shifts:
            middle = centre + normal * across * step + unit * along * step
            yield [middle + unit * step * (i - (count - 1) / 2) for i in range(count)]


def _assign(blocks, spots, scene: Scene):
    """(block, spot) in an order where no block is put where another one still lies; None
    when there is none (two blocks would swap places)."""
    pending = dict(zip(blocks, spots, strict=True))
    order = []
    while pending:
        for block, spot in pending.items():
            waiting = [b for b in pending if b != block]
            if _free(scene, spot, ignore=(block,), only=tuple(waiting)) is None:
                order.append((block, spot))
                del pending[block]
                break
        else:
            return None
    return order


def _offset(request: Request, scene: Scene):
    block = request.subject
    start = scene.positions[block][:2]
    vector = offset_vector(request.place)
    if isinstance(vector, str):  # along the line from the base through the block
        radial = start / max(float(np.linalg.norm(start)), 1e-6)
        vector = radial * (-1.0 if vector == "in" else 1.0)
    spot = start + np.asarray(vector, dtype=float) * request.distance
    what = f"{request.distance * 100:.0f} cm {request.place} of where it was"
    return _one_spot(request, scene, block, spot, what, f"the {block} cannot go {what}")


def _between(request: Request, scene: Scene):
    block, first, second = request.subject, request.reference, request.other
    spot = (scene.positions[first][:2] + scene.positions[second][:2]) / 2
    what = f"between the {first} and the {second}"
    return _one_spot(request, scene, block, spot, what, f"no room for the {block} {what}")


def _one_spot(request: Request, scene: Scene, block: str, spot, what: str, no: str):
    """``block`` put at ``spot`` with the goal of lying there, or ``no``: why not."""
    why = _free(scene, spot, ignore=(block,))
    if why is not None:
        return Refusal(f"{no}: {why}")
    return _place_code(block, spot, what), _at_goal(request, (block,), (spot,), what, scene)


def _back(request: Request, scene: Scene):
    if not request.blocks:
        return Refusal("nothing to put back: no earlier instruction of this run moved a block")
    missing = [b for b in request.blocks if b not in scene.previous]
    if missing:
        return Refusal(
            f"where the {', '.join(missing)} was before is not known: no earlier instruction "
            "of this run moved it, or it has moved since (a reset, a hand, another plan)"
        )
    spots = tuple(scene.previous[b][:2] for b in request.blocks)
    lines = ["# back where each block was before the last instruction moved it"]
    lines += [_place_line(b, s) for b, s in zip(request.blocks, spots, strict=True)]
    goal = _at_goal(request, request.blocks, spots, "back where it was", scene, on_table=False)
    return "\n".join(lines), goal


def _at_goal(request, blocks, spots, what, scene: Scene, on_table: bool = True) -> Goal:
    half = scene.description.objects.block_half
    tolerance = max(2.0 * half, 0.25 * request.distance)
    points = tuple((round(float(s[0]), 4), round(float(s[1]), 4)) for s in spots)
    kind = "at_point" if on_table else "at_point_any"
    return Goal(
        kind,
        objects=tuple(blocks),
        place=what,
        points=points,
        tolerance=tolerance,
        request=request.kind,
    )


def _place_code(block: str, spot, what: str) -> str:
    return f"# the {block} {what}\n{_place_line(block, spot)}"


def _place_line(block: str, spot) -> str:
    return f"put_first_on_second({block!r}, {_array(spot)})"


def _array(spot) -> str:
    return f"np.array([{spot[0]:.3f}, {spot[1]:.3f}, 0.0])"


def _footprint(scene: Scene, name: str) -> float:
    sizes = scene.description.objects
    return sizes.bowl_radius if scene.kinds.get(name) == "bowl" else sizes.block_half * math.sqrt(2)


def _free(scene: Scene, spot, ignore=(), only=None) -> str | None:
    """None when a block can lie at ``spot``: on the reachable table and clear of every other
    object (of ``only``, when given); else why not."""
    ws, sizes = scene.description.workspace, scene.description.objects
    margin = sizes.block_half * math.sqrt(2)
    x, y = float(spot[0]), float(spot[1])
    if not (
        ws.x[0] + margin <= x <= ws.x[1] - margin and ws.y[0] + margin <= y <= ws.y[1] - margin
    ):
        return f"[{x:.2f}, {y:.2f}] is off the table's working area"
    radius = math.hypot(x, y)
    if not ws.min_radius + margin <= radius <= ws.max_radius - margin:
        return f"[{x:.2f}, {y:.2f}] is {radius * 100:.0f} cm from the base, out of the arm's reach"
    for name in scene.positions if only is None else only:
        if name in ignore:
            continue
        gap = math.dist(scene.positions[name][:2], (x, y)) - _footprint(scene, name) - margin
        if gap < CLEARANCE:
            return f"the {name} is in the way at [{x:.2f}, {y:.2f}]"
    return None


_WRITERS = {
    "all_in_bowl": _pairs,
    "matching": _pairs,
    "tower": _tower,
    "stack_on": _stack_on,
    "corner": _corner,
    "beside": _beside,
    "line": _line,
    "offset": _offset,
    "between": _between,
    "back": _back,
}
