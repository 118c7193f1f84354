"""Blocks standing on blocks, found from the camera's ray (``perception.stacking``)."""

from __future__ import annotations

import numpy as np

from lang2policy.perception.records import PerceivedObject
from lang2policy.perception.stacking import restack

CAMERA, HALF = np.array([0.2, 0.0, 0.6]), 0.0125


def _block(name: str, x: float, y: float, z: float = HALF) -> PerceivedObject:
    return PerceivedObject(name, (x, y, z))


def _seen_on(point: np.ndarray) -> tuple[float, ...]:
    """Where the detector places a block whose top face is at ``point``'s height: where its
    ray meets the plane of blocks on the table."""
    return tuple(point + (HALF - point[2]) / (CAMERA[2] - point[2]) * (CAMERA - point))


def test_a_block_carried_over_a_hidden_one_is_raised_onto_it_and_none_beside_it():
    red, green = _block("red block", 0.25, 0.1), _block("green block", 0.25, -0.1)
    on_red = np.array([0.25, 0.1, 3 * HALF])
    carried = _block("blue block", 0.25, 0.1, 0.06)  # the tracker had it in the jaws, above
    beside_green = _block("yellow block", 0.25, -0.1 + 2 * HALF + 0.001)  # touching, on the table
    found = [PerceivedObject("blue block", _seen_on(on_red)), beside_green]
    placed, under = restack(found, [red, green, carried, beside_green], CAMERA, HALF)
    assert np.allclose(placed[0].position, on_red, atol=1e-9)
    assert under == {"red block"}  # kept though unseen: the blue block hides it
    assert placed[1] == beside_green  # a block beside a hidden block stays on the table
    assert restack(found, [], CAMERA, HALF) == (found, set())  # nothing hidden: as detected
    # one that came from elsewhere on the table stands on it too
    elsewhere = _block("blue block", 0.15, -0.05)
    placed, under = restack(found, [red, green, elsewhere], CAMERA, HALF)
    assert np.allclose(placed[0].position, on_red, atol=1e-9) and under == {"red block"}


def test_a_misnamed_block_is_not_a_tower_on_itself():
    """Under the arm's shade an orange block read as brown for a few frames: the brown block
    was raised onto the unseen orange one, then the orange one onto the unseen brown one,
    5 cm above the table (``lang2policy sim --realism mild``, seed 2)."""
    orange = _block("orange block", 0.13, 0.176)
    brown_here = PerceivedObject("brown block", (0.129, 0.177, HALF))
    placed, under = restack([brown_here], [orange], CAMERA, HALF)
    assert placed == [brown_here] and under == set()  # a new name: left where it was seen
