"""Inverse kinematics for the tool centre point: damped least squares on a scratch MjData.

A free function over the model and the arm layout (no state), deterministic: it tries the given
start, then the home posture, then seeded random starts, and returns the best solution with its
residual errors so the caller decides whether it is good enough.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from lang2policy.scene.arm import ArmLayout


@dataclass(frozen=True)
class IKResult:
    q: np.ndarray
    position_error: float  # metres
    rotation_error: float  # radians

    def ok(self, position_tol: float, rotation_tol: float) -> bool:
        return self.position_error <= position_tol and self.rotation_error <= rotation_tol


@dataclass(frozen=True)
class IKOptions:
    rotation_weight: float = 0.3
    damping: float = 1e-4
    max_iterations: int = 150
    position_tol: float = 2e-3
    rotation_tol: float = 0.035
    restarts: int = 6
    # A descent ends early when its error improved by less than ``stall_improvement`` (m, or
    # weighted rad) over ``stall_iterations`` iterations in a row (0: never; the baseline of
    # ``lang2policy bench ik``).
    stall_iterations: int = 10
    stall_improvement: float = 1e-6


def solve_ik(
    model: mujoco.MjModel,
    scratch: mujoco.MjData,
    arm: ArmLayout,
    target_pos: np.ndarray,
    target_rot: np.ndarray | None,
    q_start: np.ndarray,
    options: IKOptions = IKOptions(),
    check: Callable[[], None] | None = None,
) -> IKResult:
    """Joint positions that put the ee site at ``target_pos`` with orientation ``target_rot``.

    ``target_rot`` (3x3, world frame) may be None for a position-only solve. ``check`` is
    called before each start and may raise to abandon the solve (a stop request).
    """
    rng = np.random.default_rng(0)
    starts = [np.asarray(q_start, float), arm.home.copy()]
    starts += [rng.uniform(arm.lower, arm.upper) for _ in range(options.restarts)]
    best: IKResult | None = None
    for start in starts:
        if check is not None:
            check()
        result = _descend(model, scratch, arm, target_pos, target_rot, start, options)
        if best is None or _score(result) < _score(best):
            best = result
        if result.ok(options.position_tol, options.rotation_tol):
            break
    assert best is not None
    return best


def _score(result: IKResult) -> float:
    return result.position_error + 0.05 * result.rotation_error


def _descend(
    model, data, arm: ArmLayout, target_pos, target_rot, q, options: IKOptions
) -> IKResult:
    q = np.clip(q.copy(), arm.lower, arm.upper)
    jacp = np.zeros((3, model.nv))
    jacr = np.zeros((3, model.nv))
    weight = options.rotation_weight if target_rot is not None else 0.0
    best, stalled = np.inf, 0
    for _ in range(options.max_iterations):
        pos_err, rot_err = _errors(model, data, arm, q, target_pos, target_rot)
        position, rotation = np.linalg.norm(pos_err), np.linalg.norm(rot_err)
        if position < options.position_tol * 0.25 and rotation < options.rotation_tol * 0.25:
            break
        # A descent that stopped improving has found its least-squares posture: an unreachable
        # target (or tilt) otherwise spends every remaining iteration there, which made failing
        # transit waypoints cost 50 ms each.
        total = position + weight * rotation
        if total < best - options.stall_improvement:
            best, stalled = total, 0
        else:
            stalled += 1
            if 0 < options.stall_iterations <= stalled:
                break
        mujoco.mj_jacSite(model, data, jacp, jacr, arm.ee_site_id)
        jac = np.vstack([jacp[:, arm.dof_adr], weight * jacr[:, arm.dof_adr]])
        err = np.concatenate([pos_err, weight * rot_err])
        lhs = jac @ jac.T + options.damping * np.eye(6)
        step = jac.T @ np.linalg.solve(lhs, err)
        scale = min(1.0, 0.5 / (np.max(np.abs(step)) + 1e-12))  # at most 0.5 rad per iteration
        q = np.clip(q + scale * step, arm.lower, arm.upper)
    pos_err, rot_err = _errors(model, data, arm, q, target_pos, target_rot)
    return IKResult(q, float(np.linalg.norm(pos_err)), float(np.linalg.norm(rot_err)))


def _errors(
    model, data, arm: ArmLayout, q, target_pos, target_rot
) -> tuple[np.ndarray, np.ndarray]:
    data.qpos[arm.qpos_adr] = q
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    site = arm.ee_site_id
    pos_err = np.asarray(target_pos) - data.site_xpos[site]
    if target_rot is None:
        return pos_err, np.zeros(3)
    return pos_err, rotation_error(data.site_xmat[site].reshape(3, 3), target_rot)


def rotation_error(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Angular velocity (world frame) that rotates ``current`` onto ``target`` in unit time."""
    q_cur, q_tgt, q_err = np.empty(4), np.empty(4), np.empty(4)
    mujoco.mju_mat2Quat(q_cur, np.ascontiguousarray(current).reshape(9))
    mujoco.mju_mat2Quat(q_tgt, np.ascontiguousarray(target).reshape(9))
    mujoco.mju_negQuat(q_cur, q_cur)
    mujoco.mju_mulQuat(q_err, q_tgt, q_cur)
    vel = np.empty(3)
    mujoco.mju_quat2Vel(vel, q_err, 1.0)
    return vel


def top_down_rotation(approach_axis: np.ndarray, yaw: float) -> np.ndarray:
    """ee-site orientation with ``approach_axis`` (site frame) pointing straight down.

    ``yaw`` turns the gripper about the vertical: the site axis that follows ``approach_axis``
    cyclically (x->y, y->z, z->x) points along (cos yaw, sin yaw, 0) in the world.
    """
    a = np.asarray(approach_axis, float)
    b = np.roll(a, 1)
    site_axes = np.column_stack([a, b, np.cross(a, b)])
    down = np.array([0.0, 0.0, -1.0])
    side = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    world_axes = np.column_stack([down, side, np.cross(down, side)])
    return world_axes @ site_axes.T
