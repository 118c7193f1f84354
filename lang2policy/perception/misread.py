"""A block read in another colour for a few frames is the block the tracker already has.

Under the arm's shade at ``mild`` an orange block read as brown: the tracker missed the orange
block, confirmed a brown one at the same spot, and the stacking rule (``stacking.restack``)
then saw one standing on the other and raised it 5 cm above the table, out of the arm's reach
(``lang2policy sim --realism mild``, seed 2, a second block put in a bowl). A detection with
a name the tracker does not have, where exactly one tracked block of the same kind is missing
this frame (within ``MISREAD_DISTANCE`` x its half size, at its height), is that block.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from lang2policy.perception.records import PerceivedObject

MISREAD_DISTANCE = 1.0  # of a block's half size, horizontally and vertically


def keep_tracked_names(
    found: Sequence[PerceivedObject], kept: Iterable[PerceivedObject]
) -> list[PerceivedObject]:
    """``found`` with each block of a new name that sits where a tracked, unseen block was
    renamed to that block (its colour as the tracker knows it)."""
    kept = list(kept)
    names, tracked = {obj.name for obj in found}, {obj.name for obj in kept}
    missing = [o for o in kept if o.kind == "block" and o.name not in names]
    result = []
    for obj in found:
        same = [] if obj.kind != "block" or obj.name in tracked else _at(obj, missing)
        if len(same) == 1:
            obj = obj._replace(name=same[0].name, rgba=same[0].rgba)
            missing.remove(same[0])
        result.append(obj)
    return result


def _at(obj: PerceivedObject, blocks: list[PerceivedObject]) -> list[PerceivedObject]:
    """The ``blocks`` whose centre lies where ``obj``'s does."""
    reach = MISREAD_DISTANCE * obj.size
    x, y, z = obj.position
    return [
        b
        for b in blocks
        if np.hypot(b.position[0] - x, b.position[1] - y) < reach
        and abs(b.position[2] - z) < reach
    ]
