"""The spatial task families of the Code-as-Policies tabletop benchmark: a block in a corner or
side of the table, beside a bowl, the blocks in a line (see ``bench.cap_families``).
"""

from __future__ import annotations

import math

import numpy as np

from lang2policy.bench.cap_checks import (
    Check,
    Task,
    blocks_of,
    resting_on_table,
    spot_is_free,
    spot_is_reachable,
    xy,
)
from lang2policy.bench.cap_families import TaskFamily, blocks_and_bowls
from lang2policy.bench.cap_programs import program
from lang2policy.bench.cap_splits import DIRECTIONS, LINES
from lang2policy.scene.robot_description import RobotDescription
from lang2policy.scene.world import World
from lang2policy.skills.geometry import corner_point


class Corner(TaskFamily):
    name = "corner"
    category = "spatial"

    def draw(self, rng, attrs, max_objects):
        blocks, bowls = blocks_and_bowls(rng, attrs, 2, 2 if max_objects >= 5 else 1)
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
        return program(
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

    def draw(self, rng, attrs, max_objects):
        blocks, bowls = blocks_and_bowls(rng, attrs, 2, 2)
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
        return program(
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

    def draw(self, rng, attrs, max_objects):
        count = 4 if max_objects >= 7 else 3
        blocks, bowls = blocks_and_bowls(rng, attrs, count, max(0, min(2, max_objects - count - 1)))
        return Task(tuple(blocks + bowls), {"line": str(rng.choice(attrs.lines))})

    def scene_ok(self, session, task):
        world = session.world
        spots = _line_spots(world.description, task.params["line"], len(blocks_of(task.objects)))
        return all(spot_is_free(world, s) for s in spots)

    def reference(self, task, description):
        dx, dy = LINES[task.params["line"]]
        return program(
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
