"""Whether a VLA task is done, judged from the simulator's object poses (issue 17).

The same judge scores the scripted demonstrations (``demos``), the policy's closed-loop
episodes (``rollout``) and the benchmark, so "success" means one thing everywhere:

- pick_place: the block rests inside the bowl (``World.is_in``);
- push: the block moved at least ``PUSH_SUCCESS`` along its side's direction, at most half
  as far across it, and still rests on the table (not carried);
- lift: the block is at least ``LIFT_SUCCESS`` above the height it rested at.
"""

from __future__ import annotations

import numpy as np

from lang2policy.scene.world import World
from lang2policy.vla.spec.tasks import LIFT_SUCCESS, PUSH_SUCCESS, SIDE_DIRECTIONS, Task

RESTING = 0.01  # m: a block within this of its starting height rests on the table


def start_positions(world: World, task: Task) -> dict[str, np.ndarray]:
    """The task's objects' positions before anything moved (what ``judge`` compares with)."""
    return {name: world.object_pose(name).position.copy() for name in task.objects()}


def judge(world: World, task: Task, start: dict[str, np.ndarray]) -> tuple[bool, str]:
    """(done, why) for ``task`` in ``world`` now."""
    now = world.object_pose(task.block).position
    moved = now - start[task.block]
    if task.family == "pick_place":
        inside = world.is_in(task.block, task.bowl)
        return inside, f"{task.block} {'in' if inside else 'not in'} the {task.bowl}"
    if task.family == "lift":
        height = float(moved[2])
        return height >= LIFT_SUCCESS, f"{task.block} {100 * height:.1f} cm above its rest"
    direction = np.array(SIDE_DIRECTIONS[task.side])
    along = float(moved[:2] @ direction)
    across = abs(float(moved[0] * direction[1] - moved[1] * direction[0]))
    resting = abs(float(moved[2])) < RESTING
    done = along >= PUSH_SUCCESS and across <= 0.5 * along and resting
    return done, (
        f"{task.block} moved {100 * along:.1f} cm {task.side}, {100 * across:.1f} cm across"
        + ("" if resting else ", off the table")
    )
