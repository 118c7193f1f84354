"""From a policy's action to arm joint targets: one mapping for training and for the controller.

An action's arm part is a joint offset from the *measured* joints, ``action_scale`` rad at full
scale. For a family whose goal holds a tool speed limit (``move_slowly``) the offset is then
shrunk, never turned, so that the tool speed it asks for stays under the limit: the policy
chooses where to go and the mapping how fast, the way a velocity-limited Cartesian controller
would. Learning the limit from the penalty alone failed: PPO trained for 2M steps (31 min)
reached 9 of 50 held-out goals, its exploration breaking the limit in most episodes.

The tool speed an offset asks for comes from the tool site's Jacobian. On the position servos of
the simulated SO-101 a joint offset ``dq`` held ahead of the measured joints moves the tool at
about ``|J dq| / SERVO_LAG`` (measured: 0.41 x ``|J dq|`` / 0.05 s at steady speed, 0.54 x at
most while accelerating), so ``|J dq|`` is kept under ``limit * SERVO_LAG``.
"""

from __future__ import annotations

import mujoco
import numpy as np

from lang2policy.mpc.model import PlanningModel

SERVO_LAG = 0.07  # s: tool speed ~= |J dq| / SERVO_LAG or less for an offset dq (see above)


def arm_targets(pm: PlanningModel, action: np.ndarray, action_scale: float,
                speed_limit: float | None = None) -> np.ndarray:
    """Joint targets for the arm part of ``action`` (in [-1, 1]) from the state in ``pm.data``
    (positions and the tool Jacobian there), clipped to the joint limits; ``speed_limit`` (m/s)
    shrinks the offset so the tool speed it asks for stays under it."""
    arm = pm.arm
    q = pm.data.qpos[arm.qpos_adr]
    offset = action_scale * np.clip(np.asarray(action, float)[:arm.dof], -1.0, 1.0)
    if speed_limit is not None:
        offset = offset * speed_factor(pm, offset, speed_limit)
    return np.clip(q + offset, arm.lower, arm.upper)


def speed_factor(pm: PlanningModel, offset: np.ndarray, speed_limit: float) -> float:
    """The factor (0..1] that brings the tool speed ``offset`` asks for under ``speed_limit``."""
    arm = pm.arm
    jacp = np.zeros((3, pm.model.nv))
    mujoco.mj_jacSite(pm.model, pm.data, jacp, None, arm.ee_site_id)
    asked = float(np.linalg.norm(jacp[:, arm.dof_adr] @ offset))
    allowed = max(speed_limit, 0.0) * SERVO_LAG
    return 1.0 if asked <= allowed else allowed / asked
