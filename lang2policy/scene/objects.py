"""Code-as-Policies tabletop objects: coloured blocks and bowls, added to a scene spec.

Objects are named like the paper's ("red block", "cyan bowl"); the MuJoCo body of "red block"
is ``red_block``. Bowls are a flat disc with a ring of thin walls, so blocks rest inside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco

from lang2policy.errors import ConfigError

COLORS: dict[str, tuple[float, float, float]] = {
    "red": (0.85, 0.12, 0.12),
    "green": (0.15, 0.65, 0.2),
    "blue": (0.15, 0.3, 0.85),
    "yellow": (0.95, 0.85, 0.1),
    "orange": (1.0, 0.5, 0.05),
    "purple": (0.5, 0.2, 0.7),
    "pink": (1.0, 0.45, 0.7),
    "cyan": (0.1, 0.8, 0.85),
    "brown": (0.5, 0.3, 0.12),
    "gray": (0.5, 0.5, 0.5),
}
KINDS = ("block", "bowl")
_BOWL_WALLS = 16
BOWL_WALL_THICKNESS = 0.004


@dataclass(frozen=True)
class ObjectSpec:
    """One object of the pool: its colour, kind and size."""

    color: str
    kind: str

    def __post_init__(self) -> None:
        if self.color not in COLORS:
            raise ConfigError(f"unknown colour '{self.color}'; valid colours: {sorted(COLORS)}")
        if self.kind not in KINDS:
            raise ConfigError(f"unknown object kind '{self.kind}'; valid kinds: {list(KINDS)}")

    @property
    def name(self) -> str:
        return f"{self.color} {self.kind}"

    @property
    def body_name(self) -> str:
        return body_name(self.name)


def body_name(object_name: str) -> str:
    return object_name.replace(" ", "_")


def add_block(spec: mujoco.MjSpec, obj: ObjectSpec, half: float) -> None:
    body = spec.worldbody.add_body(name=obj.body_name)
    body.add_freejoint(name=obj.body_name)
    body.add_geom(
        name=obj.body_name,
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[half, half, half],
        rgba=[*COLORS[obj.color], 1.0],
        mass=0.03,
        friction=[1.2, 0.01, 0.0001],
        condim=4,
    )


def add_bowl(spec: mujoco.MjSpec, obj: ObjectSpec, radius: float, height: float) -> None:
    body = spec.worldbody.add_body(name=obj.body_name)
    body.add_freejoint(name=obj.body_name)
    rgba = [*COLORS[obj.color], 1.0]
    body.add_geom(
        name=f"{obj.body_name}_base",
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        size=[radius, 0.003, 0],
        pos=[0, 0, 0.003],
        rgba=rgba,
        mass=0.15,
    )
    half_len = radius * math.tan(math.pi / _BOWL_WALLS) + BOWL_WALL_THICKNESS
    for i in range(_BOWL_WALLS):
        angle = 2 * math.pi * i / _BOWL_WALLS
        body.add_geom(
            name=f"{obj.body_name}_wall{i}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[BOWL_WALL_THICKNESS, half_len, height / 2],
            pos=[radius * math.cos(angle), radius * math.sin(angle), 0.0065 + height / 2],
            quat=[math.cos(angle / 2), 0, 0, math.sin(angle / 2)],
            rgba=rgba,
            mass=0.01,
        )
