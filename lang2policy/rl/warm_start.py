"""RL fine-tuning of a shipped policy: PPO's actor and observation normaliser start from it.

``lang2policy train rl --init DIR`` loads the numpy ``MLPPolicy`` in ``DIR`` (a distilled
policy, or an earlier PPO one) into a fresh stable-baselines3 PPO of the same shape: its
hidden layers and mean layer take the policy's weights, ``VecNormalize`` takes its observation
statistics (given a large count, so the first rollouts barely move them: the weights were fit
to those), and the Gaussian's log standard deviation starts at ``log_std`` (small: exploring
as widely as a fresh policy would undo what it imitated). The critic starts untrained; PPO
fits it from the first rollouts while the clipped objective keeps the actor near its start.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.rl.policy_file import MLPPolicy, load_policy

FINE_TUNE_LOG_STD = -1.6  # std 0.2 of a [-1, 1] action: a DAgger policy's own scatter
NORMALISER_COUNT = 1e6  # states the loaded statistics count as


def initial_policy(directory: str | Path, family: str, robot: str, hidden: int) -> MLPPolicy:
    """The policy in ``directory``, checked to fit a ``hidden``-unit PPO of ``family``."""
    policy = load_policy(directory)
    if (policy.family, policy.robot) != (family, robot):
        raise Lang2PolicyError(
            f"--init {directory}: a {policy.family} policy for the {policy.robot}; this run "
            f"trains {family} for the {robot}")
    widths = [int(w.shape[0]) for w in policy.weights[:-1]]
    if widths != [hidden, hidden]:
        raise Lang2PolicyError(
            f"--init {directory}: hidden layers {widths}; this run has [{hidden}, {hidden}] "
            "(give --hidden to match)")
    return policy


def load_into(model, env, policy: MLPPolicy, log_std: float = FINE_TUNE_LOG_STD) -> None:
    """Copy ``policy`` into the PPO ``model`` (actor, log std) and ``env`` (``VecNormalize``)."""
    import torch

    net = model.policy.mlp_extractor.policy_net
    linears = [m for m in net if hasattr(m, "weight")] + [model.policy.action_net]
    if len(linears) != len(policy.weights):
        raise Lang2PolicyError(
            f"the policy has {len(policy.weights)} layers; PPO's actor has {len(linears)}")
    with torch.no_grad():
        for layer, weight, bias in zip(linears, policy.weights, policy.biases, strict=True):
            if tuple(layer.weight.shape) != weight.shape:
                raise Lang2PolicyError(
                    f"layer shape {weight.shape} does not fit PPO's {tuple(layer.weight.shape)}")
            layer.weight.copy_(torch.as_tensor(weight, dtype=layer.weight.dtype))
            layer.bias.copy_(torch.as_tensor(bias, dtype=layer.bias.dtype))
        model.policy.log_std.fill_(float(log_std))
    env.obs_rms.mean = np.array(policy.obs_mean, np.float64)
    env.obs_rms.var = np.array(policy.obs_var, np.float64)
    env.obs_rms.count = NORMALISER_COUNT
