"""What a learned controller sees: the arm's state, the tool, and the spec's goal inputs.

One function builds the observation in training (``RewardEnv``) and on the robot
(``RLController``), from the same ``Features`` the reward terms read, so a policy never sees a
quantity computed two ways. Layout (float32)::

    arm joints (dof) | gripper opening (1) | arm joint velocities (dof) | tool centre (3) |
    tool velocity (3) | goal (family's goal_names) | goal point - tool centre (3) |
    per object of the spec, in the spec's order: centre (3) | centre - tool (3) |
    sin, cos of 4 x yaw (2: a cube looks the same every 90 degrees) | velocity (3) | lift (1)

Families without objects (reach) have no goal point beyond the first three goal numbers; for a
goal that is no point (a lift height) the "goal - tool" part is the first object's offset.

Normalisation (running mean and variance) belongs to the policy file, not to this layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lang2policy.rewards.features import Features, quat_to_yaw

OBJECT_SIZE = 12  # numbers per object


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
    for name in objects:
        parts.append(_object_part(features.objects[name], tool))
    return np.concatenate(parts).astype(np.float32)


def _object_part(obj: dict, tool: np.ndarray) -> np.ndarray:
    pos = obj["pos"].reshape(3)
    yaw = 4.0 * float(quat_to_yaw(obj["quat"]).reshape(-1)[0])
    lift = pos[2] - obj["rest_z"]
    return np.concatenate([pos, pos - tool, [np.sin(yaw), np.cos(yaw)],
                           obj["vel"].reshape(3), [lift]])
