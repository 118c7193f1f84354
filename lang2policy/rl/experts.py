"""Experts a policy is distilled from (``dagger.py``): an action for any state of a ``RewardEnv``.

An expert answers for the state the *learner* reached, not only along its own path (DAgger
asks it there), so each is a function of the state:

* ``GraspLiftExpert`` (lift): the pick of ``control.primitives`` as a state machine. From the
  block's pose and the measured tool and gripper it picks a phase (go above the block, go down
  open, close on it, lift it to the goal height) and the joint targets by inverse kinematics
  with the grasp orientation ``pick`` uses (jaws across the block's faces, top down, leaning
  only where top down is out of reach).
It returns actions in the env's own units: the arm's offset from the measured joints over
``action_scale`` (clipped to [-1, 1]) and, for grasping families, the gripper opening as -1..1.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from lang2policy.control.ik import IKOptions
from lang2policy.control.kinematics import Kinematics
from lang2policy.rewards.features import quat_to_yaw
from lang2policy.rl.env import RewardEnv

IN_HAND = 0.02  # m: block centre this close to the tool centre, gripper closing -> held
AT_GRASP = 0.006  # m: tool this close to the grasp point -> close the jaws
ABOVE = 0.004  # m: tool within this of the block's vertical (x, y) -> start going down
ON_THE_WAY = 0.008  # m: ... and within this once below the approach height -> keep going
DESCENT_STEP = 0.006  # m: how far below the tool each target on the way down is
SAG_ZONE = 0.015  # m: horizontal errors under this are aimed past (``_offset``)
CLOSED = 0.45  # measured opening under which the jaws are taken as closing on the block
OPEN = 0.4  # measured opening over which the jaws are taken as open enough to go down


class Expert(Protocol):
    def start(self, env: RewardEnv) -> None:
        """A new episode began in ``env``."""

    def action(self, env: RewardEnv) -> np.ndarray:
        """The expert's action for the state of ``env``."""


def to_action(env: RewardEnv, targets: np.ndarray, opening: float | None) -> np.ndarray:
    """Arm joint ``targets`` (and a gripper ``opening``, 0..1) as an action of ``env``."""
    q = env.pm.data.qpos[env.arm.qpos_adr]
    arm = (np.asarray(targets, float) - q) / env.family.action_scale
    # scaled down as a whole, not clipped per joint: clipping turns the move, and the tool
    # then swung a centimetre off the block on the way down
    arm /= max(1.0, float(np.abs(arm).max()))
    if not env.family.gripper:
        return arm
    return np.append(arm, 2.0 * float(np.clip(opening, 0.0, 1.0)) - 1.0)


class GraspLiftExpert:
    """Grasp the family's block from above and lift it to the goal height."""

    def __init__(self, env: RewardEnv) -> None:
        self.kin = Kinematics(env.pm.model, env.description, env.arm)
        # targets are near the arm: start from its joints and home, few random restarts
        self.kin.options = IKOptions(restarts=1)
        self.grasp = env.description.grasp

    def start(self, env: RewardEnv) -> None:
        """Stateless: every answer comes from the state."""

    def action(self, env: RewardEnv) -> np.ndarray:
        features = env.pm.features_now()
        block = features.objects[env.spec.objects()[0]]
        centre = block["pos"].reshape(3)
        tool = features.tool.reshape(3)
        opening = float(features.gripper.reshape(-1)[0])
        grasp_point = centre + np.array([0.0, 0.0, self.grasp.grasp_offset])
        yaw = self.kin.grasp_yaw(centre, float(quat_to_yaw(block["quat"]).reshape(-1)[0]),
                                 math.pi / 2)
        target, jaws = self._phase(env, tool, opening, centre, grasp_point, block["rest_z"])
        if jaws > 0.0:  # approaching: aim past the servos' sag (not with the block in hand)
            target = _offset(target, tool)
        return to_action(env, self._joints(env, target, yaw), jaws)

    def _phase(self, env, tool, opening, centre, grasp_point, rest_z):
        """(tool target, gripper opening) for the state: lift, close, go down or go above."""
        if np.linalg.norm(tool - centre) < IN_HAND and opening < CLOSED:
            # straight up from where the tool holds it, to put the block at the goal height
            rise = rest_z + float(env.goal[0]) - centre[2]
            return tool + np.array([0.0, 0.0, rise]), 0.0
        if np.linalg.norm(tool - grasp_point) < AT_GRASP:
            return grasp_point, 0.0
        above = grasp_point + np.array([0.0, 0.0, self.grasp.approach_height])
        off = np.linalg.norm(tool[:2] - grasp_point[:2])
        going_down = tool[2] < above[2] - 0.01
        if opening > OPEN and tool[2] < above[2] + 0.01 and \
                off < (ON_THE_WAY if going_down else ABOVE):
            # down the vertical a step at a time: a straight line, as pick's line_down
            step = grasp_point.copy()
            step[2] = max(grasp_point[2], tool[2] - DESCENT_STEP)
            return step, self.grasp.pre_grasp_opening
        if going_down:  # off the vertical low down: straight up first, clear of the block
            return np.array([tool[0], tool[1], above[2]]), self.grasp.pre_grasp_opening
        return above, self.grasp.pre_grasp_opening

    def _joints(self, env: RewardEnv, tool_target: np.ndarray, yaw: float) -> np.ndarray:
        """Joints putting the tool centre at ``tool_target`` at ``yaw``, top down or leaning
        as little as the robot's tilts allow; the best found when none is exact."""
        q = env.pm.data.qpos[env.arm.qpos_adr].copy()
        best = None
        for tilt in self.grasp.tilts:
            rotation = self.kin.tool_rotation(tool_target, yaw, tilt)
            result = self.kin.solve(self.kin.site_target(tool_target, rotation), rotation, q)
            if result.ok(self.kin.options.position_tol, self.kin.options.rotation_tol):
                return result.q
            if best is None or result.position_error < best.position_error:
                best = result
        return best.q


def _offset(target: np.ndarray, tool: np.ndarray) -> np.ndarray:
    """``target`` moved by the tool's horizontal error when near it: the servos hold the
    arm a few mm short of its targets under gravity, and aiming past by the error measured
    now cancels that (a proportional correction, still a function of the state alone)."""
    error = target[:2] - tool[:2]
    if np.linalg.norm(error) > SAG_ZONE:
        return target
    return np.array([*(target[:2] + error), target[2]])


EXPERTS = {"lift": GraspLiftExpert}  # the expert of each family that has one
