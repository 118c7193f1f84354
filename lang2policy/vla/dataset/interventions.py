"""Corrected episodes from their first correction on (HG-DAgger style intervention data).

A corrected episode (``vla.coach.corrected``) starts with the policy on its own until the scripted
person first speaks. Those lead frames are the policy's own mistake: from an away start it
holds still (measured: 1 of 15 lifts, "it barely moves"), and the person speaks only once it
has settled there. Fine-tuned on them, the policy learns to hold still at the very states
where the later frames, with the correction acting, show it moving toward the block: the two
labels contradict each other. HG-DAgger trains on the states where the expert intervened;
``from_first_correction`` keeps each corrected episode from the frame its first correction was
said, and episodes nobody corrected (the policy did it alone) whole.
"""

from __future__ import annotations

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset.reader import DemoDataset

CORRECTION = "correction.index"  # per frame: the correction said there (-1: none)


def first_correction(said: np.ndarray) -> int | None:
    """The position of the first frame at which something was said (None: nothing)."""
    spoken = np.flatnonzero(np.asarray(said) >= 0)
    return int(spoken[0]) if spoken.size else None


def from_first_correction(data: DemoDataset) -> tuple[DemoDataset, int]:
    """``data`` with each episode's frames before its first correction dropped; and how many
    frames were dropped. A dataset without ``correction.index`` (not corrections) is an
    error: there is nothing to trim by."""
    if CORRECTION not in data.frame_columns:
        raise Lang2PolicyError(
            f"{data.root}: no '{CORRECTION}' column; only corrected episodes "
            "(lang2policy record corrections) can be kept from their first correction"
        )
    said = data.frame_columns[CORRECTION]
    spans = []
    for episode in data.episodes:
        first, end = int(episode["from"]), int(episode["to"])
        spans.append((episode, first + (first_correction(said[first:end]) or 0), end))
    trimmed = data.keep_spans(spans)
    return trimmed, len(data) - len(trimmed)
