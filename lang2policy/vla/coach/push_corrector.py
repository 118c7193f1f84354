"""The scripted person of Yell At Your Robot for pushes (issue 18, item 5): ``corrector``'s
lift corrections, for the push family, where the VLA fails most.

It follows the oracle's push (``MotionPrimitives.push``, whose plan gives the start): the jaws
close, the tool goes down behind the block (on the side away from the goal, at about the
block's mid-height) and moves along the side asked until the block has gone
``PUSH_DISTANCE``. Each frame ``observe`` compares
the tool with the phase the push is in, and says what a person would, in the phrases
``language_motion.parse_motion`` accepts:

Everything is judged on the centre of the gripper's pushing face (``pusher.face_centre``),
not the tool centre point: the closed SO-101 jaws push with a face about 2 cm to one side, on
either side depending on the gripper's turn.

- before the block moved, only once the tool has settled low behind the block (within
  ``near_height`` of the push's height), or the policy has stalled anywhere
  (``stall_frames``): while it moves the policy is on its way, and a correction is a lasting
  offset that would shift the rest of its path too (an earlier version spoke whenever the
  arm paused, and its corrected episodes failed more often than the policy alone). Then:
  jaws open near the start: "close the gripper"; the face more than ``tolerance`` off the
  push's line: across it ("a bit to the left"); short of the start or past the block's near
  face: along it; above the push height: "lower";
- while the block moves or after it stopped: the tool settled, still low, and the block
  short of the push by more than ``tolerance``: on along the side asked ("a bit to the
  left" for a push to the left), sized by what is left to go. Once the tool has lifted off
  the block nothing is said: a nudge would only move it in the air.

Sizes, the cool-down after each phrase, the quiet start and the per-episode limit are those
of ``CorrectorSettings``; a direction the residual's bound refused is not said again.
"""

from __future__ import annotations

import numpy as np

from lang2policy.control.pusher import PUSH_CLEARANCE
from lang2policy.vla.coach.corrector import (
    CLOSED_BELOW,
    CorrectorSettings,
    SpokenCorrector,
    axis_phrase,
)
from lang2policy.vla.spec.tasks import PUSH_DISTANCE, SIDE_DIRECTIONS

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
        """``push_start``: where the oracle's push plan puts the gripper's pushing face before
        it pushes (``pusher.face_centre`` at the plan's start: behind the block, on its
        centre line; z the tool centre point's). ``observe`` is given that face's centre too,
        so a gripper turned the other way round (its face on the other side of the tool
        centre point) is not taken for a miss."""
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
            if tool[2] - self.push_start[2] > self.settings.near_height:
                return None  # lifted off the block: a nudge would only move the tool in the air
            axis = int(np.argmax(np.abs(self.heading[:2])))
            return axis_phrase(axis, left * self.heading[axis])
        return self._approach(tool, gripper)

    def _approach(self, tool: np.ndarray, gripper: float) -> str | None:
        """Before the block moves: the jaws closed, the tool down on the push's line.

        While the tool moves nothing is said: the policy is on its way, and a correction is a
        lasting offset that would move the rest of its path as well. Once the tool has settled
        low behind the block (or the policy is stuck anywhere), the errors that spoil a push
        are said, the worst first: jaws open, off the push's line (across it), short of the
        start or past the block's near face (along it), too high."""
        settings = self.settings
        error = self.push_start - tool
        low = tool[2] - self.push_start[2] < settings.near_height
        if not (low and self.settled()) and not self.stalled():
            return None
        across = int(np.argmin(np.abs(self.heading[:2])))  # the world axis across the push
        along = 1 - across
        ahead = -float(error[along] * self.heading[along])  # + : tool past the start
        near = np.max(np.abs(error[:2])) < 2 * settings.tolerance
        if gripper >= CLOSED_BELOW and low and near:
            return "close the gripper"
        if abs(error[across]) > settings.tolerance:
            return axis_phrase(across, error[across])
        if ahead < -settings.tolerance or ahead > PUSH_CLEARANCE + settings.tolerance:
            return axis_phrase(along, error[along])
        if -error[2] > settings.tolerance:
            return axis_phrase(2, error[2])
        return None
