"""From the policy's joint target to the one the VLA node sends (issue 18): language motions
as a residual, then the skill plan's limits.

Each control step ``TargetShaper.shape`` takes the policy's target (arm joints in rad, then
the gripper opening) and

1. adds the language motions' joint residual: the accumulated tool offset
   (``language_motion.MotionState``) mapped through the tool point's Jacobian at the policy's
   target posture (``offset_residual``). The residual moves toward its new value by at most
   the step the speed cap allows, so a correction blends in over a few cycles instead of
   jumping. The policy is shown the measured joints less that residual (``policy_state``):
   it acts in the frame where no motion happened, so the arm ends up the offset away from
   where the policy takes it, rather than the residual adding up step after step;
2. holds the gripper open or closed when a motion said so;
3. applies the limits (``limits.TargetLimiter``): the joint speed cap, scaled by the
   motions' speed scale, and the workspace box.

A motion is taken at once (``motion``) and acts from the next ``shape``. ``stats`` counts the
steps the limits changed and reports ``tool_shift_m``: the mean, over the last
``SHIFT_WINDOW`` steps, of the sent target's tool point minus the policy target's, the effect
of the motions (and of the limits, where they cut a step) as commanded. The policy acts
closed-loop, so where the arm ends also depends on what it does about the shifted arm.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from lang2policy.vla.skill.language_motion import (
    MotionOutcome,
    MotionState,
    NotAMotionError,
    offset_residual,
    parse_motion,
)
from lang2policy.vla.skill.limits import SkillLimits, TargetLimiter, ToolKinematics

SHIFT_WINDOW = 10  # steps averaged in ``tool_shift_m``


class TargetShaper:
    """Language-motion residual and limits on each target (see the module docstring)."""

    def __init__(self, tool: ToolKinematics, limits: SkillLimits, rate: float) -> None:
        self.tool, self.limits = tool, limits
        self.limiter = TargetLimiter(tool, limits, rate)
        self.motions = MotionState()
        self._previous: np.ndarray | None = None  # the last target sent
        self._residual = np.zeros(tool.dof)  # the residual in the last target sent
        self._wanted = np.zeros(tool.dof)  # the residual the offset asks for, last step
        self._shifts: deque[np.ndarray] = deque(maxlen=SHIFT_WINDOW)
        self.steps = self.speed_capped = self.workspace_limited = 0

    def motion(self, text: str) -> MotionOutcome:
        """Take a language motion from the next step on; refused when it is none."""
        try:
            motion = parse_motion(text)
        except NotAMotionError as exc:
            return self.motions.outcome(text, False, str(exc))
        return self.motions.apply(motion)

    def policy_state(self, measured: np.ndarray) -> np.ndarray:
        """The joint state the policy is shown: ``measured`` less the residual in the last
        target sent. The policy then acts in a frame where the motions did not happen, and
        its target plus the residual lands the arm ``offset`` from where the policy wants it.
        Shown the shifted state instead, a policy whose targets follow the arm's state (the
        shipped one does) adds the residual again at every step: in closed-loop rollouts a
        2 cm motion moved the arm 10-23 cm."""
        state = np.asarray(measured, np.float32).copy()
        state[: self.tool.dof] -= self._residual
        return state

    @property
    def residual(self) -> np.ndarray:
        """The language motions' joint residual (arm joints, rad) in the last target sent."""
        return self._residual.copy()

    def restart(self) -> None:
        """After a hold: the next target is limited from the measured joints."""
        self._previous = None

    def shape(self, target: np.ndarray, measured: np.ndarray) -> np.ndarray:
        """The target to send for the policy's ``target``, with ``measured`` the joints now."""
        dof = self.tool.dof
        policy = np.asarray(target, np.float32)
        previous = np.asarray(measured, np.float32) if self._previous is None else self._previous
        shaped = policy.copy()
        self._wanted = offset_residual(self.tool, policy[:dof], self.motions.offset, self._wanted)
        step = self.limiter.max_step(self.motions.speed_scale)
        self._residual = self._residual + np.clip(self._wanted - self._residual, -step, step)
        shaped[:dof] = np.clip(policy[:dof] + self._residual, self.tool.lower, self.tool.upper)
        if self.motions.gripper is not None:
            shaped[dof] = self.motions.gripper
        limited = self.limiter.limit(shaped, previous, self.motions.speed_scale)
        self.steps += 1
        self.speed_capped += limited.speed_capped
        self.workspace_limited += limited.workspace_limited
        sent = limited.target
        self._shifts.append(self.tool.point(sent[:dof]) - self.tool.point(policy[:dof]))
        self._previous = sent
        return sent

    def limited(self, target: np.ndarray, measured: np.ndarray) -> np.ndarray:
        """``target`` of the node's own (the look before judging) under the plan's limits
        alone: its joint speed cap (with the motions' speed scale) and workspace box."""
        previous = np.asarray(measured, np.float32) if self._previous is None else self._previous
        limited = self.limiter.limit(
            np.asarray(target, np.float32), previous, self.motions.speed_scale
        )
        self._previous = limited.target
        return limited.target

    def stats(self) -> dict:
        """Steps the limits changed, and the motions' effect on the tool point (m)."""
        shift = np.mean(self._shifts, axis=0) if self._shifts else np.zeros(3)
        return {
            "speed_capped_steps": self.speed_capped,
            "workspace_limited_steps": self.workspace_limited,
            "tool_shift_m": [round(float(v), 4) for v in shift],
            "motion_offset_m": [round(float(v), 4) for v in self.motions.offset],
            "speed_scale": self.motions.speed_scale,
        }
