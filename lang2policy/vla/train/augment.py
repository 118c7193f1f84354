"""Image augmentation for training: DrQ's random shift and an optional colour jitter.

Random shift (pad by ``shift`` pixels replicating the border, then crop back to the original
size at a random offset) is the cheapest augmentation that reliably helps small from-scratch
image encoders (DrQ; Diffusion Policy's random crop does the same job). Colour jitter
(per-image brightness and contrast) is off by default: the simulation's lighting does not vary,
but a real camera's does. Each camera of each sample gets its own draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class AugmentConfig:
    """What to apply; all zero means no augmentation."""

    shift: int = 4  # pixels of random shift in each direction
    brightness: float = 0.0  # ± fraction added to every pixel
    contrast: float = 0.0  # ± fraction of scaling about the image mean

    @property
    def enabled(self) -> bool:
        return self.shift > 0 or self.brightness > 0 or self.contrast > 0


def random_shift(images: torch.Tensor, shift: int, generator: torch.Generator) -> torch.Tensor:
    """``[B, C, H, W]`` float images shifted by up to ``shift`` pixels, border replicated."""
    if shift <= 0:
        return images
    batch, _, height, width = images.shape
    padded = F.pad(images, (shift, shift, shift, shift), mode="replicate")
    offsets = torch.randint(0, 2 * shift + 1, (batch, 2), generator=generator)
    offsets = offsets.to(images.device)
    rows = offsets[:, 0, None] + torch.arange(height, device=images.device)  # [B, H]
    cols = offsets[:, 1, None] + torch.arange(width, device=images.device)  # [B, W]
    index = torch.arange(batch, device=images.device)[:, None, None]
    picked = padded.permute(0, 2, 3, 1)[index, rows[:, :, None], cols[:, None, :]]  # [B,H,W,C]
    return picked.permute(0, 3, 1, 2)


def color_jitter(
    images: torch.Tensor, brightness: float, contrast: float, generator: torch.Generator
) -> torch.Tensor:
    """``[B, C, H, W]`` images in 0..1 with a random brightness offset and contrast scale."""
    if brightness <= 0 and contrast <= 0:
        return images
    batch = images.shape[0]

    def draw(spread: float) -> torch.Tensor:
        values = (torch.rand(batch, 1, 1, 1, generator=generator) * 2 - 1) * spread
        return values.to(images.device, images.dtype)

    mean = images.mean(dim=(1, 2, 3), keepdim=True)
    jittered = (images - mean) * (1 + draw(contrast)) + mean + draw(brightness)
    return jittered.clamp(0.0, 1.0)


def augment(
    images: torch.Tensor, config: AugmentConfig, generator: torch.Generator
) -> torch.Tensor:
    """``[B, cameras, C, H, W]`` images in 0..1, augmented per camera image."""
    if not config.enabled:
        return images
    flat = images.flatten(0, 1)
    flat = random_shift(flat, config.shift, generator)
    flat = color_jitter(flat, config.brightness, config.contrast, generator)
    return flat.reshape(images.shape)
