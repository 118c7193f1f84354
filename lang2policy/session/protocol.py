"""The one shape every session has: what the skills, the sandbox and the planners run on.

A session bundles an arm and what it needs to move: ``world`` (the scene model: MuJoCo physics
in simulation, a mirror kept in step with measurements in the graph), ``robot`` (the joint
interface), ``kinematics`` (IK and reach) and ``primitives`` (pick, place, push ...).

Two implementations: ``SimSession`` (``lang2policy.session.sim``, in-process physics) and
``RemoteSession`` (``lang2policy.session.remote``, an arm in the ROS graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Session(Protocol):
    """An arm ready for skills: world, robot, kinematics, primitives."""

    world: Any
    robot: Any
    kinematics: Any
    primitives: Any

    def reset(self, seed: int, objects: list[str] | None = None) -> list[str]:
        """Start a new scene (simulation: a seeded layout; graph: the objects heard); returns
        the names of the objects on the table."""
        ...

    def sync(self) -> None:
        """Bring ``world`` in step with the arm and the objects (a no-op in simulation, where
        the world is the truth)."""
        ...

    def observe(self, expected: list[str], say: Callable[[str], None] | None = None) -> None:
        """Bring ``world`` in step with the scene as it is *seen* after a program, to judge
        its goal: a camera's view is cleared first (the arm out of the way, perception given
        time to find ``expected`` again); with ground truth, ``sync``."""
        ...
