"""Experts a policy is distilled from (``dagger.py``): an action for any state of a ``RewardEnv``.

An expert answers for the state the *learner* reached, not only along its own path (DAgger
asks it there), so each answers from the state (the MPC also from its warm start):

* ``GraspLiftExpert`` (lift): the pick of ``control.primitives`` as a state machine. From the
  block's pose and the measured tool and gripper it picks a phase (go above the block with the
  jaws turned across its faces, go down open, close on it, lift it to the goal height) and
  the tool move toward that phase's point.
* ``GraspPlaceExpert`` (place): the same pick, then with the block in hand up to a carrying
  height, over the bowl, down into it, jaws open at the block's place; once the block sits in
  the bowl it backs off upward.
* ``MPCExpert`` (any family, ``train distill --expert mpc``): the sampling MPC re-planned on a
  copy of the state, its controls one control period ahead written as the family's action.

They answer in the family's own action units (``actions.py``): joint offsets, or a tool move
and a turn of the jaws, over their full scales, and the gripper opening as -1..1.
"""

from __future__ import annotations

import math
from typing import Protocol

import mujoco
import numpy as np

from lang2policy.rewards.features import quat_to_yaw
from lang2policy.rl.actions import TOOL_STEP, TURN_STEP
from lang2policy.rl.env import RewardEnv

IN_HAND = 0.02  # m: block centre this close to the tool centre, gripper closing -> held
AT_GRASP = 0.006  # m: tool this close to the grasp point -> close the jaws
ABOVE = 0.004  # m: tool within this of the block's vertical (x, y) -> start going down
ON_THE_WAY = 0.008  # m: ... and within this once below the approach height -> keep going
DESCENT_STEP = 0.006  # m: how far below the tool each target on the way down is
SAG_ZONE = 0.015  # m: horizontal errors under this are aimed past twice over
CARRY_HEIGHT = 0.07  # m: the block carried this far above its place in the bowl
OVER_BOWL = 0.008  # m: block this close to the bowl's vertical -> lower it in
RELEASE_ABOVE = 0.01  # m: the block is let go this far above its place
TURNED = 0.08  # rad: jaws this close to the block's faces -> may start going down
CLOSED = 0.45  # measured opening under which the jaws are taken as closing on the block
OPEN = 0.4  # measured opening over which the jaws are taken as open enough to go down


class Expert(Protocol):
    """What DAgger asks of an expert."""

    def start(self, env: RewardEnv) -> None:
        """A new episode began in ``env``."""

    def action(self, env: RewardEnv) -> np.ndarray:
        """The expert's action for the state of ``env``."""


def to_action(env: RewardEnv, tool_move: np.ndarray, turn: float, opening: float) -> np.ndarray:
    """A "tool" action of ``env``: the tool move (m) and the jaws' turn (rad) over their full
    scales (the move scaled down as a whole, never turned), the gripper opening as -1..1."""
    move = np.asarray(tool_move, float) / TOOL_STEP
    move /= max(1.0, float(np.abs(move).max()))
    return np.array([*move, np.clip(turn / TURN_STEP, -1.0, 1.0),
                     2.0 * float(np.clip(opening, 0.0, 1.0)) - 1.0])


class GraspLiftExpert:
    """Grasp the family's block from above and lift it to the goal height."""

    def __init__(self, env: RewardEnv) -> None:
        if env.family.action != "tool" or not env.family.gripper:
            raise ValueError(f"the grasp expert acts on the tool and the gripper; family "
                             f"'{env.family.name}' does not")
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
        turn = wrist_turn(features.closing_axis.reshape(3), block["quat"])
        held = np.linalg.norm(tool - centre) < IN_HAND and opening < CLOSED
        if held:
            target, jaws = self._carry(env, features, tool, centre, block["rest_z"])
        else:
            target, jaws = self._pick(tool, opening, grasp_point, abs(turn) < TURNED)
        move = target - tool
        if jaws > 0.0 and np.linalg.norm(move[:2]) < SAG_ZONE:
            move[:2] *= 2.0  # approaching: aim past the servos' sag by the error seen now
        return to_action(env, move, turn, jaws)

    def _carry(self, env, features, tool, centre, rest_z) -> tuple[np.ndarray, float]:
        """(tool target, gripper opening) with the block in hand: straight up from where the
        tool holds it, to put the block at the goal height."""
        rise = rest_z + float(env.goal[0]) - centre[2]
        return tool + np.array([0.0, 0.0, rise]), 0.0

    def _pick(self, tool, opening, grasp_point, turned: bool) -> tuple[np.ndarray, float]:
        """(tool target, gripper opening) toward a grasp: close, go down or go above."""
        if np.linalg.norm(tool - grasp_point) < AT_GRASP:
            return grasp_point, 0.0
        above = grasp_point + np.array([0.0, 0.0, self.grasp.approach_height])
        off = np.linalg.norm(tool[:2] - grasp_point[:2])
        going_down = tool[2] < above[2] - 0.01
        if opening > OPEN and tool[2] < above[2] + 0.01 and \
                off < (ON_THE_WAY if going_down else ABOVE) and (turned or going_down):
            # down the vertical a step at a time: a straight line, as pick's line_down
            step = grasp_point.copy()
            step[2] = max(grasp_point[2], tool[2] - DESCENT_STEP)
            return step, self.grasp.pre_grasp_opening
        if going_down:  # off the vertical low down: straight up first, clear of the block
            return np.array([tool[0], tool[1], above[2]]), self.grasp.pre_grasp_opening
        return above, self.grasp.pre_grasp_opening


class GraspPlaceExpert(GraspLiftExpert):
    """Grasp the family's block, carry it over the bowl, lower it in and let go."""

    def action(self, env: RewardEnv) -> np.ndarray:
        features = env.pm.features_now()
        block, bowl = (features.objects[name]["pos"].reshape(3) for name in env.spec.objects())
        tool = features.tool.reshape(3)
        opening = float(features.gripper.reshape(-1)[0])
        held = np.linalg.norm(tool - block) < IN_HAND and opening < CLOSED
        if not held and _in_bowl(block, bowl):  # placed: back off upward, jaws open
            carry = bowl[2] + float(env.goal[0]) + CARRY_HEIGHT
            return to_action(env, np.array([0.0, 0.0, carry - tool[2]]), 0.0,
                             self.grasp.pre_grasp_opening)
        return super().action(env)

    def _carry(self, env, features, tool, centre, rest_z) -> tuple[np.ndarray, float]:
        """Up to the carrying height, over the bowl, then down into it; the jaws open once
        the block is at its place."""
        bowl = features.objects[env.spec.objects()[1]]["pos"].reshape(3)
        place = bowl + np.array([0.0, 0.0, float(env.goal[0])])
        carry = place[2] + CARRY_HEIGHT
        off = place[:2] - centre[:2]
        if np.linalg.norm(off) > OVER_BOWL:
            if tool[2] < carry - 0.02 and np.linalg.norm(off) > 2 * OVER_BOWL:
                return np.array([tool[0], tool[1], carry]), 0.0  # straight up first
            return np.array([tool[0] + off[0], tool[1] + off[1], carry]), 0.0
        drop = tool + np.array([off[0], off[1], place[2] + RELEASE_ABOVE - centre[2]])
        release = centre[2] - place[2] < RELEASE_ABOVE + 0.005
        return drop, self.grasp.pre_grasp_opening if release else 0.0


def _in_bowl(block: np.ndarray, bowl: np.ndarray) -> bool:
    """Whether the block sits in the bowl: over its middle and low."""
    return bool(np.linalg.norm(block[:2] - bowl[:2]) < 0.02 and block[2] - bowl[2] < 0.04)


def wrist_turn(closing_axis: np.ndarray, object_quat: np.ndarray) -> float:
    """The turn (rad, within +-45 deg) about the vertical that lines the jaws' closing
    direction up with the object's faces (a cube: every 90 degrees)."""
    closing = math.atan2(closing_axis[1], closing_axis[0])
    error = closing - float(quat_to_yaw(object_quat).reshape(-1)[0])
    period = math.pi / 2
    return -((error + period / 2) % period - period / 2)


class MPCExpert:
    """The sampling MPC as the expert (any family): re-planned on a copy of the state
    (``controllers.MPCController``), its controls one control period ahead written as the
    family's action. Slow (one MPC iteration per label, 25-60 ms on 2 cores) and, at one
    iteration per 0.05 s step, a weaker grasper than the scripted experts (3 of 6 lifts)."""

    def __init__(self, env: RewardEnv, config=None) -> None:
        from lang2policy.mpc.sampler import MPCConfig
        from lang2policy.rl.controllers import MPCController

        self.controller = MPCController(env, config or MPCConfig(threads=1))
        self.scratch: mujoco.MjData | None = None  # forward kinematics of the targets

    def start(self, env: RewardEnv) -> None:
        self.controller.start(env)

    def action(self, env: RewardEnv) -> np.ndarray:
        ahead = self.controller.plan_ahead(env)
        arm = env.arm
        targets = ahead[arm.actuator_ids]
        opening = (float(ahead[arm.gripper_actuator_ids][0]) - arm.gripper_closed) / (
            arm.gripper_open - arm.gripper_closed)
        if env.family.action == "tool":
            if self.scratch is None or self.scratch.qpos.size != env.pm.model.nq:
                self.scratch = mujoco.MjData(env.pm.model)
            move, turn = tool_change(env, targets, self.scratch)
            return to_action(env, move, turn, opening)
        offset = (targets - env.pm.data.qpos[arm.qpos_adr]) / env.family.action_scale
        offset /= max(1.0, float(np.abs(offset).max()))
        return np.append(offset, 2.0 * np.clip(opening, 0.0, 1.0) - 1.0) \
            if env.family.gripper else offset


def tool_change(env: RewardEnv, targets: np.ndarray,
                scratch: mujoco.MjData | None = None) -> tuple[np.ndarray, float]:
    """How far the tool centre moves (m) and the jaws turn about the vertical (rad) from the
    env's state to the arm at joint ``targets`` (forward kinematics on ``scratch``, a data of
    the env's model reused across calls, or a fresh one)."""
    pm, arm = env.pm, env.arm
    scratch = scratch if scratch is not None else mujoco.MjData(pm.model)
    scratch.qpos[:] = pm.data.qpos
    scratch.qpos[arm.qpos_adr] = targets
    poses = []
    for data in (pm.data, scratch):
        mujoco.mj_kinematics(pm.model, data)
        rotation = data.site_xmat[arm.ee_site_id].reshape(3, 3)
        closing = rotation @ (pm.center_offset / np.linalg.norm(pm.center_offset))
        poses.append((data.site_xpos[arm.ee_site_id] + rotation @ pm.center_offset,
                      math.atan2(closing[1], closing[0])))
    (now, yaw_now), (then, yaw_then) = poses
    return then - now, (yaw_then - yaw_now + math.pi) % (2 * math.pi) - math.pi


# the expert of each family that has one
EXPERTS = {"lift": GraspLiftExpert, "place": GraspPlaceExpert}
