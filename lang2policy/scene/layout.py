"""Seeded random layouts: which objects are on the table and where (non-overlapping, reachable).

The scene holds a pool of objects (every colour as a block and as a bowl); a layout draws a
subset and places it inside the robot's workspace. Objects not drawn are parked under the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.config import load_dataclass, read_yaml
from lang2policy.errors import ConfigError, UnknownObjectError
from lang2policy.paths import config_dir
from lang2policy.scene.objects import COLORS, KINDS, ObjectSpec
from lang2policy.scene.robot_description import ObjectSizes, WorkspaceConfig

_MAX_TRIES = 200
_LAYOUT_TRIES = 100


@dataclass(frozen=True)
class LayoutConfig:
    name: str
    colors: list[str]
    blocks: tuple[int, int]
    bowls: tuple[int, int]
    min_gap: float
    settle_time: float

    def __post_init__(self) -> None:
        unknown = sorted(set(self.colors) - set(COLORS))
        if unknown:
            raise ConfigError(
                f"layout {self.name}: unknown colours {unknown}; valid: {sorted(COLORS)}"
            )
        for kind, (lo, hi) in (("blocks", self.blocks), ("bowls", self.bowls)):
            if not 0 <= lo <= hi <= len(self.colors):
                raise ConfigError(
                    f"layout {self.name}: {kind} range {[lo, hi]} must satisfy "
                    f"0 <= min <= max <= {len(self.colors)} (the number of colours)"
                )

    def pool(self) -> list[ObjectSpec]:
        return [ObjectSpec(color, kind) for kind in KINDS for color in self.colors]


@dataclass(frozen=True)
class Placement:
    name: str
    x: float
    y: float
    yaw: float


def load_layout(name: str) -> LayoutConfig:
    path = config_dir() / "layouts" / f"{name}.yaml"
    if not path.is_file():
        valid = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"unknown layout '{name}'; available layouts: {valid}")
    return load_dataclass(LayoutConfig, read_yaml(path), str(path))


def choose_objects(rng: np.random.Generator, layout: LayoutConfig, max_objects: int) -> list[str]:
    """Draw how many blocks and bowls appear (at most ``max_objects`` in all), and their colours."""
    names: list[str] = []
    for kind, (lo, hi) in (("block", layout.blocks), ("bowl", layout.bowls)):
        room = max_objects - len(names) - (layout.bowls[0] if kind == "block" else 0)
        count = int(rng.integers(lo, max(lo, min(hi, room)) + 1))
        colors = rng.choice(layout.colors, size=count, replace=False)
        names += [f"{c} {kind}" for c in colors]
    return names


def footprint_radius(name: str, sizes: ObjectSizes) -> float:
    if name.endswith("bowl"):
        return sizes.bowl_radius + 0.005
    return sizes.block_half * math.sqrt(2)


def place_objects(
    rng: np.random.Generator,
    names: Sequence[str],
    pool: Sequence[ObjectSpec],
    workspace: WorkspaceConfig,
    sizes: ObjectSizes,
    min_gap: float,
) -> list[Placement]:
    """Place ``names`` (bowls first: they are larger) without overlap inside the workspace."""
    known = {o.name for o in pool}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownObjectError(f"objects {unknown} are not in the pool; valid: {sorted(known)}")
    ordered = sorted(names, key=lambda n: not n.endswith("bowl"))
    for _ in range(_LAYOUT_TRIES):  # a crowded early choice can block later objects: start over
        placed: list[tuple[Placement, float]] = []
        for name in ordered:
            radius = footprint_radius(name, sizes)
            spot = _place_one(rng, name, radius, placed, workspace, min_gap)
            if spot is None:
                break
            placed.append((spot, radius))
        else:
            return [p for p, _ in placed]
    raise ConfigError(
        f"could not place {list(names)} without overlap in {_LAYOUT_TRIES} attempts; "
        "use fewer objects or a larger workspace"
    )


def _place_one(rng, name, radius, placed, workspace: WorkspaceConfig, min_gap) -> Placement | None:
    for _ in range(_MAX_TRIES):
        x = rng.uniform(workspace.x[0] + radius, workspace.x[1] - radius)
        y = rng.uniform(workspace.y[0] + radius, workspace.y[1] - radius)
        reach = math.hypot(x, y)
        if not workspace.min_radius + radius <= reach <= workspace.max_radius - radius:
            continue
        if all(math.hypot(x - p.x, y - p.y) >= radius + r + min_gap for p, r in placed):
            return Placement(
                name, float(x), float(y), float(rng.uniform(-math.pi / 4, math.pi / 4))
            )
    return None
