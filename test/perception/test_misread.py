"""A block read in another colour for a few frames keeps the name the tracker has."""

from __future__ import annotations

from lang2policy.perception.misread import keep_tracked_names
from lang2policy.perception.records import PerceivedObject

HALF = 0.0125


def _block(name: str, x: float, y: float, z: float = HALF) -> PerceivedObject:
    return PerceivedObject(name, (x, y, z))


def test_a_new_name_where_a_tracked_block_is_missing_is_that_block():
    orange, red = _block("orange block", 0.13, 0.176), _block("red block", 0.2, 0.0)
    brown_here = _block("brown block", 0.129, 0.177)
    renamed = keep_tracked_names([brown_here, red], [orange, red])
    assert [o.name for o in renamed] == ["orange block", "red block"]
    assert renamed[0].position == brown_here.position  # where the camera sees it now


def test_new_names_elsewhere_or_beside_a_seen_block_stay_new():
    orange = _block("orange block", 0.13, 0.176)
    away = _block("brown block", 0.13 + 2 * HALF, 0.176)  # a block's width away: another block
    assert keep_tracked_names([away], [orange]) == [away]
    # the orange block is seen too: the brown one beside it is not a misreading of it
    beside = _block("brown block", 0.131, 0.176)
    assert keep_tracked_names([orange, beside], [orange]) == [orange, beside]
    # two tracked blocks missing there: which one it is cannot be told, so it stays new
    gray = _block("gray block", 0.128, 0.177)
    assert keep_tracked_names([beside], [orange, gray]) == [beside]
    # a tracked name is never renamed
    assert keep_tracked_names([gray], [orange, gray]) == [gray]
