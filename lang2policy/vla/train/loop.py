"""The optimisation itself: AdamW with warm-up and a cosine schedule, the masked L1 loss on
action chunks, gradient clipping, an optional EMA of the weights, and the state that resumes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from lang2policy.vla.model.grounding import grid_size, heatmap_loss, soft_argmax
from lang2policy.vla.model.network import VLAConfig, VLANet
from lang2policy.vla.train.augment import AugmentConfig, augment
from lang2policy.vla.train.batches import Batch, MotorBatch
from lang2policy.vla.train.distributed import DistContext


@dataclass(frozen=True)
class OptimConfig:
    """How the weights are fitted."""

    lr: float = 3e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 500
    min_lr_ratio: float = 0.05  # the cosine ends at this fraction of ``lr``
    grad_clip: float = 1.0
    ema_decay: float = 0.0  # 0: no EMA; else e.g. 0.999
    aux_weight: float = 1.0  # weight of the auxiliary scene-state L1 beside the action L1
    # Fraction of each batch whose action head reads the recorded scene state (plus Gaussian
    # noise of ``scene_noise`` std, normalised units) instead of the network's own prediction.
    scene_forcing: float = 0.5
    scene_noise: float = 0.1
    # head_reads="scene" only: frames per step whose action chunks are also learnt from their
    # recorded scene state alone (no images: the motor part's own, much bigger batch)
    motor_batch: int = 0
    # head_reads="scene" only: image-free steps that fit the motor part (action head and
    # language MLP) alone before the first image step, at ``motor_lr`` with a cosine to zero;
    # the motor part needs many more samples than the images allow, and they cost little
    motor_steps: int = 0
    motor_lr: float = 1e-3
    # weight of the grounding heatmaps' cross-entropy (networks with a grounding head only)
    grounding_weight: float = 1.0


def lr_factor(warmup: int, total: int, min_ratio: float) -> Callable[[int], float]:
    """The learning-rate multiplier at a step: linear warm-up, then a cosine to ``min_ratio``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def masked_l1(predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean absolute error over the actions inside their episode (``mask [B, chunk]``)."""
    error = (predicted - target).abs().mean(dim=-1)
    return (error * mask).sum() / mask.sum().clamp(min=1.0)


def scene_millimetres(error: np.ndarray | None, env_std: np.ndarray | None) -> dict[str, list]:
    """The validation's mean absolute error of the named block's and the goal's position, in
    mm per axis, from its normalised per-dimension ``error``: what a grasp has to live with
    (the normalised L1 mixes in the yaw). Empty without a scene state of 6 or more dims."""
    if error is None or env_std is None or len(error) < 6:
        return {}
    rounded = [round(float(v), 1) for v in error[:6] * env_std[:6] * 1000.0]
    return {"val_block_mae_mm": rounded[:3], "val_goal_mae_mm": rounded[3:]}


def grounding_pixels(error: np.ndarray | None, config: VLAConfig) -> dict[str, list]:
    """The validation's mean absolute grounding error in image pixels (block u, v, goal u, v)
    from the normalised one (heatmap cells span -1 .. 1). Empty without a grounding head."""
    if error is None:
        return {}
    cells = grid_size(config.image_size)
    pixels = error * (cells - 1) / 2 * (config.image_size / cells)
    return {"val_grounding_px": [round(float(v), 2) for v in pixels]}


class Trainer:
    """The network (wrapped for DDP in a distributed run), its optimiser, schedule and EMA."""

    def __init__(
        self, net: VLANet, optim: OptimConfig, total_steps: int, context: DistContext
    ) -> None:
        self.net = net.to(context.device)
        self.model: nn.Module = self.net
        if context.distributed:
            ids = [context.device.index] if context.device.type == "cuda" else None
            self.model = DistributedDataParallel(  # points-only nets leave stages unused
                self.net, device_ids=ids, find_unused_parameters=self.net.points_only
            )
        self.optim = optim
        self.optimizer = torch.optim.AdamW(
            self.net.parameters(), lr=optim.lr, weight_decay=optim.weight_decay
        )
        factor = lr_factor(optim.warmup_steps, total_steps, optim.min_lr_ratio)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)
        self.last_aux_loss: float | None = None  # the auxiliary loss of the last step
        self.last_grounding_loss: float | None = None  # the heatmaps' loss of the last step
        self.last_grounding_error: np.ndarray | None = None  # [4], last validation, normalised
        self.last_scene_error: np.ndarray | None = None  # per dimension, last validation
        self.ema: AveragedModel | None = None
        if optim.ema_decay > 0:
            self.ema = AveragedModel(self.net, multi_avg_fn=get_ema_multi_avg_fn(optim.ema_decay))

    @property
    def export_net(self) -> VLANet:
        """The weights to evaluate and save: the EMA when there is one."""
        return self.ema.module if self.ema is not None else self.net

    @property
    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def step(
        self,
        batch: Batch,
        augmentation: AugmentConfig,
        generator: torch.Generator,
        motor: MotorBatch | None = None,
    ) -> float:
        """One optimiser step on ``batch`` (and the image-free ``motor`` frames, bottleneck
        networks only); returns its action loss (the auxiliary scene-state loss, when the
        network and the batch have one, is added to it and kept in ``last_aux_loss``)."""
        self.model.train()
        images = augment(batch.images, augmentation, generator)
        forced, mask = self._forced_scene(batch, generator)
        rows = None if motor is None else self._motor_rows(motor, generator)
        predicted, aux, logits = self.model(
            images, batch.state, batch.language, aux_input=forced, aux_mask=mask,
            motor_rows=rows, with_grounding=True, keyframes=batch.keyframes,
        )  # fmt: skip
        targets, masks = batch.actions, batch.mask
        if motor is not None:
            targets = torch.cat([targets, motor.actions])
            masks = torch.cat([masks, motor.mask])
        action_loss = masked_l1(predicted, targets, masks)
        loss = action_loss + self._scene_losses(batch, aux, logits)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.optim.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.net.parameters(), self.optim.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        if self.ema is not None:
            self.ema.update_parameters(self.net)
        return action_loss.item()

    def _scene_losses(
        self, batch: Batch, aux: torch.Tensor | None, logits: torch.Tensor | None
    ) -> torch.Tensor | float:
        """The weighted auxiliary losses: the scene state's L1 (kept in ``last_aux_loss``) and
        the grounding heatmaps' cross-entropy (``last_grounding_loss``), where there are any."""
        total: torch.Tensor | float = 0.0
        self.last_aux_loss = self.last_grounding_loss = None
        if aux is not None and batch.environment is not None:
            aux_loss = (aux - batch.environment).abs().mean()
            total = total + self.optim.aux_weight * aux_loss
            self.last_aux_loss = aux_loss.item()
        if logits is not None and batch.grounding is not None:
            grounding_loss = heatmap_loss(logits, batch.grounding)
            total = total + self.optim.grounding_weight * grounding_loss
            self.last_grounding_loss = grounding_loss.item()
        return total

    def _forced_scene(
        self, batch: Batch, generator: torch.Generator
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """What the action head reads this step in place of its own scene prediction:
        (the recorded scene state with noise, the rows that read it), or (None, None). A
        ``scene_forcing`` fraction of the rows read it; the rest read the prediction, so the
        head also learns from what it will get at run time. A latched network's head reads
        the recorded first scene in every row, without noise: at run time it reads one held
        estimate, never a prediction of the frame (``scene_forcing`` and ``scene_noise``
        apply to per-frame networks)."""
        optim = self.optim
        if self.net.config.scene_latch and batch.environment is not None:
            return batch.environment, None  # every row reads the held scene, as at run time
        active = optim.scene_forcing > 0 and self.net.aux_head is not None
        if batch.environment is None or not active:
            return None, None
        env = batch.environment
        noise = torch.randn(env.shape, generator=generator).to(env.device)
        rows = torch.rand(len(env), 1, generator=generator).to(env.device)
        return env + self.optim.scene_noise * noise, rows < self.optim.scene_forcing

    def pretrain_motor(
        self,
        batches: Callable[[], MotorBatch],
        generator: torch.Generator,
        on_step: Callable[[float], None] | None = None,
    ) -> list[float]:
        """``motor_steps`` image-free steps on the action head and the language MLP only (the
        encoder and the scene head are left alone); returns the losses (each also given to
        ``on_step``, for a progress bar)."""
        optim, net = self.optim, self.net
        params = [*net.head.parameters(), *net.language.parameters()]
        optimizer = torch.optim.AdamW(params, lr=optim.motor_lr, weight_decay=optim.weight_decay)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(1, optim.motor_steps))
        losses = []
        net.train()
        for _ in range(optim.motor_steps):
            motor = batches()
            chunk = net.head(net.motor_features(*self._motor_rows(motor, generator)))
            loss = masked_l1(chunk.view_as(motor.actions), motor.actions, motor.mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if on_step is not None:
                on_step(losses[-1])
        return losses

    def _motor_rows(
        self, motor: MotorBatch, generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        """The motor frames' (state, language, recorded scene state plus the forcing noise,
        keyframes or None)."""
        env = motor.environment
        assert env is not None  # BatchMaker.motor refuses a dataset without it
        if self.net.config.scene_latch:  # the held scene is read exactly, as at run time
            return motor.state, motor.language, env, motor.keyframes
        noise = torch.randn(env.shape, generator=generator).to(env.device)
        noised = env + self.optim.scene_noise * noise
        return motor.state, motor.language, noised, motor.keyframes

    def validation_loss(self, batches: Iterable[Batch]) -> tuple[float, float | None]:
        """The mean masked action L1 of the exported weights over ``batches`` (no
        augmentation; a latched network's head reading the recorded first scene, as it reads
        its held look at run time), and the mean scene-state L1 when the network predicts it
        (else None;
        its mean per dimension, normalised, is kept in ``last_scene_error``, and the grounding
        points' mean absolute error in ``last_grounding_error``)."""
        net = self.export_net
        net.eval()
        total, weight = 0.0, 0.0
        sums: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}

        def add(name: str, errors: torch.Tensor) -> None:
            sums[name] = sums.get(name, 0) + errors.abs().sum(dim=0)
            counts[name] = counts.get(name, 0) + len(errors)

        with torch.inference_mode():
            for batch in batches:
                held = batch.environment if net.config.scene_latch else None
                predicted, aux, logits = net(
                    batch.images, batch.state, batch.language, with_grounding=True,
                    keyframes=batch.keyframes, aux_input=held,
                )
                loss = masked_l1(predicted, batch.actions, batch.mask)
                total += loss.item() * batch.mask.sum().item()
                weight += batch.mask.sum().item()
                if aux is not None and batch.environment is not None:
                    add("scene", aux - batch.environment)
                if logits is not None and batch.grounding is not None:
                    add("grounding", soft_argmax(logits) - batch.grounding)
        means = {name: (sums[name] / counts[name]).cpu().numpy() for name in sums}
        self.last_scene_error = means.get("scene")
        self.last_grounding_error = means.get("grounding")
        aux_mean = None if self.last_scene_error is None else float(self.last_scene_error.mean())
        return total / max(weight, 1.0), aux_mean

    def state_dict(self) -> dict[str, Any]:
        """Everything but the step and the random state, for ``checkpoint.pt``."""
        return {
            "model": self.net.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["model"])
        if self.ema is not None and state.get("ema") is not None:
            self.ema.load_state_dict(state["ema"])
        elif self.ema is not None:  # EMA switched on at resume: start it from the weights
            self.ema.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
