"""Where in a bowl a block goes when blocks already lie in it.

A block put in a bowl goes to its centre. A second one sent there landed on the first and
rested on it, above the rim's reach of ``is_in``, and a third fell off that tower and out of the
bowl (``lang2policy sim --robot so101-hw --emulate --realism mild --perception camera``, seed 0:
the blue, the cyan, then the orange block into the green bowl). The spot chosen here is the one
inside the bowl farthest from the blocks already in it: the centre when the bowl is empty,
otherwise a point on one of ``RINGS`` rings out to where the block's side meets the wall's
inner face. The SO-101's bowl (3.8 cm inside radius) has just room for a second 2.5 cm block
beside one at its centre; a third finds none, and the check on the simulated copy refuses its
plan before the arm moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lang2policy.scene.objects import BOWL_WALL_THICKNESS

RINGS = 5  # rings of candidate spots, the centre included
ANGLES = 24  # candidate spots per ring
_BETTER = 1e-3  # metres: a farther spot must beat the nearer one by this much to be chosen


def spot_in_bowl(
    centre: Sequence[float], radius: float, half: float, others: Sequence[Sequence[float]]
) -> np.ndarray:
    """(x, y) for a block of half size ``half`` in the bowl at ``centre`` (x, y) of
    ``radius``, farthest from ``others`` (the (x, y) of blocks already in it); the centre when
    there are none. Nearer the centre wins a tie, so that the block keeps off the wall."""
    middle = np.asarray(centre, float)[:2]
    if not others:
        return middle
    placed = np.asarray(others, float)[:, :2]
    best, clearance = middle, -math.inf
    for ring in np.linspace(0.0, max(radius - BOWL_WALL_THICKNESS - half, 0.0), RINGS):
        angles = np.linspace(0.0, 2 * math.pi, ANGLES if ring else 1, endpoint=False)
        for angle in angles:
            spot = middle + ring * np.array([math.cos(angle), math.sin(angle)])
            gap = float(np.min(np.linalg.norm(placed - spot, axis=1)))
            if gap > clearance + _BETTER:
                best, clearance = spot, gap
    return best
