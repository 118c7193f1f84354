"""The privileged scene state recorded beside each frame (issue 17): where the named block is and
where the task wants it, as LeRobot's ``observation.environment_state`` feature.

The policy never sees it at run time (it acts from images, state and words). Training uses it
as an auxiliary target: predicting the named block's position and the goal from the images
teaches the encoder to find the object the instruction names far sooner than the action loss
alone does (the first checkpoint, trained on actions only, turned the arm towards the wrong
side of the table). Positions are metres in the robot's base frame; the block's yaw is given as
``cos 4θ, sin 4θ`` because a cube looks the same every quarter turn.
"""

from __future__ import annotations

import numpy as np

from lang2policy.scene.world import World
from lang2policy.vla.spec.tasks import LIFT_HEIGHT, PUSH_DISTANCE, SIDE_DIRECTIONS, Task

ENV_NAMES = (
    "block_x", "block_y", "block_z", "goal_x", "goal_y", "goal_z", "block_cos4yaw", "block_sin4yaw",
)  # fmt: skip
ENV_DIM = len(ENV_NAMES)


def task_goal(world: World, task: Task) -> np.ndarray:
    """Where ``task`` wants its block, from the scene before anything moved (``[3]``, m):
    the bowl (pick_place), ``PUSH_DISTANCE`` towards the side (push), ``LIFT_HEIGHT`` above
    the block (lift)."""
    block = world.object_pose(task.block).position
    if task.family == "pick_place":
        return world.object_pose(task.bowl).position.astype(float).copy()
    if task.family == "push":
        direction = np.array([*SIDE_DIRECTIONS[task.side], 0.0])
        return block + PUSH_DISTANCE * direction
    return block + np.array([0.0, 0.0, LIFT_HEIGHT])


def environment_state(world: World, task: Task, goal: np.ndarray) -> np.ndarray:
    """``float32 [ENV_DIM]``: the named block's position and yaw now, and ``goal``."""
    yaw = world.object_yaw(task.block)
    block = world.object_pose(task.block).position
    return np.array([*block, *goal, np.cos(4 * yaw), np.sin(4 * yaw)], np.float32)
