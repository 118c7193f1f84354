"""What a learned controller sees: the arm's state, the tool, and the spec's goal inputs.

One function builds the observation in training (``RewardEnv``) and on the robot
(``RLController``), from the same ``Features`` the reward terms read, so a policy never sees a
quantity computed two ways. Layout (float32)::

    arm joints (dof) | gripper opening (1) | arm joint velocities (dof) | tool centre (3) |
    tool velocity (3) | goal (family's goal_names) | goal point - tool centre (3)

Normalisation (running mean and variance) belongs to the policy file, not to this layout.
"""

from __future__ import annotations

import numpy as np

from lang2policy.rewards.features import Features


def observation_size(dof: int, goal_size: int) -> int:
    """Length of an observation for an arm of ``dof`` joints and a goal of ``goal_size``."""
    return 2 * dof + 1 + 3 + 3 + goal_size + 3


def observe(features: Features, arm_qvel: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """The observation of one state (``features`` of ``K = T = 1``) toward ``goal``."""
    tool = features.tool.reshape(3)
    parts = (
        features.arm_q.reshape(-1),
        features.gripper.reshape(1),
        np.asarray(arm_qvel, float).reshape(-1),
        tool,
        features.tool_vel.reshape(3),
        np.asarray(goal, float),
        np.asarray(goal, float)[:3] - tool,
    )
    return np.concatenate(parts).astype(np.float32)
