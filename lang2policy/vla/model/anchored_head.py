"""An action head that can copy the keyframes exactly: each predicted action is a soft choice
among the keyframes (and staying put) plus a learnt residual.

Why: a plain MLP head that reads the keyframes must reproduce a keyframe's joints through its
layers. The wrist roll of a push's start ranges over about 4 rad between layouts, and the
plain head's roll was measured 0.3-0.8 rad off the push-start keyframe in failed pushes (the
jaw then meets the block at an angle, or beside it). Here the head outputs, per chunk
position, softmax weights over ``[stay, keyframe 1 .. K]`` and a residual; the arm joints'
motion is the weighted sum of the keyframes' offsets from the current joints, so a weight near
1 on "push_start" reaches its roll to the keyframe's precision whatever the layout. The demos
move along straight joint-space lines between keyframes, which such a convex mix of "stay"
and the next keyframe describes. The gripper has no keyframe: it comes from the residual.

The output is in the same normalised delta units as a plain head (``vla/model/normalize.py``), so
the loss, the ensembling and the runtime are unchanged. The head needs the statistics that
turn normalised joints into radians and radians into normalised deltas; they are set from the
model's normaliser (``use_statistics``), not stored with the weights.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from lang2policy.errors import ConfigError
from lang2policy.vla.model.normalize import Normalizer


def mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers of ``sizes`` with GELU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


class KeyframeAnchoredHead(nn.Module):
    """``features -> [B, chunk * action_dim]`` normalised deltas, anchored on the keyframes.

    ``features`` is the bottleneck head's input: it starts with the normalised state and ends
    with the ``keyframes * dof`` normalised keyframe joints (``VLANet._head_input``)."""

    def __init__(
        self, in_dim: int, hidden: list[int], chunk: int, action_dim: int, keyframes: int,
        dof: int,
    ) -> None:
        super().__init__()
        if not 0 < dof < action_dim or keyframes < 1:
            raise ConfigError(
                f"an anchored head needs 0 < dof < action_dim and keyframes: got dof {dof}, "
                f"action_dim {action_dim}, {keyframes} keyframes"
            )
        self.chunk, self.action_dim, self.keyframes, self.dof = chunk, action_dim, keyframes, dof
        self.anchors = keyframes + 1  # staying put, then each keyframe
        self.mlp = mlp([in_dim, *hidden, chunk * (action_dim + self.anchors)])
        self.register_buffer("state_std", torch.ones(dof), persistent=False)
        self.register_buffer("action_mean", torch.zeros(chunk, dof), persistent=False)
        self.register_buffer("action_std", torch.ones(chunk, dof), persistent=False)

    def use_statistics(self, normalizer: Normalizer) -> None:
        """Take the state std and the delta-action mean/std of ``normalizer`` (a
        ``Normalizer`` in delta mode): the units the anchoring converts between."""
        if normalizer.action_mode != "delta":
            raise ConfigError("an anchored head predicts delta actions: train with delta mode")
        dof = self.dof
        self.state_std.copy_(torch.as_tensor(normalizer.state_std[:dof]))
        self.action_mean.copy_(torch.as_tensor(normalizer.action_mean[:, :dof]))
        self.action_std.copy_(torch.as_tensor(normalizer.action_std[:, :dof]))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        batch, dof = features.shape[0], self.dof
        out = self.mlp(features).view(batch, self.chunk, self.action_dim + self.anchors)
        residual, logits = out[..., : self.action_dim], out[..., self.action_dim :]
        weights = torch.softmax(logits, dim=-1)[..., 1:]  # [B, chunk, K]; "stay" moves 0
        state = features[:, :dof]
        frames = features[:, -self.keyframes * dof :].view(batch, self.keyframes, dof)
        offsets = (frames - state[:, None, :]) * self.state_std  # radians, [B, K, dof]
        motion = torch.einsum("bck,bkd->bcd", weights, offsets)  # radians, [B, chunk, dof]
        anchored = (motion - self.action_mean) / self.action_std
        joints = residual[..., :dof] + anchored
        return torch.cat([joints, residual[..., dof:]], dim=-1).flatten(1)
