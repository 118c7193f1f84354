"""The block the gripper holds, told by the arm's own state: where a camera cannot see it.

A fixed camera places every block on the table (one image gives no height), and a block in
the jaws is mostly hidden by them; once let go over a bowl, the arm above still hides it.
So a lift is never seen to rise and a placement is not seen until the arm moves away, and a
skill's success cannot be confirmed from the scene (``vla.skill_judge``).

The arm knows more. When the jaws stop part-way closed (the normalised opening steady within
``GRIP_OPENINGS``: a 2.5 cm block stops the SO-101's at 0.21, closing on nothing ends at 0,
and a grasp or a placement opens them to 0.5), the tracked block nearest the tool point,
within ``REACH``, is in them: from then on it moves
with the tool (its offset in the tool's frame kept from that instant). When the jaws open
again (or close on nothing: the block slipped), it is let go where the tool is: it rests on
the table there, or on the floor of a bowl whose rim it is inside. The camera's own sight of
the block takes over again at the next frame that shows it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.perception.records import PerceivedObject

GRIP_OPENINGS = (0.08, 0.35)  # normalised openings at which the jaws stopped on something
STEADY = 0.02  # largest change of the opening between two frames of jaws at rest
REACH = 0.035  # m (horizontal): how close to the tool point a block must be to be the one held
REACH_HEIGHT = 0.04  # m: and how close in height


@dataclass(frozen=True)
class Tool:
    """The tool point (world, m) and its frame's rotation (3x3), with the jaws' opening."""

    position: np.ndarray
    rotation: np.ndarray
    opening: float


@dataclass(frozen=True)
class Surfaces:
    """What a let-go block comes to rest on: the table, or a bowl's floor above it."""

    table_z: float
    block_half: float
    bowl_base: float


class HeldBlock:
    """Follows the block in the jaws from frame to frame (see the module docstring)."""

    def __init__(self, surfaces: Surfaces) -> None:
        self.surfaces = surfaces
        self.name: str | None = None  # the block held now
        self._offset = np.zeros(3)  # its centre in the tool's frame, from the grasp
        self._last_opening: float | None = None

    def follow(self, tool: Tool, objects: Sequence[PerceivedObject]) -> PerceivedObject | None:
        """The held or just let-go block at the pose the arm says, else None (nothing to
        change). ``objects``: the tracked set, as this frame leaves it."""
        steady = self._last_opening is not None and abs(tool.opening - self._last_opening) <= STEADY
        self._last_opening = tool.opening
        gripping = steady and GRIP_OPENINGS[0] <= tool.opening <= GRIP_OPENINGS[1]
        known = {obj.name: obj for obj in objects}
        if self.name is not None and self.name not in known:
            self.name = None  # dropped from the set (a reset, or the view showed it gone)
        if self.name is None:
            if gripping:
                self._grasp(tool, objects)
            return self._carried(tool, known) if self.name else None
        if steady and not gripping:
            return self._let_go(tool, known)
        return self._carried(tool, known)

    def forget(self) -> None:
        """Nothing is held (the table was reset)."""
        self.name, self._last_opening = None, None

    def _grasp(self, tool: Tool, objects: Sequence[PerceivedObject]) -> None:
        near = [
            (math.dist(obj.position[:2], tool.position[:2]), obj)
            for obj in objects
            if obj.kind == "block" and abs(obj.position[2] - tool.position[2]) <= REACH_HEIGHT
        ]
        near = [(gap, obj) for gap, obj in near if gap <= REACH]
        if near:
            obj = min(near, key=lambda item: item[0])[1]
            self.name = obj.name
            self._offset = tool.rotation.T @ (np.asarray(obj.position, float) - tool.position)

    def _carried(self, tool: Tool, known: dict[str, PerceivedObject]) -> PerceivedObject:
        assert self.name is not None
        position = tool.position + tool.rotation @ self._offset
        return known[self.name]._replace(position=tuple(float(v) for v in position))

    def _let_go(self, tool: Tool, known: dict[str, PerceivedObject]) -> PerceivedObject:
        carried = self._carried(tool, known)
        self.name = None
        x, y, _ = carried.position
        s = self.surfaces
        floor = s.bowl_base if _in_a_bowl(x, y, carried.size, known.values()) else 0.0
        return carried._replace(position=(x, y, s.table_z + floor + s.block_half))


def _in_a_bowl(x: float, y: float, half: float, objects) -> bool:
    return any(
        obj.kind == "bowl"
        and math.hypot(x - obj.position[0], y - obj.position[1]) < obj.size - half
        for obj in objects
    )
