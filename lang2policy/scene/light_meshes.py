"""Lighter robot meshes for fast camera rendering (issue 17).

The SO-101's visual meshes have about 320k triangles; on a CPU (Mesa llvmpipe) a 96-pixel
frame of them takes 25-45 ms to draw, whatever the resolution, so recording demonstrations
spent 90 % of its time rendering. ``lighten`` replaces each mesh of a robot spec with a copy
simplified by vertex clustering on a 2 mm grid, read from the same STL file: at 96 pixels the
images look the same. (Quadric decimation, ``fast-simplification``, left these meshes at 90 %
of their triangles.)

Used for a *render twin* (``vla.sim.render_twin``): a second model of the same scene drawn from the
physics model's joint positions, so that the physics (which collides with these meshes'
convex hulls) is exactly the simulation's own.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import mujoco
import numpy as np

from lang2policy.errors import ConfigError

CELL = 0.002  # m: vertices closer than this merge (SO-101: 322k triangles -> about 23k)


def read_stl(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3), faces (F, 3)) of a binary STL, shared vertices merged."""
    raw = path.read_bytes()
    count = int(np.frombuffer(raw, np.uint32, 1, 80)[0])
    if len(raw) != 84 + 50 * count:
        raise ConfigError(f"{path}: not a binary STL ({len(raw)} bytes for {count} triangles)")
    records = np.frombuffer(raw, np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]),
                            count, 84)  # fmt: skip
    corners = records["v"].reshape(-1, 3).astype(np.float64)
    vertices, index = np.unique(corners, axis=0, return_inverse=True)
    return vertices, index.reshape(-1, 3)


@lru_cache(maxsize=64)
def decimated(path: Path, cell: float = CELL) -> tuple[np.ndarray, np.ndarray]:
    """The STL at ``path`` simplified by vertex clustering: vertices in one ``cell``-sized cube
    merge into their mean, triangles that collapse are dropped (winding kept)."""
    vertices, faces = read_stl(path)
    keys = np.round(vertices / cell).astype(np.int64)
    _, cluster = np.unique(keys, axis=0, return_inverse=True)
    cluster = cluster.ravel()
    count = int(cluster.max()) + 1
    merged = np.zeros((count, 3))
    np.add.at(merged, cluster, vertices)
    merged /= np.bincount(cluster, minlength=count)[:, None]
    faces = cluster[faces]
    a, b, c = faces.T
    faces = faces[(a != b) & (b != c) & (a != c)]
    _, first = np.unique(np.sort(faces, axis=1), axis=0, return_index=True)
    return merged, faces[np.sort(first)]


def lighten(spec: mujoco.MjSpec, mjcf: Path, cell: float = CELL) -> int:
    """Replace every STL mesh of ``spec`` (loaded from ``mjcf``) with a simplified copy; the
    number of meshes replaced."""
    mesh_dir = mjcf.parent / (spec.meshdir or "")
    replaced = 0
    for mesh in spec.meshes:
        if not mesh.file.lower().endswith(".stl"):
            continue
        vertices, faces = decimated(mesh_dir / mesh.file, cell)
        mesh.file = ""
        mesh.uservert = vertices.ravel().tolist()
        mesh.userface = faces.ravel().tolist()
        replaced += 1
    return replaced
