"""A bowl is named only when it is seen in one colour.

One object is one colour, but under some lights a bowl's pixels split between two colour
families. At realism ``mild`` (``bench perception``, seed 2) a yellow bowl's lit floor matched
the orange bowl's calibrated looks while its shaded wall stayed yellow: the detector fitted an
orange bowl to the floor and a yellow block to a piece of the wall, two phantoms where one
yellow bowl stood. Which colour such a bowl is cannot be told from that frame, so it is "not
seen": a bowl whose blob's visible edge mostly borders on another colour family's pixels
(there: 94 % of it) is not named, nor are that family's blocks within its rim, and the tracker
keeps whatever it already held there.

A bowl on the table borders on the table; a block in it lies inside its outline (a hole), and a
block beside it or seen over its rim by an oblique camera borders on a part of the edge only,
which is why the share must pass ``FOREIGN_EDGE_SHARE`` and not merely be > 0.

Tried first and left: the share of another colour in a band just inside the fitted bowl's
silhouette. The fit follows the larger colour, so the other one lies mostly outside it (20 %).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lang2policy.perception.segmentation import Blob

FOREIGN_EDGE_SHARE = 0.5  # of a bowl's visible edge: above it, the bowl is not named
REACH_PX = 2  # how far beyond its edge a bowl's neighbours are looked for (pixels)
MIN_EDGE_PX = 10  # visible edge points needed to judge at all
NO_FAMILY = -1
UNCLEAR = "unclear"  # the perception node's status state for ``UnclearNotice``'s lines
RESAY_DISTANCE = 0.02  # metres an unnamed bowl must move before it is said again


def family_of(blob: Blob) -> int:
    """An id of the colour family ``blob`` was segmented in (its lowest palette index)."""
    return min(blob.family) if blob.family else NO_FAMILY


def owner_image(blobs: Sequence[Blob], shape: tuple[int, int]) -> np.ndarray:
    """(H, W) int16: the family id (``family_of``) of the blob each pixel belongs to, else -1."""
    owners = np.full(shape, NO_FAMILY, np.int16)
    for blob in blobs:
        points = blob.points.astype(np.intp)
        owners[points[:, 1], points[:, 0]] = family_of(blob)
    return owners


def foreign_edge(blob: Blob, owners: np.ndarray) -> tuple[float, int]:
    """(share, family): the share of ``blob``'s visible edge (``Blob.edge``) within
    ``REACH_PX`` of another colour family's blob, and the family met most there; (0.0, -1)
    when the edge is shorter than ``MIN_EDGE_PX`` or borders on no other colour."""
    edge = blob.edge.astype(np.intp)
    if len(edge) < MIN_EDGE_PX:
        return 0.0, NO_FAMILY
    height, width = owners.shape
    steps = np.arange(-REACH_PX, REACH_PX + 1)
    du, dv = (step.ravel() for step in np.meshgrid(steps, steps))
    u = np.clip(edge[:, :1] + du[None], 0, width - 1)
    v = np.clip(edge[:, 1:] + dv[None], 0, height - 1)
    near = owners[v, u]  # (edge points, window pixels)
    foreign = (near != family_of(blob)) & (near != NO_FAMILY)
    if not foreign.any():
        return 0.0, NO_FAMILY
    families, counts = np.unique(near[foreign], return_counts=True)
    return float(foreign.any(axis=1).mean()), int(families[np.argmax(counts)])


class UnclearNotice:
    """What to tell a person about bowls seen but not named (``Detector.unclear``): a line
    when they appear, move or change in number, nothing while they stay, so that a planner's
    "no object named 'yellow bowl'" has its reason beside it."""

    def __init__(self) -> None:
        self.said: list[tuple[float, float]] = []

    def update(self, unclear: Sequence[tuple[float, float]]) -> str | None:
        """The line to say for this frame's ``unclear`` (x, y of each bowl), else None."""
        spots = sorted((float(x), float(y)) for x, y in unclear)
        if _same_spots(spots, self.said):
            return None
        self.said = spots
        if not spots:
            return None
        where = "; ".join(f"[{x:.2f}, {y:.2f}]" for x, y in spots)
        return (
            f"not named: a bowl at {where} is seen in two colours (which one cannot be told "
            "from this view); what was known there is kept"
        )


def _same_spots(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return len(a) == len(b) and all(
        np.hypot(p[0] - q[0], p[1] - q[1]) <= RESAY_DISTANCE for p, q in zip(a, b, strict=True)
    )
