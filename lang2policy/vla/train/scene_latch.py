"""Look once, then act: the scene state as it was when an episode began (``VLAConfig.scene_latch``).

Why: every VLA so far read a scene estimate made anew from each frame, and failed in closed
loop on frames the estimate gets wrong: the block in the gripper or under it, a goal point in
the air drifting to the gripper (README, "Grounding the words in the image"). The scripted
oracle the demonstrations come from does not look again either: it plans its whole motion
from the scene before anything moved. A latched network does the same. Its scene head reads
the frames where the named block still stands where it began (the arm at rest or on its way),
the only frames it is asked about at run time, and its action head reads that first estimate,
held for the whole episode, beside the measured joints and the words.

Training therefore sees, per frame:

- ``start_environment``: the scene state of the frame's episode's first frame (the named
  block's start position, the goal, the yaw), what the action head reads;
- ``unmoved_frames``: the frames whose named block is still within ``UNMOVED`` of its start,
  the frames the scene head and the grounding heatmaps learn from;
- ``anchor_environment``: the grounding targets with the goal heatmap on the object the goal
  is defined by (the bowl; the named block itself for a push or a lift, whose goal is a point
  on empty table or in the air, which no heatmap can see), the scene head adding the offset
  the words ask for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lang2policy.errors import ConfigError

UNMOVED = 0.005  # m: a named block this close to where it began has not been moved yet
BLOCK = slice(0, 3)  # the named block's position in ``environment_state``
GOAL = slice(3, 6)  # the goal's
OWN_GOAL_FAMILIES = ("pick_place",)  # families whose goal is an object of its own (the bowl)


def episode_starts(spans: Sequence[tuple[int, int]], frames: int) -> np.ndarray:
    """Per frame, the index of its episode's first frame (``int64 [frames]``), from every
    episode's ``(start, end)`` rows; a frame of no episode is its own start."""
    starts = np.arange(frames, dtype=np.int64)
    for start, end in spans:
        starts[start:end] = start
    return starts


def start_environment(environment: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per frame, the scene state of its episode's first frame (``float32 [N, env_dim]``)."""
    environment = _checked(environment)
    return environment[np.asarray(starts)].astype(np.float32)


def unmoved_frames(
    environment: np.ndarray, starts: np.ndarray, frames: np.ndarray, tolerance: float = UNMOVED
) -> np.ndarray:
    """The ``frames`` whose named block is within ``tolerance`` (m) of where it began."""
    environment = _checked(environment)
    frames = np.asarray(frames, np.int64)
    moved = environment[frames, BLOCK] - environment[np.asarray(starts)[frames], BLOCK]
    return frames[np.linalg.norm(moved, axis=1) <= tolerance]


def anchor_environment(environment: np.ndarray, families: Sequence[Any]) -> np.ndarray:
    """``environment`` with each frame's goal replaced by its anchor: the goal itself where
    the family's goal is an object (``OWN_GOAL_FAMILIES``), else the named block's position
    (``families``: one family name per frame)."""
    anchored = _checked(environment).astype(np.float32).copy()
    if len(families) != len(anchored):
        raise ConfigError(f"{len(families)} family names for {len(anchored)} frames")
    on_block = ~np.isin(np.asarray(families, dtype=object), OWN_GOAL_FAMILIES)
    anchored[on_block, GOAL] = anchored[on_block, BLOCK]
    return anchored


def _checked(environment: np.ndarray) -> np.ndarray:
    environment = np.asarray(environment)
    if environment.ndim != 2 or environment.shape[1] < GOAL.stop:
        raise ConfigError(
            f"a latched scene needs the recorded block and goal positions (6+ values per "
            f"frame), got shape {environment.shape}"
        )
    return environment
