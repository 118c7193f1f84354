"""Task families of the Code-as-Policies tabletop benchmark, with splits and success checks.

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

Episodes are a pure function of (family, split, seed, index, robot): ``make_episode``.
"""

from __future__ import annotations

import math
import textwrap
import zlib
from dataclasses import asdict, dataclass, field

import numpy as np

from lang2policy.errors import ConfigError, UnreachableError
from lang2policy.scene.layout import footprint_radius
from lang2policy.scene.robot_description import RobotDescription
from lang2policy.scene.world import World
from lang2policy.skills.geometry import corner_point

# ----------------------------------------------------------------------------- attributes
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


# ----------------------------------------------------------------------------- episodes
@dataclass(frozen=True)
class Task:
    """What a family drew for one episode: the objects on the table and the task's
    parameters (object names, corner, direction, ...) that the instruction and checks use."""

    objects: tuple[str, ...]
    params: dict[str, str]


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


@dataclass(frozen=True)
class Check:
    success: bool
    reason: str


# ----------------------------------------------------------------------------- geometry
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


# ----------------------------------------------------------------------------- programs
# Shared helpers of the reference programs. Setting a block down with move_to + open_gripper
# (let_go_at) puts it where asked to within a few millimetres.
HELPERS = '''
def size_of(obj):
    box = get_bbox(obj)
    return box[1] - box[0]


def let_go_at(block, goal):
    """Lower the held block until its centre is at goal, let go, back off upwards."""
    above = goal + np.array([0.0, 0.0, 0.04])
    move_to(above)
    hang = get_obj_pos(block)[2] - get_ee_pos()[2]
    move_to(goal - np.array([0.0, 0.0, hang]))
    open_gripper()
    move_to(above)


def put_at(block, point):
    """Put the block down on the table with its centre at point's x, y."""
    pick(block)
    let_go_at(block, np.array([point[0], point[1], size_of(block)[2] / 2 + 0.004]))
'''
STACK_BY_PLACE = '''

def put_on_top(block, base):
    """Stack the block on base."""
    put_first_on_second(block, base)
'''
STACK_BY_LOWERING = '''

def put_on_top(block, base):
    """Stack the block on base, centred: lower it onto base with move_to and let go."""
    pick(block)
    top = get_bbox(base)[1][2]
    centre = get_obj_pos(base)
    let_go_at(block, np.array([centre[0], centre[1], top + size_of(block)[2] / 2 + 0.004]))
'''
# Arms on which put_first_on_second(block, other_block) leaves the block too far off-centre for
# a tower to stand: on SO-101 the held block hangs ~1.3 cm off the tool point (towards the fixed
# jaw) and place() turns the wrist a quarter turn from move_to's yaw, so blocks land 1-2 cm off
# (4 of 12 two-block stacks stood); lowering with move_to stands 10 of 10 three-block towers.
# On a Panda put_first_on_second stacks well and the move_to route knocks towers over.
STACK_BY_LOWERING_ARMS = frozenset({"so101"})


def _program(body: str, helpers: bool = False, description: RobotDescription | None = None) -> str:
    code = textwrap.dedent(body).strip() + "\n"
    if not helpers:
        return code
    text = HELPERS
    if description is not None:
        lowering = description.name in STACK_BY_LOWERING_ARMS
        text += STACK_BY_LOWERING if lowering else STACK_BY_PLACE
    return text.lstrip() + "\n\n" + code


# ----------------------------------------------------------------------------- families
class TaskFamily:
    """One kind of instruction. Subclasses fill in the class attributes and ``draw``,
    ``reference`` and ``check``; ``scene_ok`` defaults to any layout."""

    name = ""
    category = ""  # "simple" | "long-horizon" | "spatial"
    seen_phrasings: tuple[str, ...] = ()
    unseen_phrasings: tuple[str, ...] = ()

    def draw(self, rng: np.random.Generator, attrs: Attributes, max_objects: int) -> Task:
        raise NotImplementedError

    def scene_ok(self, session, task: Task) -> bool:
        """Does the layout just drawn (``session.world``) leave room for the task?"""
        return True

    def reference(self, task: Task, description: RobotDescription) -> str:
        raise NotImplementedError

    def check(self, world: World, task: Task) -> Check:
        raise NotImplementedError

    def phrasings(self, split: Split) -> tuple[str, ...]:
        return self.unseen_phrasings if split.unseen_phrasing else self.seen_phrasings


def _colors(rng: np.random.Generator, attrs: Attributes, count: int) -> list[str]:
    return [str(c) for c in rng.choice(attrs.colors, size=count, replace=False)]


def _extra_bowls(rng, attrs, used: list[str], count: int) -> list[str]:
    left = [c for c in attrs.colors if c not in used]
    return [f"{c} bowl" for c in rng.choice(left, size=count, replace=False)]


class PickPlace(TaskFamily):
    name = "pick_place"
    category = "simple"
    seen_phrasings = ("put the {block} in the {bowl}", "place the {block} in the {bowl}")
    unseen_phrasings = (
        "drop the {block} into the {bowl}",
        "the {block} belongs in the {bowl}, move it there",
    )

    def draw(self, rng, attrs, max_objects):
        blocks = [f"{c} block" for c in _colors(rng, attrs, 2)]
        bowls = [f"{c} bowl" for c in _colors(rng, attrs, 2)]
        params = {"block": blocks[0], "bowl": bowls[0]}
        return Task(tuple(blocks + bowls), params)

    def reference(self, task, description):
        p = task.params
        return _program(f"put_first_on_second({p['block']!r}, {p['bowl']!r})\ngo_home()")

    def check(self, world, task):
        block, bowl = task.params["block"], task.params["bowl"]
        if in_bowl(world, block, bowl):
            return Check(True, f"the {block} is in the {bowl}")
        return Check(False, f"the {block} is not in the {bowl}")


class MatchingBowls(TaskFamily):
    name = "matching_bowls"
    category = "long-horizon"
    seen_phrasings = (
        "put all the blocks in the bowls with matching colors",
        "put each block in the bowl of the same color",
    )
    unseen_phrasings = (
        "sort the blocks into the bowls by color",
        "every block goes into the bowl that has its color",
    )

    def draw(self, rng, attrs, max_objects):
        pairs = 3 if max_objects >= 7 else 2
        colors = _colors(rng, attrs, pairs)
        names = [f"{c} block" for c in colors] + [f"{c} bowl" for c in colors]
        if len(names) < max_objects:  # a bowl no block matches
            names += _extra_bowls(rng, attrs, colors, 1)
        return Task(tuple(names), {})

    def reference(self, task, description):
        return _program(
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
    seen_phrasings = ("put all the blocks in the {bowl}", "put the blocks in the {bowl}")
    unseen_phrasings = (
        "gather every block inside the {bowl}",
        "collect all of the blocks into the {bowl}",
    )

    def draw(self, rng, attrs, max_objects):
        # Two blocks: a bowl holds two side by side on every arm (three get wedged in a Panda's)
        blocks = [f"{c} block" for c in _colors(rng, attrs, 2)]
        bowls = [f"{c} bowl" for c in _colors(rng, attrs, 3 if max_objects >= 7 else 2)]
        return Task(tuple(blocks + bowls), {"bowl": bowls[0]})

    def reference(self, task, description):
        # Side by side across the bowl (seen from the robot), so the jaws open away from the
        # rim; three or more on a ring. Each spot is taken from where the bowl is now: a block
        # set down in it can nudge it.
        return _program(
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
    seen_phrasings = ("stack all the blocks", "stack the blocks on top of each other")
    unseen_phrasings = (
        "build a single tower out of all the blocks",
        "pile every block up into one stack",
    )

    def draw(self, rng, attrs, max_objects):
        # Three blocks: four take a Panda close to the 120 s motion budget of one program
        blocks = [f"{c} block" for c in _colors(rng, attrs, 3)]
        bowls = [f"{c} bowl" for c in _colors(rng, attrs, 2 if max_objects >= 7 else 1)]
        return Task(tuple(blocks + bowls), {})

    def scene_ok(self, session, task):
        return spot_is_free(session.world, _stack_spot(session.world.description))

    def reference(self, task, description):
        return _program(
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


class Corner(TaskFamily):
    name = "corner"
    category = "spatial"
    seen_phrasings = ("put the {block} {at_place}", "move the {block} to {place}")
    unseen_phrasings = (
        "take the {block} over to {place} of the table",
        "I want the {block} sitting {at_place}",
    )

    def draw(self, rng, attrs, max_objects):
        blocks = [f"{c} block" for c in _colors(rng, attrs, 2)]
        bowls = [f"{c} bowl" for c in _colors(rng, attrs, 2 if max_objects >= 5 else 1)]
        corner = str(rng.choice(sorted(attrs.places)))
        place = attrs.places[corner]
        at_place = ("in " if place.endswith("corner") else "on ") + place
        params = {"block": blocks[0], "corner": corner, "place": place, "at_place": at_place}
        return Task(tuple(blocks + bowls), params)

    def scene_ok(self, session, task):
        p = task.params
        world = session.world
        return spot_is_free(world, corner_point(world.description, p["corner"]), (p["block"],))

    def reference(self, task, description):
        p = task.params
        return _program(
            f"""
            put_at({p["block"]!r}, get_corner_pos({p["corner"]!r}))
            go_home()
            """,
            helpers=True,
        )

    def check(self, world, task):
        block, corner = task.params["block"], task.params["corner"]
        target = corner_point(world.description, corner)
        distance = math.dist(xy(world, block), target[:2])
        tolerance = 4 * world.description.objects.block_half
        if not resting_on_table(world, block):
            return Check(False, f"the {block} is not lying on the table")
        if distance > tolerance:
            return Check(
                False, f"the {block} is {distance * 100:.1f} cm from {task.params['place']}"
            )
        return Check(True, f"the {block} is {distance * 100:.1f} cm from {task.params['place']}")


def _beside_offset(description: RobotDescription) -> float:
    """How far from a bowl's centre the reference puts a block beside it."""
    sizes = description.objects
    return sizes.bowl_radius + 2.2 * sizes.block_half


class BesideBowl(TaskFamily):
    name = "beside_bowl"
    category = "spatial"
    seen_phrasings = (
        "put the {block} to the {direction} of the {bowl}",
        "place the {block} to the {direction} of the {bowl}",
    )
    unseen_phrasings = (
        "set the {block} down on the {direction} side of the {bowl}",
        "move the {block} next to the {bowl}, on its {direction}",
    )

    def draw(self, rng, attrs, max_objects):
        blocks = [f"{c} block" for c in _colors(rng, attrs, 2)]
        bowls = [f"{c} bowl" for c in _colors(rng, attrs, 2)]
        direction = str(rng.choice(attrs.directions))
        params = {"block": blocks[0], "bowl": bowls[0], "direction": direction}
        return Task(tuple(blocks + bowls), params)

    def _spot(self, world: World, task: Task) -> np.ndarray:
        unit = np.array(DIRECTIONS[task.params["direction"]])
        return xy(world, task.params["bowl"]) + unit * _beside_offset(world.description)

    def scene_ok(self, session, task):
        spot = self._spot(session.world, task)
        ignore = (task.params["block"], task.params["bowl"])  # the offset keeps clear of the bowl
        return spot_is_free(session.world, spot, ignore) and spot_is_reachable(session, spot)

    def reference(self, task, description):
        p = task.params
        dx, dy = DIRECTIONS[p["direction"]]
        return _program(
            f"""
            # {p["direction"]} of the bowl: top = +x, left = +y in the robot's frame
            bowl, block = {p["bowl"]!r}, {p["block"]!r}
            gap = size_of(bowl)[0] / 2 + 1.1 * size_of(block)[2]
            put_at(block, get_obj_pos(bowl) + gap * np.array([{dx}, {dy}, 0.0]))
            go_home()
            """,
            helpers=True,
        )

    def check(self, world, task):
        p = task.params
        block, bowl = p["block"], p["bowl"]
        sizes = world.description.objects
        unit = np.array(DIRECTIONS[p["direction"]])
        offset = xy(world, block) - xy(world, bowl)
        along = float(offset @ unit)
        across = abs(float(offset[0] * unit[1] - offset[1] * unit[0]))
        where = f"{along * 100:.1f} cm {p['direction']} and {across * 100:.1f} cm off to the side"
        if not resting_on_table(world, block):
            return Check(False, f"the {block} is not lying on the table")
        if along < sizes.bowl_radius:
            return Check(False, f"the {block} is not {p['direction']} of the {bowl} ({where})")
        if along > sizes.bowl_radius + 6 * sizes.block_half or across > 0.6 * along:
            return Check(False, f"the {block} is not next to the {bowl} ({where})")
        return Check(True, f"the {block} is {where} of the {bowl}")


def _line_spots(description: RobotDescription, orientation: str, count: int) -> list[np.ndarray]:
    """Where the reference program puts ``count`` blocks in a line through the centre."""
    centre = corner_point(description, "center")[:2]
    step = 4.4 * description.objects.block_half
    unit = np.array(LINES[orientation])
    return [centre + unit * step * (i - (count - 1) / 2) for i in range(count)]


class Line(TaskFamily):
    name = "line"
    category = "spatial"
    seen_phrasings = ("put the blocks in a {line} line", "arrange the blocks in a {line} line")
    unseen_phrasings = (
        "line up all the blocks along a {line} line",
        "make a {line} row out of the blocks",
    )

    def draw(self, rng, attrs, max_objects):
        count = 4 if max_objects >= 7 else 3
        blocks = [f"{c} block" for c in _colors(rng, attrs, count)]
        bowls = [f"{c} bowl" for c in _colors(rng, attrs, max(0, min(2, max_objects - count - 1)))]
        return Task(tuple(blocks + bowls), {"line": str(rng.choice(attrs.lines))})

    def scene_ok(self, session, task):
        world = session.world
        spots = _line_spots(world.description, task.params["line"], len(blocks_of(task.objects)))
        return all(spot_is_free(world, s) for s in spots)

    def reference(self, task, description):
        dx, dy = LINES[task.params["line"]]
        return _program(
            f"""
            # a {task.params["line"]} line through the middle of the table (top = +x, left = +y)
            blocks = [n for n in get_obj_names() if n.endswith('block')]
            direction = np.array([{dx:.4f}, {dy:.4f}, 0.0])
            step = 2.2 * size_of(blocks[0])[2]  # block height = its width
            centre = get_corner_pos('center')
            for i, block in enumerate(blocks):
                put_at(block, centre + direction * step * (i - (len(blocks) - 1) / 2))
            go_home()
            """,
            helpers=True,
        )

    def check(self, world, task):
        blocks = blocks_of(task.objects)
        half = world.description.objects.block_half
        off_table = [b for b in blocks if not resting_on_table(world, b)]
        if off_table:
            return Check(False, f"not lying on the table: {', '.join(off_table)}")
        points = np.array([xy(world, b) for b in blocks])
        closest = min(math.dist(a, b) for i, a in enumerate(points) for b in points[i + 1 :])
        if closest < 2.2 * half:
            return Check(False, f"two blocks touch ({closest * 100:.1f} cm apart)")
        centred = points - points.mean(axis=0)
        _, _, axes = np.linalg.svd(centred)
        axis = axes[0]
        residual = float(np.max(np.abs(centred @ np.array([-axis[1], axis[0]]))))
        if residual > 1.2 * half:
            return Check(False, f"not in a line: a block is {residual * 100:.1f} cm off it")
        # angle of the line from the left-right (y) axis, 0..90 degrees
        angle = math.degrees(math.atan2(abs(axis[0]), abs(axis[1])))
        wanted = task.params["line"]
        ok = {
            "horizontal": angle <= 15,
            "vertical": angle >= 75,
            "diagonal": 30 <= angle <= 60,
        }[wanted]
        shape = f"a line {angle:.0f} deg from left-right"
        return Check(ok, f"{shape}: {'is' if ok else 'not'} {wanted}")


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
    for _ in range(_LAYOUT_TRIES):
        reset_seed = int(rng.integers(0, 2**31 - 1))
        try:
            session.reset(reset_seed, list(task.objects))
        except ConfigError:  # these objects did not fit with this seed
            continue
        world = session.world
        if task_family.scene_ok(session, task) and not task_family.check(world, task).success:
            break
    else:
        raise ConfigError(
            f"{task_family.name}: no layout of {list(task.objects)} on {description.name} "
            f"leaves room for the task in {_LAYOUT_TRIES} tries"
        )
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


def check_episode(world: World, episode: Episode) -> Check:
    """Judge the simulator state against the episode's task."""
    return family(episode.family).check(world, Task(episode.objects, episode.params))
