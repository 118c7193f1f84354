"""From a policy's action to arm joint targets: one mapping for training and for the controller.

Two kinds of action (``Family.action``):

* ``"joints"``: a joint offset from the *measured* joints, ``action_scale`` rad at full scale;
* ``"tool"`` (grasping families): a move of the tool centre (``TOOL_STEP`` m per axis at full
  scale) and a turn of the jaws about the vertical (``TURN_STEP`` rad), from where the tool is
  measured, kept pointing down; one damped least-squares step through the tool's Jacobian turns
  it into joint targets (at most ``action_scale`` rad from the measured joints). A grasp is
  then a few smooth functions of what the policy sees (block minus tool, the wrist turn the
  grasp needs), where in joint space it was a different joint mix at every place on the table:
  a lift learner distilled in joint space reached 22 % after 8 DAgger iterations.

For joint actions, a family whose goal holds a tool speed limit (``move_slowly``) has the
offset shrunk, never turned, so that the tool speed it asks for stays under the limit: the policy
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
from lang2policy.rl.families import Family

TOOL_STEP = 0.02  # m: the tool move a full "tool" action asks for, per axis
TURN_STEP = 0.3  # rad: the jaws' turn about the vertical a full "tool" action asks for
# rad -> m: orientation against position in the least-squares step. Low: a 5-joint arm cannot
# hold every orientation at every point, and with 0.3 (control.ik's) the step traded the
# tool's position for its tilt, moving it away from where the action asked
ROTATION_WEIGHT = 0.05
MAX_TILT_STEP = 0.1  # rad: the most one step corrects the tool's lean toward pointing down
DAMPING = 1e-4  # of the damped least-squares step (as control.ik's)
SERVO_LAG = 0.07  # s: tool speed ~= |J dq| / SERVO_LAG or less for an offset dq (see above)


def family_targets(pm: PlanningModel, family: Family, goal: np.ndarray, action: np.ndarray,
                   action_scale: float) -> np.ndarray:
    """Arm joint targets for ``family``'s ``action`` (its gripper entry, if any, left out)."""
    if family.action == "tool":
        return tool_targets(pm, action, action_scale)
    return arm_targets(pm, action, action_scale, family.speed_limit(goal))


def tool_targets(pm: PlanningModel, action: np.ndarray, max_offset: float) -> np.ndarray:
    """Joint targets moving the tool centre by ``action[:3] * TOOL_STEP`` and turning the jaws
    by ``action[3] * TURN_STEP`` about the vertical, the tool brought back toward pointing
    down; the offset is scaled as a whole to at most ``max_offset`` rad per joint."""
    arm, model, data = pm.arm, pm.model, pm.data
    a = np.clip(np.asarray(action, float)[:4], -1.0, 1.0)
    site = arm.ee_site_id
    rotation = data.site_xmat[site].reshape(3, 3)
    tool = data.site_xpos[site] + rotation @ pm.center_offset
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    mujoco.mj_jac(model, data, jacp, jacr, tool, model.site_bodyid[site])
    jacobian = np.vstack([jacp[:, arm.dof_adr], ROTATION_WEIGHT * jacr[:, arm.dof_adr]])
    approach = rotation @ np.asarray(pm.description.approach_axis, float)
    tilt = np.cross(approach, [0.0, 0.0, -1.0])  # rotation vector toward down (sin angle)
    tilt *= min(1.0, MAX_TILT_STEP / max(float(np.linalg.norm(tilt)), 1e-9))
    turn = tilt + np.array([0.0, 0.0, TURN_STEP * a[3]])
    error = np.concatenate([TOOL_STEP * a[:3], ROTATION_WEIGHT * turn])
    q = data.qpos[arm.qpos_adr]
    offset = _least_squares(jacobian, error)
    # a joint the step would push past its limit stops there and the others make up for it
    # (at home the wrist sits 0.06 rad from its limit: clipping alone turned a move toward
    # the base into a rise)
    stuck = (q + offset > arm.upper) | (q + offset < arm.lower)
    if stuck.any():
        fixed = np.clip(q + offset, arm.lower, arm.upper) - q
        free = ~stuck
        offset = fixed.copy()
        offset[free] = _least_squares(jacobian[:, free], error - jacobian[:, stuck] @ fixed[stuck])
    offset /= max(1.0, float(np.abs(offset).max()) / max_offset)
    return np.clip(q + offset, arm.lower, arm.upper)


def _least_squares(jacobian: np.ndarray, error: np.ndarray) -> np.ndarray:
    """The damped least-squares joint step for ``error`` (position rows, weighted rotation)."""
    square = jacobian @ jacobian.T + DAMPING * np.eye(len(error))
    return jacobian.T @ np.linalg.solve(square, error)


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
