"""Scene geometry behind the query skills: bounding boxes, table bounds and corners.

Corners and sides are named as seen from the robot: "top" is the far side of the table (+x),
"bottom" the near side (-x), "left" is +y and "right" is -y. A named corner is the reachable
spot nearest to that corner of the workspace rectangle, inset so that a block fits there.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from lang2policy.scene.robot_description import RobotDescription, WorkspaceConfig
from lang2policy.scene.world import World

# corner name -> (x end, y end): +1 = the max end, -1 = the min end, 0 = the middle
_CORNERS: dict[str, tuple[int, int]] = {
    "top left": (1, 1),
    "top right": (1, -1),
    "bottom left": (-1, 1),
    "bottom right": (-1, -1),
    "center": (0, 0),
    "top": (1, 0),
    "bottom": (-1, 0),
    "left": (0, 1),
    "right": (0, -1),
}


def object_bbox(world: World, name: str) -> np.ndarray:
    """Axis-aligned bounding box [[xmin, ymin, zmin], [xmax, ymax, zmax]] of an object's
    geoms in the world frame (exact for a block at any orientation; a bowl's walls and base)."""
    body = world.handle(name).body_id
    model, data = world.model, world.data
    lows, highs = [], []
    for geom in np.flatnonzero(model.geom_bodyid == body):
        rotation = data.geom_xmat[geom].reshape(3, 3)
        center = data.geom_xpos[geom] + rotation @ model.geom_aabb[geom, :3]
        half = np.abs(rotation) @ model.geom_aabb[geom, 3:]
        lows.append(center - half)
        highs.append(center + half)
    return np.array([np.min(lows, axis=0), np.max(highs, axis=0)])


def table_bounds(workspace: WorkspaceConfig) -> np.ndarray:
    """[[xmin, ymin], [xmax, ymax]] of the workspace rectangle (metres, world frame)."""
    return np.array([[workspace.x[0], workspace.y[0]], [workspace.x[1], workspace.y[1]]], float)


def corner_point(description: RobotDescription, corner: str) -> np.ndarray:
    """The point [x, y, 0] for a corner/side/centre name (see the module doc), on the table.

    The rectangle's corner is moved in by a block's footprint, then along the line from the
    robot base to within the reachable ring (``min_radius`` .. ``max_radius``), also inset."""
    if corner not in _CORNERS:
        raise ValueError(f"unknown corner '{corner}'; allowed: {sorted(_CORNERS)}")
    ws = description.workspace
    margin = description.objects.block_half * math.sqrt(2)
    ex, ey = _CORNERS[corner]
    x = _pick(ws.x, ex, margin)
    y = _pick(ws.y, ey, margin)
    radius = math.hypot(x, y)
    low, high = ws.min_radius + margin, ws.max_radius - margin
    if radius > high:
        x, y = x * high / radius, y * high / radius
    elif 0 < radius < low:
        x, y = x * low / radius, y * low / radius
    return np.array([x, y, 0.0])


def _pick(span: tuple[float, float], end: int, margin: float) -> float:
    if end > 0:
        return span[1] - margin
    if end < 0:
        return span[0] + margin
    return (span[0] + span[1]) / 2


def corner_names() -> tuple[str, ...]:
    return tuple(_CORNERS)


def sample_segments(points: list[np.ndarray], step: float = 0.01) -> list[np.ndarray]:
    """Points along the polyline through ``points``, at most ``step`` apart (the targets the
    privilege policy sees of a compound motion)."""
    samples = [np.asarray(points[0], float)]
    for a, b in itertools.pairwise(points):
        count = max(1, int(np.ceil(np.linalg.norm(b - a) / step)))
        samples.extend(a + (b - a) * t for t in np.linspace(0.0, 1.0, count + 1)[1:])
    return samples
