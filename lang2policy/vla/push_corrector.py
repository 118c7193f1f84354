"""The scripted person of Yell At Your Robot for pushes (issue 18, item 5): ``corrector``'s
lift corrections, for the push family, where the VLA fails most.

It follows the oracle's push (``MotionPrimitives.push``, whose plan gives the start): the jaws
close, the tool goes down behind the block (on the side away from the goal, at about the
block's mid-height) and moves along the side asked until the block has gone
``PUSH_DISTANCE``. Each frame ``observe`` compares
the tool with the phase the push is in, and says what a person would, in the phrases
``language_motion.parse_motion`` accepts:

- before the block moved: jaws open and low near the block: "close the gripper"; the tool
  settled (or low) more than ``tolerance`` off the push's start in x or y: the largest of
  those errors ("a bit to the left"); over the start and settled above the push height:
  "lower";
- while the block moves or after it stopped: the tool settled, and the block short of the
  push by more than ``tolerance``: on along the side asked ("a bit to the left" for a push to
  the left), sized by what is left to go.

Sizes, the cool-down after each phrase, the quiet start and the per-episode limit are those
of ``CorrectorSettings``; a direction the residual's bound refused is not said again.
"""

from __future__ import annotations

import numpy as np

from lang2policy.vla.corrector import (
    CLOSED_BELOW,
    CorrectorSettings,
    SpokenCorrector,
    axis_phrase,
)
from lang2policy.vla.tasks import PUSH_DISTANCE, SIDE_DIRECTIONS

MOVED = 0.005  # m: the block has begun to move


class PushCorrector(SpokenCorrector):
    """The corrections of one episode of a push task (see the module docstring)."""

    def __init__(
        self,
        block_start: np.ndarray,
        side: str,
        push_start: np.ndarray,
        settings: CorrectorSettings | None = None,
    ) -> None:
        """``push_start``: where the oracle's push plan puts the tool centre point before it
        pushes (``PushPlan.start``: behind the block, offset to the side by where the closed
        jaws' pushing face lies)."""
        super().__init__(settings)
        self.start = np.asarray(block_start, float).copy()
        self.heading = np.array([*SIDE_DIRECTIONS[side], 0.0])
        self.push_start = np.asarray(push_start, float).copy()

    def _choose(self, tool: np.ndarray, gripper: float, block: np.ndarray) -> str | None:
        moved = block - self.start
        if np.linalg.norm(moved[:2]) > MOVED:  # pushing, or pushed too short
            left = PUSH_DISTANCE - float(moved[:2] @ self.heading[:2])
            if left <= self.settings.tolerance or not self.settled():
                return None
            axis = int(np.argmax(np.abs(self.heading[:2])))
            return axis_phrase(axis, left * self.heading[axis])
        return self._approach(tool, gripper)

    def _approach(self, tool: np.ndarray, gripper: float) -> str | None:
        """Before the block moves: the jaws closed, the tool down at the push's start."""
        settings = self.settings
        error = self.push_start - tool
        low = tool[2] - self.push_start[2] < settings.near_height
        near = np.max(np.abs(error[:2])) < 2 * settings.tolerance
        if gripper >= CLOSED_BELOW and low and near:
            return "close the gripper"
        if np.max(np.abs(error[:2])) > settings.tolerance:
            if not (self.settled() or low):
                return None
            axis = int(np.argmax(np.abs(error[:2])))
            return axis_phrase(axis, error[axis])
        if -error[2] > settings.tolerance and self.settled():
            return axis_phrase(2, error[2])
        return None
