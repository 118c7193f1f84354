"""Blocks standing on blocks: found where the camera's ray meets a block it can no longer see.

The detector places every block as if it stood on the table (or in a bowl): one image does not
tell a block on the table from a block on a block. The tracker does: a block that stood
somewhere and is now missing, with another block seen above it, is the bottom of a tower. The
camera sees the upper block's top face along a ray; where that ray passes one block height
above a hidden block, within ``STACK_TOLERANCE`` of its centre, the upper block stands on it.
Left on the table plane, the upper block would be placed off the tower by the parallax and a
block height too low, and the next block stacked on it would be driven into the tower.

Only a block the tracker already held can stand on a hidden one (the arm carries a block it
picked onto a tower). A new name where a kept block just vanished is that block misnamed, not
one put on it: under the arm's shade at ``mild`` an orange block read as brown for a few
frames, the brown block was raised onto the "hidden" orange one, and when the orange one was
seen again it was raised onto the then-hidden brown one, 5 cm above the table, out of reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from lang2policy.perception.records import PerceivedObject

STACK_TOLERANCE = 0.8  # of a block's half size: how near the ray must pass a hidden block


def restack(
    found: Sequence[PerceivedObject],
    kept: Iterable[PerceivedObject],
    camera_position: np.ndarray,
    block_half: float,
) -> tuple[list[PerceivedObject], set[str]]:
    """``found`` with every block that stands on a kept, unseen block raised onto it, and
    the names of the blocks under such a block (hidden by it, not missed). ``kept``: the
    tracker's objects before this frame."""
    names, kept = {obj.name for obj in found}, list(kept)
    tracked = {o.name for o in kept}
    hidden = [o for o in kept if o.kind == "block" and o.name not in names]
    result, under = [], set()
    for obj in found:
        # a new name where a block vanished is that block misnamed, never one put on it
        stands = obj.kind == "block" and obj.name in tracked
        base = _base_of(obj, hidden, camera_position, block_half) if stands else None
        if base is None:
            result.append(obj)
            continue
        result.append(obj._replace(position=_on(base, obj, camera_position, block_half)))
        under |= _tower_below(base, hidden, block_half)
    return result, under


def _on(base: PerceivedObject, obj: PerceivedObject, camera: np.ndarray, half: float) -> tuple:
    """Where the ray from ``camera`` through ``obj``'s centre meets the height of a block
    standing on ``base``."""
    seen = np.asarray(obj.position, float)
    height = float(base.position[2]) + 2 * half
    share = (height - seen[2]) / (camera[2] - seen[2])
    return tuple(float(v) for v in seen + share * (camera - seen))


def _base_of(
    obj: PerceivedObject, hidden: list[PerceivedObject], camera: np.ndarray, half: float
) -> PerceivedObject | None:
    """The highest hidden block ``obj``'s ray passes near, one block height above it: the top
    of a tower is the only place a block can stand on (near the camera's axis the rays over
    the blocks of one tower pass close to each other's centres)."""
    best = None
    for base in hidden:
        if camera[2] <= base.position[2] + 2 * half:
            continue
        point = _on(base, obj, camera, half)
        distance = float(np.hypot(point[0] - base.position[0], point[1] - base.position[1]))
        higher = best is None or base.position[2] > best.position[2]
        if distance < STACK_TOLERANCE * half and higher:
            best = base
    return best


def _tower_below(base: PerceivedObject, hidden: list[PerceivedObject], half: float) -> set[str]:
    """``base`` and the hidden blocks under it (those beneath its centre, lower than it)."""
    return {base.name} | {
        o.name
        for o in hidden
        if o.position[2] < base.position[2]
        and np.hypot(o.position[0] - base.position[0], o.position[1] - base.position[1]) < half
    }
