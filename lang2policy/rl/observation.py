"""What a learned controller sees: the arm's state, the tool, and the spec's goal inputs.

One function builds the observation in training (``RewardEnv``) and on the robot
(``RLController``), from the same ``Features`` the reward terms read, so a policy never sees a
quantity computed two ways. Layout (float32)::

    arm joints (dof) | gripper opening (1) | arm joint velocities (dof) | tool centre (3) |
    tool velocity (3) | goal (family's goal_names) | goal point - tool centre (3) |
    per object of the spec, in the spec's order: centre (3) | centre - tool (3) |
    sin, cos of 4 x yaw (2: a cube looks the same every 90 degrees) | velocity (3) | lift (1) |
    sin, cos of 4 x (jaws' closing yaw - yaw) (2: how far the wrist must turn to grasp it)

Families without objects (reach) have no goal point beyond the first three goal numbers; for a
goal that is no point (a lift height) the "goal - tool" part is the first object's offset.

Normalisation (running mean and variance) belongs to the policy file, not to this layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lang2policy.rewards.features import Features, quat_to_yaw

OBJECT_SIZE = 14  # numbers per object


def observation_size(dof: int, goal_size: int, objects: int = 0) -> int:
    """Length of an observation for an arm of ``dof`` joints, a goal of ``goal_size`` and
    ``objects`` objects."""
    return 2 * dof + 1 + 3 + 3 + goal_size + 3 + OBJECT_SIZE * objects


def observe(features: Features, arm_qvel: np.ndarray, goal: np.ndarray,
            objects: Sequence[str] = ()) -> np.ndarray:
    """The observation of one state (``features`` of ``K = T = 1``) toward ``goal``, with the
    named ``objects`` (the spec's, in its order)."""
    tool = features.tool.reshape(3)
    goal = np.asarray(goal, float)
    point = goal[:3] if len(goal) >= 3 else features.objects[objects[0]]["pos"].reshape(3)
    parts = [
        features.arm_q.reshape(-1),
        features.gripper.reshape(1),
        np.asarray(arm_qvel, float).reshape(-1),
        tool,
        features.tool_vel.reshape(3),
        goal,
        point - tool,
    ]
    closing = float(np.arctan2(*features.closing_axis.reshape(3)[1::-1]))
    for name in objects:
        parts.append(_object_part(features.objects[name], tool, closing))
    return np.concatenate(parts).astype(np.float32)


def _object_part(obj: dict, tool: np.ndarray, closing_yaw: float) -> np.ndarray:
    """The object's numbers; ``closing_yaw``: the jaws' closing direction's heading (rad).
    The wrist turn a grasp needs is the same quantity as the ``grasp_align`` term's: from the
    object's yaw alone a policy would have to work out the jaws' heading from the joints."""
    pos = obj["pos"].reshape(3)
    yaw = float(quat_to_yaw(obj["quat"]).reshape(-1)[0])
    turn = 4.0 * (closing_yaw - yaw)
    lift = pos[2] - obj["rest_z"]
    return np.concatenate([pos, pos - tool, [np.sin(4.0 * yaw), np.cos(4.0 * yaw)],
                           obj["vel"].reshape(3), [lift, np.sin(turn), np.cos(turn)]])
