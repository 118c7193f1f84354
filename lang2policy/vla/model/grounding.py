"""Grounding the instruction in the front camera: heatmaps of where the named block and the goal
are in the image, supervised by their recorded positions projected into it.

The closed-loop failures of the first VLAs were grounding errors: the network's estimate of the
named block landed on another object of a similar colour (5-16 cm off in 3 of 6 episodes, while
a motor part fed the true scene state succeeds). Regressing 3-D positions from spatial-softmax
keypoints gives the encoder one weak, global signal per frame. A heatmap target is dense: every
cell of the map is told whether the named object is there, so the language-conditioned (FiLM)
features learn to pick out *that* block among the others (the approach of CLIPort's and
Transporter's pixel-wise affordances, here on a 2-core budget).

The head reads the encoder's stage-1 map (image/4, e.g. 24 x 24 at 96 px) and its stage-2 map
upsampled to it, and gives two logit maps (the named block; the goal: the bowl, the point the
push aims at, or the point above the block a lift aims at). Their soft-argmax, an image
position per map, is what the scene-state head reads, with the arm's state (a lifted block is
where the gripper is) and the words.

Targets come from the recorded scene state (``environment_state``, world frame) through the
front camera's nominal pose and field of view, read from the simulation's model. The camera's
per-episode jitter (about a centimetre) moves a target by about a pixel, which is noise the
heatmap tolerates.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import mujoco
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lang2policy.errors import ConfigError

GROUNDING_CAMERA = "front"
GROUNDED = ("block", "goal")  # one heatmap each
STAGES = (1, 2)  # the encoder stages the head reads: the finer map and the next, upsampled
POINT_DIM = 2 * len(GROUNDED)  # (u, v) of each heatmap's soft-argmax


def grid_size(image_size: int) -> int:
    """The heatmaps' side: the stage-1 map's (two stride-2 convolutions)."""
    return (image_size + 3) // 4


class GroundingHead(nn.Module):
    """Stage-1 and (upsampled) stage-2 feature maps → one logit map per grounded thing."""

    def __init__(self, fine_channels: int, coarse_channels: int, width: int = 64) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(fine_channels + coarse_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, len(GROUNDED), 1),
        )

    def forward(self, fine: torch.Tensor, coarse: torch.Tensor) -> torch.Tensor:
        """``fine [B, C1, G, G]``, ``coarse [B, C2, ~G/2, ~G/2]`` → logits ``[B, 2, G, G]``."""
        coarse = F.interpolate(coarse, size=fine.shape[-2:], mode="nearest")
        return self.layers(torch.cat([fine, coarse], dim=1))


def cell_coordinates(size: int, like: torch.Tensor) -> torch.Tensor:
    """The normalised coordinate of each cell's centre along one side: -1 .. 1."""
    return torch.linspace(-1.0, 1.0, size, device=like.device, dtype=like.dtype)


def soft_argmax(logits: torch.Tensor) -> torch.Tensor:
    """``[B, K, G, G]`` logits → ``[B, 2K]``: each map's expected (u, v), normalised -1 .. 1."""
    batch, maps, rows, cols = logits.shape
    weights = torch.softmax(logits.flatten(2), dim=-1).view_as(logits)
    u = (weights.sum(dim=2) * cell_coordinates(cols, logits)).sum(dim=-1)  # [B, K]
    v = (weights.sum(dim=3) * cell_coordinates(rows, logits)).sum(dim=-1)
    return torch.stack([u, v], dim=-1).reshape(batch, 2 * maps)


def heatmap_loss(logits: torch.Tensor, target: torch.Tensor, sigma_cells: float = 1.0):
    """Cross-entropy between each logit map and a Gaussian of ``sigma_cells`` around its
    target position (``target [B, 2K]``, normalised as ``soft_argmax`` gives it)."""
    rows, cols = logits.shape[-2:]
    u = cell_coordinates(cols, logits)[None, None, None, :]
    v = cell_coordinates(rows, logits)[None, None, :, None]
    pairs = target.view(len(target), -1, 2)
    sigma = sigma_cells * 2.0 / max(cols - 1, 1)
    du = u - pairs[..., 0, None, None]
    dv = v - pairs[..., 1, None, None]
    wanted = torch.exp(-(du**2 + dv**2) / (2 * sigma**2))
    wanted = wanted / wanted.sum(dim=(2, 3), keepdim=True).clamp(min=1e-12)
    log_p = torch.log_softmax(logits.flatten(2), dim=-1).view_as(logits)
    return -(wanted * log_p).sum(dim=(2, 3)).mean()


@dataclass(frozen=True)
class CameraProjection:
    """A pinhole camera in the world frame: MuJoCo's convention (it looks along its -z, x to
    the right, y up), square images."""

    position: np.ndarray  # [3]
    rotation: np.ndarray  # [3, 3], camera axes as columns
    fovy_degrees: float

    @classmethod
    def of_robot(cls, robot: str = "so101", camera: str = GROUNDING_CAMERA) -> CameraProjection:
        """The camera's nominal pose in the simulated tabletop of ``robot``."""
        from lang2policy.scene.world import World  # the scene compiler: only when asked

        world = World(robot)
        mujoco.mj_forward(world.model, world.data)
        try:
            index = world.model.camera(camera).id
        except KeyError as exc:
            raise ConfigError(f"the {robot} scene has no camera '{camera}'") from exc
        return cls(
            world.data.cam_xpos[index].copy(),
            world.data.cam_xmat[index].reshape(3, 3).copy(),
            float(world.model.cam_fovy[index]),
        )

    def pixels(self, points: np.ndarray, image_size: int) -> np.ndarray:
        """World points ``[N, 3]`` → continuous pixel positions ``[N, 2]`` (u right, v down)."""
        local = (np.asarray(points, np.float64) - self.position) @ self.rotation
        depth = np.maximum(-local[:, 2], 1e-6)  # in front of the camera
        focal = (image_size / 2) / np.tan(np.radians(self.fovy_degrees) / 2)
        u = image_size / 2 + focal * local[:, 0] / depth
        v = image_size / 2 - focal * local[:, 1] / depth
        return np.stack([u, v], axis=1)

    def grid_targets(self, points: np.ndarray, image_size: int) -> np.ndarray:
        """World points → the normalised heatmap coordinates of their pixels (cell centres at
        -1 .. 1 across ``grid_size(image_size)`` cells), clipped to the image."""
        cells = grid_size(image_size)
        cell = self.pixels(points, image_size) / (image_size / cells) - 0.5
        return np.clip(-1.0 + 2.0 * cell / max(cells - 1, 1), -1.0, 1.0)


def grounding_targets(
    environment: np.ndarray, image_size: int, camera: CameraProjection
) -> np.ndarray:
    """``float32 [N, 4]``: the named block's and the goal's heatmap coordinates, from the raw
    (world-frame) scene state of each frame (``environment_state``: block, then goal)."""
    environment = np.asarray(environment, np.float64)
    if environment.ndim != 2 or environment.shape[1] < 6:
        raise ConfigError(
            f"grounding needs the scene state's block and goal positions (6+ values per "
            f"frame), got shape {environment.shape}"
        )
    block = camera.grid_targets(environment[:, :3], image_size)
    goal = camera.grid_targets(environment[:, 3:6], image_size)
    return np.concatenate([block, goal], axis=1).astype(np.float32)


def image_fractions(points: np.ndarray, image_size: int) -> np.ndarray:
    """Normalised heatmap coordinates ``[2K]`` of a network taking ``image_size`` px images →
    positions as fractions of the image's width and height ``[K, 2]`` (0..1, any resolution)."""
    cells = grid_size(image_size)
    cell = (np.asarray(points, float).reshape(-1, 2) + 1.0) / 2.0 * (cells - 1) + 0.5
    return cell / cells


def draw_grounding(frame: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """``frame`` (RGB, the front camera) with where the network sees the named block (a white
    circle) and the goal (a white cross), given as ``image_fractions``: what a person checks
    first when a VLA misses."""
    size = frame.shape[0]
    block, goal = (np.asarray(fractions) * size).round().astype(int)
    marked = np.ascontiguousarray(frame).copy()
    radius = max(3, size // 40)
    cv2.circle(marked, (int(block[0]), int(block[1])), radius, (255, 255, 255), 1, cv2.LINE_AA)
    cv2.drawMarker(
        marked, (int(goal[0]), int(goal[1])), (255, 255, 255), cv2.MARKER_CROSS, 2 * radius, 1
    )
    return marked
