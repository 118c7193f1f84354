"""What motion planning needs to know about the objects on the table.

The simulated world answers it directly; on hardware perception does. ``require_object`` is the
one check that a named object is there, with the names that are.
"""

from __future__ import annotations

from typing import Protocol

from lang2policy.errors import UnknownObjectError
from lang2policy.scene.pose import Pose


class SceneQuery(Protocol):
    """What primitives need to know about objects (the sim world, or perception on hardware)."""

    def object_names(self) -> list[str]: ...
    def object_pose(self, name: str) -> Pose: ...
    def object_kind(self, name: str) -> str: ...
    def object_size(self, name: str) -> float: ...


def require_object(scene: SceneQuery, name: str) -> None:
    """Raise ``UnknownObjectError`` (listing the objects present) unless ``name`` is one."""
    if name not in scene.object_names():
        raise UnknownObjectError(
            f"no object named '{name}'; objects present: {scene.object_names()}"
        )
