"""The scripted expert of each VLA task family (issue 17): the motion primitives the planner's
code calls, run directly. They make the demonstrations and stand beside the policy in the
benchmark on the same scenes.
"""

from __future__ import annotations

import numpy as np

from lang2policy.errors import UnreachableError
from lang2policy.session.sim import SimSession
from lang2policy.vla.spec.tasks import LIFT_HEIGHT, PUSH_DISTANCE, SIDE_DIRECTIONS, Task

HOLD_AT_END = 1.0  # s the arm holds still after the task (the policy learns to stop)


def push_target(session: SimSession, task: Task) -> np.ndarray:
    """Where the oracle pushes the block: ``PUSH_DISTANCE`` towards the task's side."""
    start = session.world.object_pose(task.block).position[:2]
    return start + PUSH_DISTANCE * np.array(SIDE_DIRECTIONS[task.side])


def inside_workspace(session: SimSession, xy: np.ndarray) -> bool:
    """Whether ``xy`` lies where the workspace places objects (rectangle and reach ring)."""
    space = session.world.description.workspace
    radius = float(np.hypot(*xy))
    return bool(
        space.x[0] <= xy[0] <= space.x[1]
        and space.y[0] <= xy[1] <= space.y[1]
        and space.min_radius <= radius <= space.max_radius
    )


def check_feasible(session: SimSession, task: Task) -> None:
    """Raise ``UnreachableError`` (the arm untouched) if the oracle cannot do ``task`` here."""
    primitives = session.primitives
    if task.family == "push":
        target = push_target(session, task)
        if not inside_workspace(session, target):
            raise UnreachableError(f"push target {np.round(target, 3)} leaves the workspace")
        primitives.plan_push(task.block, target)


def run_oracle(session: SimSession, task: Task) -> None:
    """Do ``task`` with the motion primitives, then hold still for ``HOLD_AT_END``."""
    primitives = session.primitives
    if task.family == "pick_place":
        primitives.pick(task.block)
        primitives.place(task.block, task.bowl)
    elif task.family == "push":
        primitives.push(task.block, push_target(session, task))
    else:
        rest = session.world.object_pose(task.block).position[2]
        primitives.pick(task.block)
        point = primitives.tool_point()
        primitives.move_to_position([point[0], point[1], rest + LIFT_HEIGHT])
    primitives.stop()
    primitives.hold_still(HOLD_AT_END)
