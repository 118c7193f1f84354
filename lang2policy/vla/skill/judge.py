"""A skill's success check in the graph (issue 18): the demonstrations' ``judge`` rules on the
object poses of ``/lang2policy/objects``.

``judge`` asks a ``World``; here it asks a ``MirrorWorld`` (the scene model, its objects set
from the measured poses, never simulated), so "done" means in the graph what it means in
the demonstrations and rollouts. The objects' positions when the skill starts are what a push
or a lift is measured from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lang2policy.errors import UnknownObjectError
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.vla.sim.judge import judge, start_positions
from lang2policy.vla.spec.tasks import Task

# name -> (position xyz, quaternion w x y z), as the objects topic gives them
ObjectPoses = Mapping[str, tuple[Sequence[float], Sequence[float]]]


class ObjectsJudge:
    """Judges ``task`` from object poses, against the poses seen when it started."""

    def __init__(self, task: Task, world: MirrorWorld, objects: ObjectPoses) -> None:
        """``UnknownObjectError`` when an object the task needs is not in ``objects``."""
        self.task, self.world = task, world
        missing = [name for name in task.objects() if name not in objects]
        if missing:
            seen = ", ".join(sorted(objects)) or "none"
            raise UnknownObjectError(
                f"{' and '.join(missing)} not on the table (objects seen: {seen})"
            )
        world.sync(objects=objects)
        unknown = [name for name in task.objects() if name not in world.present]
        if unknown:
            raise UnknownObjectError(f"{', '.join(unknown)}: not in the scene model's pool")
        self.start: dict[str, np.ndarray] = start_positions(world, task)

    def check(self, objects: ObjectPoses) -> tuple[bool, str]:
        """(done, why) for the poses ``objects``; not done while an object is not seen."""
        missing = [name for name in self.task.objects() if name not in objects]
        if missing:
            return False, f"{' and '.join(missing)} not seen"
        self.world.sync(objects=objects)
        return judge(self.world, self.task, self.start)
