"""A scripted corrector (issue 18, item 5): the person of Yell At Your Robot, played by a
script that sees the true scene, as the oracle does.

It watches the tool centre point and the gripper while the VLA runs and, when the arm has gone
wrong, says the *language* correction a person would say: "a bit to the left", "lower",
"close the gripper". Only phrases ``language_motion.parse_motion`` accepts are said, so each
one acts through the same residual as a correction said to the VLA node.

What "gone wrong" means follows the oracle's pick (``MotionPrimitives.pick``): the tool goes
above the named block, down to its grasp point, the jaws close, and the arm lifts. Each frame
``observe`` compares the tool with the waypoint of the phase the arm is in:

- not holding the block: the tool's x/y must be within ``tolerance`` of the block's grasp
  point. A person corrects a miss once it shows: when the arm has settled (moved less than
  ``settled_motion`` over the last ``settle_frames`` frames) or is already low near the
  block. Aligned but settled above the grasp point: "lower". Aligned and at the grasp point
  with the jaws open: "close the gripper"; closed there but settled: "a lot higher". Jaws
  closed far from the block: "open the gripper";
- holding it (the block has left the table): settled below the lift point: "higher".

The size word follows the error: "slightly" 1 cm, "a little" 1.5 cm, "a bit" 2 cm, "a lot"
5 cm, the largest not beyond the error, one axis at a time (the largest error first). After a
correction the corrector waits ``cooldown_frames`` for it to blend in and the policy to react,
and says at most ``max_corrections`` per episode. This module scripts the lift (lifting is the
first half of pick-and-place); ``push_corrector`` scripts the push with the same settings.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.vla.spec.tasks import LIFT_HEIGHT

FAMILIES = ("lift", "push")  # the families a scripted person corrects (push: push_corrector)
SIZES = ((0.05, "a lot"), (0.02, "a bit"), (0.015, "a little"), (0.01, "slightly"))  # m, words
_AXES = (("forward", "back"), ("to the left", "to the right"), ("higher", "lower"))
CLOSED_BELOW = 0.15  # gripper opening (0 closed .. 1 open) that counts as closed
LIFTED = 0.01  # m above its rest: the block has left the table


@dataclass(frozen=True)
class CorrectorSettings:
    """When the scripted person speaks (see the module docstring); lengths in m."""

    tolerance: float = 0.02
    settle_frames: int = 5
    settled_motion: float = 0.01
    near_height: float = 0.03  # the tool this far above the grasp point counts as "low"
    cooldown_frames: int = 8
    max_corrections: int = 12
    start_frames: int = 15  # the policy's first 1.5 s go uncorrected: it is on its way
    stall_frames: int = 20  # settled this long (2 s) away from the work: the policy is stuck

    def __post_init__(self) -> None:
        lengths = (self.tolerance, self.settled_motion, self.near_height)
        counts = (self.settle_frames, self.cooldown_frames, self.max_corrections,
                  self.start_frames, self.stall_frames)
        if min(lengths) <= 0 or min(counts) < 1:
            raise ConfigError(
                f"corrector settings: lengths must be > 0 m and counts >= 1, got {self}"
            )


def axis_phrase(axis: int, error: float) -> str | None:
    """The correction moving the tool ``error`` (m) along world ``axis`` (0 x forward, 1 y
    left, 2 z up), with the largest size word not beyond it; None below 1 cm."""
    for size, word in SIZES:
        if abs(error) >= size:
            positive, negative = _AXES[axis]
            return f"{word} {positive if error > 0 else negative}"
    return None


def direction(text: str) -> str:
    """The phrase without its size word: "a bit to the left" -> "to the left"."""
    for _, word in SIZES:
        if text.startswith(word + " "):
            return text[len(word) + 1 :]
    return text


class SpokenCorrector:
    """What every scripted person shares: a quiet start, a cool-down after each phrase, at
    most ``max_corrections`` per episode, and no direction said again once refused. A family
    says what it would in ``_choose``."""

    def __init__(self, settings: CorrectorSettings | None = None) -> None:
        self.settings = settings or CorrectorSettings()
        frames = max(self.settings.settle_frames, self.settings.stall_frames)
        self._recent: deque[np.ndarray] = deque(maxlen=frames)  # the latest tool points
        self._first: np.ndarray | None = None  # the tool where the episode began
        self.started = False  # the policy has moved the tool
        self._quiet = self.settings.start_frames
        self.said: list[str] = []
        self.refused_directions: set[str] = set()  # motions refused at their bound

    def observe(self, tool: np.ndarray, gripper: float, block: np.ndarray) -> str | None:
        """The correction to say this frame (None: nothing), from the tool centre point (m),
        the gripper's commanded opening (0..1: what the arm was last told, since jaws on a
        block never close fully) and the block's position now (m)."""
        tool = np.asarray(tool, float)
        self._recent.append(tool)
        if self._first is None:
            self._first = tool
        moved = float(np.linalg.norm(tool - self._first)) > 2 * self.settings.settled_motion
        self.started = self.started or moved
        if self._quiet > 0:
            self._quiet -= 1
            return None
        if len(self.said) >= self.settings.max_corrections:
            return None
        text = self._choose(tool, gripper, np.asarray(block, float))
        if text is not None and direction(text) in self.refused_directions:
            text = None
        if text is not None:
            self.said.append(text)
            self._quiet = self.settings.cooldown_frames
        return text

    def refused(self, text: str) -> None:
        """``text`` was refused (its offset bound is reached): say its direction no more."""
        self.refused_directions.add(direction(text))

    def settled(self) -> bool:
        """Whether the tool moved less than ``settled_motion`` over the last
        ``settle_frames`` frames."""
        frames = self.settings.settle_frames
        if len(self._recent) < frames:
            return False
        moved = np.linalg.norm(self._recent[-1] - self._recent[-frames])
        return float(moved) < self.settings.settled_motion

    def stalled(self) -> bool:
        """Whether the tool, once the policy has moved it, stayed within ``settled_motion``
        of where it was ``stall_frames`` ago, at every frame since: the policy is stuck, not
        pausing (nor still looking, at the start)."""
        frames = self.settings.stall_frames
        if not self.started or len(self._recent) < frames:
            return False
        window = np.asarray(self._recent)[-frames:]
        spread = np.linalg.norm(window - window[0], axis=1)
        return float(spread.max()) < self.settings.settled_motion

    def _choose(self, tool: np.ndarray, gripper: float, block: np.ndarray) -> str | None:
        raise NotImplementedError


class ScriptedCorrector(SpokenCorrector):
    """The corrections of one episode of a lift task (see the module docstring)."""

    def __init__(
        self,
        block_rest: np.ndarray,
        grasp_offset: float,
        settings: CorrectorSettings | None = None,
    ) -> None:
        super().__init__(settings)
        self.rest_z = float(block_rest[2])
        self.grasp_offset = float(grasp_offset)

    def _choose(self, tool: np.ndarray, gripper: float, block: np.ndarray) -> str | None:
        settings = self.settings
        grasp = block + np.array([0.0, 0.0, self.grasp_offset])
        closed = gripper < CLOSED_BELOW
        if block[2] - self.rest_z > LIFTED:  # held up: take it to the lift point
            goal = self.rest_z + self.grasp_offset + LIFT_HEIGHT
            return axis_phrase(2, goal - tool[2]) if self.settled() else None
        error = grasp - tool
        low = tool[2] - grasp[2] < settings.near_height
        if closed and np.linalg.norm(error) > 1.5 * settings.tolerance:
            return "open the gripper" if self.settled() or low else None
        if np.max(np.abs(error[:2])) > settings.tolerance and (self.settled() or low):
            axis = int(np.argmax(np.abs(error[:2])))
            return axis_phrase(axis, error[axis])
        if np.max(np.abs(error[:2])) > settings.tolerance:
            return None
        if -error[2] > settings.tolerance:  # aligned, above the grasp point
            return axis_phrase(2, error[2]) if self.settled() else None
        if closed:  # on the block but not lifting it
            return axis_phrase(2, LIFT_HEIGHT) if self.settled() else None
        return "close the gripper"
