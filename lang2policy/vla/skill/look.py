"""Look before judging: the arm leaves the camera's view when the policy has finished.

On camera perception the arm that just acted hides its own work: the pushed block sits
against the jaws, the placed block under the wrist. The tracker then keeps the object where
it last saw it, and the success check says "not done" about a table it cannot see. A person
would step back and look. So when the policy's targets have stood still for ``SETTLE_S``
(it has done what it does; before ``EARLIEST`` of the time budget a still policy is only
pausing: at `mild` it stood 1.5 s before pushes it then made), or at the latest when only
the look's own time (``LOOK_S``) is left of the budget, and the check has not said done,
the arm moves to the robot's
``look`` pose (folded up over its base: the top camera sees every object of the workspace),
the jaws as they are, and the check is made again on what perception reports from there.
Lifts are left out: a lifted block is known from the arm's own state
(``perception.holding``), and folding up would carry it away. The way there obeys the
plan's limits (``TargetShaper.limited``): under a joint speed cap it takes longer, and the
view counts from when the arm got there.
"""

from __future__ import annotations

import numpy as np

from lang2policy.scene.robot_description import load_robot_description
from lang2policy.vla.spec.schema import JOINT_NAMES, ROBOT_TYPE

SETTLE_S = 2.0  # s the policy's targets stand still before it counts as finished
EARLIEST = 0.4  # share of the time budget before which a still policy is only pausing
STILL_RAD = 0.01  # largest joint change between targets that counts as still
MOVE_S = 2.5  # s the way to the look pose takes
WATCH_S = 1.0  # s of fresh object poses at the look pose before the check counts
LOOK_S = MOVE_S + WATCH_S + 0.5  # s of the budget the look needs
FAMILIES = ("pick_place", "push")  # whose goal the arm can hide from the camera


class LookToConfirm:
    """Decides when to look and drives the arm there (see the module docstring)."""

    def __init__(self, pose: np.ndarray) -> None:
        """``pose``: the arm joints of the look pose (rad), the gripper not included."""
        self.pose = np.asarray(pose, np.float32)
        self._last: np.ndarray | None = None
        self._still_since: float | None = None
        self._from: np.ndarray | None = None
        self.started: float | None = None
        self.arrived: float | None = None

    @property
    def looking(self) -> bool:
        return self.started is not None

    def due(self, target: np.ndarray, now: float, elapsed: float, budget: float) -> bool:
        """Feed each policy target (``elapsed`` s of the skill's ``budget`` s): whether to
        look now (see the module docstring)."""
        still = self.settled(target, now)
        return (still and elapsed >= EARLIEST * budget) or budget - elapsed <= LOOK_S

    def settled(self, target: np.ndarray, now: float) -> bool:
        """Feed each policy target; True once they have stood still for ``SETTLE_S``."""
        target = np.asarray(target, np.float32)
        moved = self._last is None or float(np.abs(target - self._last).max()) > STILL_RAD
        self._last = target
        if moved:
            self._still_since = now
        return self._still_since is not None and now - self._still_since >= SETTLE_S

    def restart(self) -> None:
        """The policy starts afresh (after a hold): it has not settled."""
        self._last, self._still_since = None, None

    def start(self, measured: np.ndarray, now: float) -> None:
        """Go from the measured joints and gripper."""
        self._from, self.started = np.asarray(measured, np.float32), now

    def target(self, now: float) -> np.ndarray:
        """The joint target now: a smooth (minimum-jerk) way to the pose, the jaws kept."""
        assert self._from is not None and self.started is not None
        s = min(1.0, max(0.0, (now - self.started) / MOVE_S))
        blend = s**3 * (10 - 15 * s + 6 * s**2)
        arm = self._from[:-1] + blend * (self.pose - self._from[:-1])
        return np.append(arm, self._from[-1]).astype(np.float32)

    def sent(self, target: np.ndarray, now: float) -> None:
        """The target actually sent now (the plan's speed cap may slow the way): the arm has
        arrived once the way's end was sent."""
        if self.arrived is not None or self.started is None or now < self.started + MOVE_S:
            return
        if np.abs(np.asarray(target) - self.target(now)).max() < 1e-3:
            self.arrived = now

    def watched_since(self) -> float | None:
        """When the arm reached the pose and the view began to count (None: not yet)."""
        return self.arrived


def look_pose(robot: str = ROBOT_TYPE) -> tuple[float, ...]:
    """The robot's look pose (``look`` in config/robots/<robot>.yaml), in the policy's joint
    order."""
    look = load_robot_description(robot).look
    return tuple(float(look[name]) for name in JOINT_NAMES)
