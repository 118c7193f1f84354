"""Language-to-Rewards manipulation tasks on the SO-101 tabletop, in the spirit of the paper's.

Each task draws a seeded scene, names an instruction (what a user would type, for the LLM track)
and a reference spec (what a careful engineer would write). The task's own ``judge`` conditions
decide success from simulator state for both tracks, so an LLM spec is judged by the same rule
as the reference one, not by whatever success condition the LLM chose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lang2policy.scene.world import World


@dataclass(frozen=True)
class TaskInstance:
    instruction: str
    reference: dict  # a reward spec (JSON-able) that solves the task
    judge: dict  # a spec whose terms + success conditions define task success
    objects: list[str]


def _blocks(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith("block")]


def _bowls(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith("bowl")]


def grasp_terms(block: str) -> list[dict]:
    """Terms that reach for, grasp and hold the block square, tool pointing down."""
    return [
        {"term": "reach", "weight": 1.0, "params": {"object": block}},
        {"term": "grasp", "weight": 0.3, "params": {"object": block, "radius": 0.01}},
        {"term": "grasp_align", "weight": 0.1, "params": {"object": block}},
        {"term": "tool_pointing_down", "weight": 0.05},
    ]


def _judge(terms: list[dict], conditions: list[dict], hold: float = 0.5) -> dict:
    return {"terms": terms, "success": {"all": conditions, "hold": hold}, "duration": 60}


def _point_near(world: World, rng: np.random.Generator, avoid: list[str]) -> list[float]:
    """A free table point inside the workspace, at least 6 cm from the given objects."""
    ws = world.description.workspace
    for _ in range(200):
        x, y = rng.uniform(*ws.x), rng.uniform(*ws.y)
        if not ws.min_radius <= np.hypot(x, y) <= ws.max_radius:
            continue
        if all(np.hypot(*(np.array([x, y]) - world.object_pose(n).position[:2])) > 0.06
               for n in avoid):
            return [round(float(x), 3), round(float(y), 3)]
    return [0.2, 0.0]


def lift(world: World, rng: np.random.Generator) -> TaskInstance:
    block = str(rng.choice(_blocks(world.present)))
    height = float(rng.choice([0.06, 0.08, 0.1]))
    lift_term = {"id": "lift", "term": "object_height", "weight": 3.0,
                 "params": {"object": block, "height": height}}
    spec = {"task": "lift", "duration": 20, "terms": [*grasp_terms(block), lift_term],
            "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5}}
    judge = _judge([lift_term], [{"term": "lift", "below": 0.02}])
    return TaskInstance(f"lift the {block} {round(height * 100)} cm", spec, judge, world.present)


def move_to_point(world: World, rng: np.random.Generator) -> TaskInstance:
    block = str(rng.choice(_blocks(world.present)))
    x, y = _point_near(world, rng, world.present)
    goal = {"id": "goal", "term": "object_to_point", "weight": 3.0,
            "params": {"object": block, "point": [x, y, 0.0125], "axes": "xy"}}
    spec = {"task": "move to point", "duration": 15, "terms": [
        {"term": "push", "weight": 1.0, "params": {"object": block, "point": [x, y, 0.0125]}},
        {"term": "gripper", "weight": 0.2, "params": {"opening": 0.0}}, goal],
        "success": {"all": [{"term": "goal", "below": 0.03}], "hold": 0.3}}
    judge = _judge([goal], [{"term": "goal", "below": 0.03}], 0.3)
    text = f"move the {block} to x={x:.2f} m, y={y:.2f} m"
    return TaskInstance(text, spec, judge, world.present)


def push(world: World, rng: np.random.Generator) -> TaskInstance:
    block = str(rng.choice(_blocks(world.present)))
    start = world.object_pose(block).position
    radial = start[:2] / np.linalg.norm(start[:2])
    target = start[:2] + 0.05 * radial * float(rng.choice([-1.0, 1.0]))
    point = [round(float(target[0]), 3), round(float(target[1]), 3), 0.0125]
    goal = {"id": "goal", "term": "object_to_point", "weight": 3.0,
            "params": {"object": block, "point": point, "axes": "xy"}}
    flat = {"id": "flat", "term": "object_height", "weight": 1.0,
            "params": {"object": block, "height": 0.0, "mode": "at_most"}}
    spec = {"task": "push", "duration": 15, "terms": [
        {"term": "push", "weight": 1.0, "params": {"object": block, "point": point}},
        {"term": "gripper", "weight": 0.2, "params": {"opening": 0.0}}, goal, flat],
        "success": {"all": [{"term": "goal", "below": 0.02},
                            {"term": "flat", "always_below": 0.02}], "hold": 0.3}}
    judge = _judge([goal, flat], [{"term": "goal", "below": 0.02},
                                  {"term": "flat", "always_below": 0.02}], 0.3)
    direction = "away from" if np.dot(target - start[:2], radial) > 0 else "toward"
    return TaskInstance(f"push the {block} 5 cm {direction} the robot without picking it up",
                        spec, judge, world.present)


def turn(world: World, rng: np.random.Generator) -> TaskInstance:
    block = str(rng.choice(_blocks(world.present)))
    yaw = round(float(np.rad2deg(world.object_yaw(block))) + 45.0, 1)
    yaw = (yaw + 180.0) % 360.0 - 180.0
    goal = {"id": "yaw", "term": "object_yaw", "weight": 1.0,
            "params": {"object": block, "yaw_deg": yaw}}
    flat = {"id": "flat", "term": "object_upright", "weight": 0.5, "params": {"object": block}}
    spec = {"task": "turn", "duration": 15, "terms": [*grasp_terms(block), goal, flat],
            "success": {"all": [{"term": "yaw", "below": 0.17}, {"term": "flat", "below": 0.1}],
                        "hold": 0.5}}
    judge = _judge([goal, flat], [{"term": "yaw", "below": 0.17},
                                  {"term": "flat", "below": 0.1}])
    return TaskInstance(f"turn the {block} by 45 degrees", spec, judge, world.present)


def place_on(world: World, rng: np.random.Generator) -> TaskInstance:
    block = str(rng.choice(_blocks(world.present)))
    bowl = str(rng.choice(_bowls(world.present)))
    goal = {"id": "on", "term": "object_on", "weight": 3.0,
            "params": {"object": block, "target": bowl, "offset": 0.02}}
    spec = {"task": "place on", "duration": 15, "terms": [*grasp_terms(block), goal],
            "success": {"all": [{"term": "on", "below": 0.025}], "hold": 0.5}}
    judge = _judge([goal], [{"term": "on", "below": 0.025}])
    return TaskInstance(f"put the {block} in the {bowl}", spec, judge, world.present)


def hover(world: World, rng: np.random.Generator) -> TaskInstance:
    target = str(rng.choice(world.present))
    point = [round(float(v), 3) for v in world.object_pose(target).position[:2]] + [0.0]
    height = float(rng.choice([0.08, 0.1, 0.12]))
    goal = {"id": "above", "term": "tool_above", "weight": 1.0,
            "params": {"point": point, "height": height}}
    spec = {"task": "hover", "duration": 8, "terms": [goal],
            "success": {"all": [{"term": "above", "below": 0.015}], "hold": 1.0}}
    judge = _judge([goal], [{"term": "above", "below": 0.015}], 1.0)
    return TaskInstance(f"hold the gripper {round(height * 100)} cm above the {target}",
                        spec, judge, world.present)


def move_slowly(world: World, rng: np.random.Generator) -> TaskInstance:
    x, y = _point_near(world, rng, [])
    point = [x, y, 0.08]
    goal = {"id": "goal", "term": "tool_to_point", "weight": 1.0, "params": {"point": point}}
    speed = {"id": "speed", "term": "tool_speed", "weight": 10.0,
             "params": {"speed": 0.05, "mode": "at_most"}}
    spec = {"task": "slowly", "duration": 20, "terms": [{**goal, "weight": 2.0}, speed],
            "success": {"all": [{"term": "goal", "below": 0.015},
                                {"term": "speed", "always_below": 0.04}], "hold": 0.3}}
    judge = _judge([goal, speed], [{"term": "goal", "below": 0.015},
                                   {"term": "speed", "always_below": 0.04}], 0.3)
    text = f"move the gripper slowly (under 5 cm/s) to x={x:.2f}, y={y:.2f}, 8 cm up"
    return TaskInstance(text, spec, judge, world.present)


def avoid_region(world: World, rng: np.random.Generator) -> TaskInstance:
    side = float(rng.choice([-1.0, 1.0]))
    point = [0.2, round(0.12 * side, 3), 0.06]
    region = {"id": "region", "term": "keep_out", "weight": 50.0,
              "params": {"point": [0.2, round(0.05 * side, 3), 0.03],
                         "half_size": [0.04, 0.02, 0.03], "margin": 0.01}}
    goal = {"id": "goal", "term": "tool_to_point", "weight": 1.0, "params": {"point": point}}
    spec = {"task": "avoid", "duration": 12, "terms": [goal, region],
            "success": {"all": [{"term": "goal", "below": 0.015},
                                {"term": "region", "always_below": 0.005}], "hold": 0.3}}
    judge = _judge([goal, region], [{"term": "goal", "below": 0.015},
                                    {"term": "region", "always_below": 0.005}], 0.3)
    text = (f"move the gripper to x=0.20, y={point[1]:.2f}, 6 cm up, keeping out of the 6 cm "
            f"tall box at x=0.20, y={0.05 * side:.2f}")
    return TaskInstance(text, spec, judge, world.present)


TASKS: dict[str, Callable[[World, np.random.Generator], TaskInstance]] = {
    "lift": lift, "move_to_point": move_to_point, "push": push, "turn": turn,
    "place_on": place_on, "hover": hover, "move_slowly": move_slowly,
    "avoid_region": avoid_region,
}
