"""Randomised scenes for demonstrations and evaluation (issue 17): a task's objects and a few
distractors placed at random, with the look of the scene varied so that a policy trained on it
does not learn one lighting or one camera pose.

Varied per episode (seeded): which distractors are on the table and where everything stands
(``World.reset``); the key and fill lights' brightness and the headlight's; the table's colour
(a little); each object's colour (a little: a red block stays red); the front camera's
position (about a centimetre). ``Appearance.apply`` sets them on the world's model and
``Appearance.restore`` puts the model's own values back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lang2policy.scene.objects import COLORS
from lang2policy.scene.world import World
from lang2policy.vla.tasks import Task

LIGHT_SCALE = (0.7, 1.3)  # range of the factor on each light's diffuse colour
TABLE_JITTER = 0.06  # per RGB channel
OBJECT_JITTER = 0.05  # per RGB channel
CAMERA_JITTER = 0.01  # m, per axis, the front camera
MAX_DISTRACTORS = 3


@dataclass
class Appearance:
    """The varied look of one episode, and the model's values it replaced."""

    light_scale: np.ndarray
    headlight_scale: float
    table_shift: np.ndarray
    object_shift: np.ndarray  # per geom of the objects
    camera_shift: np.ndarray
    _saved: dict = field(default_factory=dict)

    @classmethod
    def draw(cls, rng: np.random.Generator, world: World) -> Appearance:
        model = world.model
        return cls(
            light_scale=rng.uniform(*LIGHT_SCALE, size=model.nlight),
            headlight_scale=float(rng.uniform(*LIGHT_SCALE)),
            table_shift=rng.uniform(-TABLE_JITTER, TABLE_JITTER, size=3),
            object_shift=rng.uniform(-OBJECT_JITTER, OBJECT_JITTER, size=(model.ngeom, 3)),
            camera_shift=rng.uniform(-CAMERA_JITTER, CAMERA_JITTER, size=3),
        )

    def apply(self, world: World) -> None:
        """Set this look on ``world``'s model (saving what it replaces)."""
        model = world.model
        self._saved = {
            "light_diffuse": model.light_diffuse.copy(),
            "headlight": model.vis.headlight.diffuse.copy(),
            "geom_rgba": model.geom_rgba.copy(),
            "cam_pos": model.cam_pos.copy(),
            "mat_rgba": model.mat_rgba.copy(),
        }
        model.light_diffuse[:] = np.clip(model.light_diffuse * self.light_scale[:, None], 0, 1)
        model.vis.headlight.diffuse[:] = np.clip(
            model.vis.headlight.diffuse * self.headlight_scale, 0, 1
        )
        objects = _object_geoms(world)
        model.geom_rgba[objects, :3] = np.clip(
            model.geom_rgba[objects, :3] + self.object_shift[objects], 0, 1
        )
        table = model.mat_rgba[model.material("table_mat").id]
        table[:3] = np.clip(table[:3] + self.table_shift, 0, 1)
        front = model.camera("front").id
        model.cam_pos[front] += self.camera_shift

    def restore(self, world: World) -> None:
        """Put back the model's own values."""
        if not self._saved:
            return
        model = world.model
        model.light_diffuse[:] = self._saved["light_diffuse"]
        model.vis.headlight.diffuse[:] = self._saved["headlight"]
        model.geom_rgba[:] = self._saved["geom_rgba"]
        model.cam_pos[:] = self._saved["cam_pos"]
        model.mat_rgba[:] = self._saved["mat_rgba"]
        self._saved = {}


def _object_geoms(world: World) -> np.ndarray:
    bodies = [handle.body_id for handle in world.objects.values()]
    return np.flatnonzero(np.isin(world.model.geom_bodyid, bodies))


def scene_objects(rng: np.random.Generator, task: Task) -> list[str]:
    """The task's objects and 0..MAX_DISTRACTORS others (blocks and bowls of other colours)."""
    needed = task.objects()
    pool = [f"{c} {kind}" for c in sorted(COLORS) for kind in ("block", "bowl")]
    others = [name for name in pool if name not in needed]
    count = int(rng.integers(0, MAX_DISTRACTORS + 1))
    chosen = rng.choice(len(others), size=count, replace=False)
    return [*needed, *(others[i] for i in chosen)]
