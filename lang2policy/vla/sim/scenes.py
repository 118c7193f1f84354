"""Randomised scenes for demonstrations and evaluation (issue 17): a task's objects and a few
distractors placed at random, with the look of the scene varied so that a policy trained on it
does not learn one lighting or one camera pose.

Varied per episode (seeded): which distractors are on the table and where everything stands
(``World.reset``); the key and fill lights' brightness and the headlight's; the table's colour
(a little); each object's colour (a little: a red block stays red); the front camera's
position (about a centimetre). ``Appearance.apply`` sets them on the world's model and
``Appearance.restore`` puts the model's own values back; ``to_dict``/``from_dict`` carry a
look to another process (the sim node's ``appearance`` parameter, ``bench vla --graph``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.scene.objects import COLORS
from lang2policy.scene.world import World
from lang2policy.vla.spec.tasks import Task

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

    def to_dict(self, world: World) -> dict:
        """This look as JSON-able numbers, for another process to rebuild on the same scene
        (``from_dict``; the sim node's ``appearance`` parameter): of the colour shifts only
        the object geoms' (by geom id), the only ones ``apply`` uses."""
        return {
            "light_scale": self.light_scale.tolist(),
            "headlight_scale": self.headlight_scale,
            "table_shift": self.table_shift.tolist(),
            "object_shift": {str(g): self.object_shift[g].tolist() for g in _object_geoms(world)},
            "camera_shift": self.camera_shift.tolist(),
        }

    @classmethod
    def from_dict(cls, data: object, world: World) -> Appearance:
        """The look ``to_dict`` wrote, for ``world`` (the same scene model); ``ConfigError``
        saying which field is missing, of the wrong size or not a finite number."""
        model = world.model
        if not isinstance(data, Mapping) or set(data) != _LOOK_FIELDS:
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise ConfigError(f"an appearance has exactly the fields {sorted(_LOOK_FIELDS)} "
                              f"(a JSON object); got {got}")  # fmt: skip
        shifts = data["object_shift"]
        geoms = [int(g) for g in _object_geoms(world)]
        if not isinstance(shifts, Mapping) or not set(shifts) <= {str(g) for g in geoms}:
            ids = f"{min(geoms)}..{max(geoms)}" if geoms else "none"  # numbers, not text order
            raise ConfigError(f"appearance 'object_shift' maps object geom ids (of this scene: "
                              f"{ids}) to RGB shifts")  # fmt: skip
        object_shift = np.zeros((model.ngeom, 3))
        for geom, shift in shifts.items():
            object_shift[int(geom)] = _numbers(f"object_shift[{geom}]", shift, 3)
        return cls(
            light_scale=_numbers("light_scale", data["light_scale"], model.nlight),
            headlight_scale=float(_numbers("headlight_scale", [data["headlight_scale"]], 1)[0]),
            table_shift=_numbers("table_shift", data["table_shift"], 3),
            object_shift=object_shift,
            camera_shift=_numbers("camera_shift", data["camera_shift"], 3),
        )

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


_LOOK_FIELDS = {"light_scale", "headlight_scale", "table_shift", "object_shift", "camera_shift"}


def _numbers(name: str, values: object, size: int) -> np.ndarray:
    """``values`` as ``size`` finite floats, or ``ConfigError`` naming the field."""
    ok = isinstance(values, list | tuple) and len(values) == size
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    )
    if not ok:
        got = str(values)[:80]
        raise ConfigError(f"appearance '{name}' must be {size} finite numbers, got {got}")
    return np.array(values, dtype=float)


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
