"""The instruction reader's plan: a program written from the instruction's words, no LLM call.

``read_plan`` reads the request (``spatial_phrases`` first: an offset, "between", "back";
then ``goal_phrases``: all in a bowl, matching bowls, a tower, a line, beside, a corner) and
has ``request_programs`` write the program with the spots resolved from the scene. None
when the words name no such request: the LLM plans it, as before.
"""

from __future__ import annotations

import numpy as np

from lang2policy.planning.goal_phrases import read_request
from lang2policy.planning.request_programs import Refusal, Scene, Written, write
from lang2policy.planning.spatial_phrases import read_spatial
from lang2policy.scene.robot_description import RobotDescription

MOVED_METRES = 0.02  # an object whose centre moved farther than this (in x, y) was moved
STILL = 0.02  # m: a block within this of where the last instruction left it has not moved since


def read_plan(
    instruction: str,
    positions: dict[str, np.ndarray],
    kinds: dict[str, str],
    description: RobotDescription,
    memory: MovedMemory,
) -> Written | Refusal | None:
    """The reader's program and goal for ``instruction``, a refusal that says why it cannot
    be done on this scene, or None when the reader does not recognise the request."""
    objects = list(positions)
    request = read_spatial(instruction, objects, kinds, memory.last_moved)
    if request is None:
        request = read_request(instruction, objects, kinds)
    if request is None:
        return None
    scene = Scene(positions, kinds, description, memory.still_valid(positions))
    return write(request, scene)


def moved_between(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> list[str]:
    """The objects whose centre moved more than ``MOVED_METRES`` (x, y) from before to after."""
    return [
        name
        for name, start in before.items()
        if name in after and np.linalg.norm(after[name][:2] - start[:2]) > MOVED_METRES
    ]


class MovedMemory:
    """Where the blocks the last finished instruction moved were before it: what "put it
    back" returns them to, and which blocks "it" and "them" are."""

    def __init__(self) -> None:
        self.previous: dict[str, np.ndarray] = {}
        self.left_at: dict[str, np.ndarray] = {}  # where that instruction left each of them
        self.last_moved: tuple[str, ...] = ()

    def remember(self, before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> None:
        """The objects that moved from their ``before`` positions to ``after``; nothing moved
        keeps the memory as it was (a question does not make "it" mean nothing)."""
        moved = moved_between(before, after)
        if not moved:
            return
        self.last_moved = tuple(moved)
        self.previous.update({n: np.asarray(before[n], dtype=float) for n in moved})
        self.left_at.update({n: np.asarray(after[n], dtype=float) for n in moved})

    def still_valid(self, positions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The remembered starting points of the blocks that are still where the instruction
        left them: one moved since (a reset of the scene, a hand, another plan) has no "back"
        the planner can know."""
        return {
            name: start
            for name, start in self.previous.items()
            if name in positions
            and float(np.linalg.norm(positions[name][:2] - self.left_at[name][:2])) <= STILL
        }

    def clear(self) -> None:
        self.previous.clear()
        self.left_at.clear()
        self.last_moved = ()
