"""The VLA network: a small FiLM CNN over each camera, proprio and the instruction vector, and
an L1 action-chunk head.

Sized for training on a 2-core CPU (the reference notes' "SmallCNN-FiLM + L1 chunk"; ≈1.3 M
params, ≈150 samples/s with both cameras at batch 64 on one thread here): four stride-2
convolutions with GroupNorm, trained from scratch, each followed by FiLM on the instruction,
``h = (1 + γ) h + β`` (BAKU's recipe), and spatial-softmax keypoints (expected x, y of every
channel). One encoder serves both cameras; a learned camera embedding is added to its FiLM
conditioning so it can still attend to different things in each view. The head sees both
cameras' keypoints, the normalised state and the language feature and predicts ``chunk``
future actions, normalised.

With ``aux_dim > 0`` a small auxiliary head first predicts the privileged scene state from the
same features (where the named block is and where the task wants it:
``environment_state``); training supervises it, and the action head reads its prediction. At
run time it needs no privileged input: it is part of the network's own reading of the images.

``python -m lang2policy.vla.measure`` prints the parameter count, the safetensors size, the CPU
latency of one forward pass and the training throughput.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lang2policy.errors import ConfigError
from lang2policy.vla import schema
from lang2policy.vla.grounding import (
    GROUNDING_CAMERA,
    POINT_DIM,
    STAGES,
    GroundingHead,
    soft_argmax,
)
from lang2policy.vla.language import MINILM, MINILM_DIM, MINILM_SLOTS, language_dim
from lang2policy.vla.slots import SLOT_DIM

HEAD_READS = ("features", "scene")
PERCEPTION_WORDS = ("sentence", "slots")


@dataclass(frozen=True)
class VLAConfig:
    """Every size of the network; saved next to the weights as ``config.json``."""

    image_size: int = schema.IMAGE_SIZE
    cameras: tuple[str, ...] = schema.CAMERAS
    state_dim: int = schema.STATE_DIM
    action_dim: int = schema.ACTION_DIM
    chunk: int = 10  # future actions predicted per step (1 s at 10 Hz)
    channels: tuple[int, ...] = (32, 64, 128, 128)  # one stride-2 conv each
    groups: int = 8  # GroupNorm groups (BatchNorm is a poor fit for small, correlated batches)
    language_model: str = MINILM
    language_dim: int = MINILM_DIM
    film_dim: int = 256  # the language MLP's width, source of every (γ, β)
    head_dim: int = 512
    head_layers: int = 2
    aux_dim: int = 0  # auxiliary scene-state outputs (0: none)
    # What the action head reads: "features" (the encoder's keypoints, the state, the words and
    # the scene prediction) or "scene" (only the state, the words and the scene state: a
    # perception/motor bottleneck, so the motor part can learn from the recorded scene state)
    head_reads: str = "features"
    # Earlier conv stages (0-based) whose maps give spatial-softmax keypoints too, beside the
    # last one's: a finer map (stage 1: 24 x 24 at 96 px) places small objects more precisely
    # than the last map's 16-pixel cells, at almost no cost
    fine_keypoints: tuple[int, ...] = ()
    # Heatmaps of the named block and the goal in the front camera (``vla/grounding.py``): the
    # scene-state head then reads their image positions, the state and the words
    grounding: bool = False
    # With grounding: the state dimensions the scene head reads beside the grounded points and
    # the words (e.g. (5,): the gripper opening). Not the arm's joints by default: with them it
    # learns "the block is where the gripper is" from the demonstrations' grasps, and follows
    # the arm when the arm heads elsewhere (measured in closed loop)
    grounding_state: tuple[int, ...] = ()
    # Look once, then act (``vla/scene_latch.py``; needs head_reads="scene"): the action head
    # reads the scene state estimated on an episode's first frame, held until the episode or
    # the instruction changes, and the scene head learns from frames whose block has not moved
    scene_latch: bool = False
    # What the perception part (the encoder's FiLM, the grounding and scene heads) reads of the
    # instruction: the whole "sentence" vector, or only its "slots" (the named colours and
    # side, ``vla/slots.py``; needs the MiniLM+slots encoder). With slots, where the named
    # block is does not depend on the task family, so a held-out family x colour combination
    # is seen as its colour was seen in the other families; the action head reads the sentence
    perception_words: str = "sentence"
    fps: int = schema.FPS

    def __post_init__(self) -> None:
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "channels", tuple(self.channels))
        object.__setattr__(self, "fine_keypoints", tuple(self.fine_keypoints))
        object.__setattr__(self, "grounding_state", tuple(self.grounding_state))
        earlier = range(len(self.channels) - 1)
        fine = self.fine_keypoints
        if len(set(fine)) != len(fine) or any(stage not in earlier for stage in fine):
            raise ConfigError(
                f"fine_keypoints must be distinct conv stages before the last "
                f"({list(earlier)}), got {list(fine)}"
            )
        if not self.cameras or len(set(self.cameras)) != len(self.cameras):
            raise ConfigError(f"cameras must be distinct names, got {self.cameras}")
        bad = [c for c in self.channels if c % self.groups]
        if bad or not self.channels:
            raise ConfigError(f"every channel count must divide by groups={self.groups}: {bad}")
        known = language_dim(self.language_model)
        if known is not None and self.language_dim != known:
            raise ConfigError(
                f"{self.language_model} embeddings are {known}-d, not {self.language_dim}"
            )
        small = {k: v for k, v in self.sizes().items() if v < 1}
        if self.aux_dim < 0:
            small["aux_dim"] = self.aux_dim
        if self.grounding:
            self._check_grounding()
        if self.head_reads not in HEAD_READS:
            raise ConfigError(f"head_reads must be one of {HEAD_READS}, got {self.head_reads!r}")
        if self.perception_words not in PERCEPTION_WORDS:
            raise ConfigError(
                f"perception_words must be one of {PERCEPTION_WORDS}, got {self.perception_words!r}"
            )
        if self.perception_words == "slots" and self.language_model != MINILM_SLOTS:
            raise ConfigError(
                f"perception_words='slots' reads the slots the {MINILM_SLOTS} encoder appends "
                f"(--slots); this model's encoder is {self.language_model}"
            )
        if self.scene_latch and self.head_reads != "scene":
            raise ConfigError(
                "scene_latch holds the scene state the action head reads: it needs "
                "head_reads='scene' (--head-reads scene)"
            )
        if small:
            raise ConfigError(f"sizes must be positive: {small}")

    def _check_grounding(self) -> None:
        if GROUNDING_CAMERA not in self.cameras or len(self.channels) <= max(STAGES):
            raise ConfigError(
                f"grounding needs the '{GROUNDING_CAMERA}' camera and at least "
                f"{max(STAGES) + 1} conv stages; got cameras {list(self.cameras)} and "
                f"{len(self.channels)} stages"
            )
        state = self.grounding_state
        if len(set(state)) != len(state) or any(not 0 <= d < self.state_dim for d in state):
            raise ConfigError(
                f"grounding_state must be distinct state dimensions 0..{self.state_dim - 1}, "
                f"got {list(state)}"
            )

    def sizes(self) -> dict[str, int]:
        """The integer sizes (for validation and reports)."""
        names = ("image_size", "state_dim", "action_dim", "chunk", "groups", "language_dim")
        return {n: getattr(self, n) for n in (*names, "film_dim", "head_dim", "head_layers")}

    def to_dict(self) -> dict[str, Any]:
        items = dataclasses.asdict(self).items()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in items}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VLAConfig:
        """The config from ``to_dict``'s output; an unknown key is an error, not ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown VLA config keys {unknown}; known: {sorted(known)}")
        return cls(**data)


class SpatialSoftmax(nn.Module):
    """Per channel, the softmax-weighted mean image position: ``[B, C, H, W] -> [B, 2C]``."""

    def __init__(self) -> None:
        super().__init__()
        self.log_temperature = nn.Parameter(torch.zeros(()))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = features.shape
        ys = torch.linspace(-1.0, 1.0, height, device=features.device, dtype=features.dtype)
        xs = torch.linspace(-1.0, 1.0, width, device=features.device, dtype=features.dtype)
        logits = features.flatten(2) / self.log_temperature.exp()
        weights = torch.softmax(logits, dim=-1).view(batch, channels, height, width)
        expected_x = (weights.sum(dim=2) * xs).sum(dim=-1)
        expected_y = (weights.sum(dim=3) * ys).sum(dim=-1)
        return torch.cat([expected_x, expected_y], dim=1)


class FiLMEncoder(nn.Module):
    """Stride-2 conv → GroupNorm → FiLM → ReLU stages, then spatial-softmax keypoints (of the
    last stage, and of the ``fine_keypoints`` stages)."""

    def __init__(self, config: VLAConfig) -> None:
        super().__init__()
        widths = itertools.pairwise((3, *config.channels))
        self.convs = nn.ModuleList(
            nn.Conv2d(c_in, c_out, 3, stride=2, padding=1) for c_in, c_out in widths
        )
        self.norms = nn.ModuleList(nn.GroupNorm(config.groups, c) for c in config.channels)
        self.films = nn.ModuleList(nn.Linear(config.film_dim, 2 * c) for c in config.channels)
        for film in self.films:  # start as the identity: γ = β = 0
            nn.init.zeros_(film.weight)
            nn.init.zeros_(film.bias)
        self.keypoints = SpatialSoftmax()
        self.fine_stages = sorted(config.fine_keypoints)
        self.fine_keypoints = nn.ModuleList(SpatialSoftmax() for _ in self.fine_stages)
        stages = [*self.fine_stages, len(config.channels) - 1]
        self.out_dim = sum(2 * config.channels[stage] for stage in stages)

    def forward(
        self, images: torch.Tensor, condition: torch.Tensor, keep: tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``images [B, 3, H, W]`` in 0..1, ``condition [B, film_dim]`` → ``[B, out_dim]``
        keypoints, and the feature maps of the ``keep`` stages (for the grounding head)."""
        h = images - 0.5
        points, maps = [], []
        layers = zip(self.convs, self.norms, self.films, strict=True)
        for stage, (conv, norm, film) in enumerate(layers):
            gamma, beta = film(condition)[:, :, None, None].chunk(2, dim=1)
            h = torch.relu((1.0 + gamma) * norm(conv(h)) + beta)
            if stage in self.fine_stages:
                points.append(self.fine_keypoints[self.fine_stages.index(stage)](h))
            if stage in keep:
                maps.append(h)
        return torch.cat([*points, self.keypoints(h)], dim=1), maps


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


class VLANet(nn.Module):
    """Images of every camera, state and instruction vector → a normalised action chunk."""

    def __init__(self, config: VLAConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or VLAConfig()
        self.language = _mlp([config.language_dim, config.film_dim, config.film_dim])
        self.perception_language = None  # the slots' own MLP (perception_words="slots")
        if config.perception_words == "slots":
            self.perception_language = _mlp([SLOT_DIM, config.film_dim, config.film_dim])
        self.camera_embedding = nn.Parameter(torch.zeros(len(config.cameras), config.film_dim))
        self.encoder = FiLMEncoder(config)
        head_in = len(config.cameras) * self.encoder.out_dim + config.state_dim + config.film_dim
        hidden = [config.head_dim] * config.head_layers
        self.grounding = None
        aux_in = head_in
        if config.grounding:
            self.grounding = GroundingHead(*(config.channels[stage] for stage in STAGES))
            self.grounding_camera = config.cameras.index(GROUNDING_CAMERA)
            aux_in = POINT_DIM + len(config.grounding_state) + config.film_dim
            if not config.aux_dim:
                raise ConfigError(
                    "grounding predicts the scene state: train on a dataset that records "
                    "observation.environment_state, with the auxiliary head on (--aux-weight > 0)"
                )
        self.aux_head = _mlp([aux_in, config.head_dim, config.aux_dim]) if config.aux_dim else None
        self.bottleneck = config.head_reads == "scene"
        if self.bottleneck and not config.aux_dim:
            raise ConfigError(
                "head_reads='scene' needs the scene state: train on a dataset that records "
                "observation.environment_state, with the auxiliary head on (--aux-weight > 0)"
            )
        if self.bottleneck:
            head_in = config.state_dim + config.film_dim
        self.head = _mlp([head_in + config.aux_dim, *hidden, config.chunk * config.action_dim])

    def forward(
        self,
        images: torch.Tensor,
        state: torch.Tensor,
        language: torch.Tensor,
        with_aux: bool = False,
        aux_input: torch.Tensor | None = None,
        aux_mask: torch.Tensor | None = None,
        motor_rows: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
        with_grounding: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """``images [B, cameras, 3, H, W]`` in 0..1, ``state [B, state_dim]`` normalised,
        ``language [B, language_dim]`` → ``[B, chunk, action_dim]`` normalised actions
        (``with_aux``: and the normalised scene-state prediction ``[B, aux_dim]``, or None).

        ``aux_input`` (training only) is what the action head reads in place of the prediction
        (in the rows where ``aux_mask [B, 1]`` is true, all rows without a mask): training feeds
        it the recorded scene state, noised, for part of each batch, so the head learns the
        mapping from scene to motion while the encoder is still learning to see.

        ``motor_rows`` (training only, ``head_reads="scene"``): (state, language, scene state)
        of more frames, whose action chunks are predicted without images and appended to the
        batch's; the motor part learns from many more frames than the encoder can afford.

        ``with_grounding``: return (actions, scene prediction, grounding logits ``[B, 2, G, G]``
        or None) (the logits are what the heatmap loss trains)."""
        batch = images.shape[0]
        words = torch.relu(self.language(language))
        seen_words = self._perception_words(language, words)
        condition = seen_words[:, None, :] + self.camera_embedding[None, :, :]
        keep = STAGES if self.grounding is not None else ()
        keypoints, maps = self.encoder(images.flatten(0, 1), condition.flatten(0, 1), keep)
        features = torch.cat([keypoints.view(batch, -1), state, words], dim=1)
        logits = self._grounding_logits(maps, batch)
        aux = None
        if self.aux_head is not None:
            scene_input = features
            if logits is not None:
                seen_state = state[:, list(self.config.grounding_state)]
                scene_input = torch.cat([soft_argmax(logits), seen_state, seen_words], dim=1)
            aux = self.aux_head(scene_input)
            read = aux
            if aux_input is not None:
                read = aux_input if aux_mask is None else torch.where(aux_mask, aux_input, aux)
            head_input = [state, words, read] if self.bottleneck else [features, read]
            features = torch.cat(head_input, dim=1)
        if motor_rows is not None:
            features = torch.cat([features, self.motor_features(*motor_rows)], dim=0)
        actions = self.head(features).view(-1, self.config.chunk, self.config.action_dim)
        if with_grounding:
            return actions, aux, logits
        return (actions, aux) if with_aux else actions

    def _perception_words(self, language: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """What the perception part reads of the instruction: the sentence's features, or the
        features of its slots alone (the last ``SLOT_DIM`` values of the MiniLM+slots vector)."""
        if self.perception_language is None:
            return words
        return torch.relu(self.perception_language(language[:, -SLOT_DIM:]))

    def _grounding_logits(self, maps: list[torch.Tensor], batch: int) -> torch.Tensor | None:
        """The grounding head's logits on the front camera's kept maps (None without one)."""
        if self.grounding is None:
            return None
        cameras, front = len(self.config.cameras), self.grounding_camera
        fine, coarse = (m.view(batch, cameras, *m.shape[1:])[:, front] for m in maps)
        return self.grounding(fine, coarse)

    def grounded_points(
        self, images: torch.Tensor, state: torch.Tensor, language: torch.Tensor
    ) -> torch.Tensor | None:
        """Where the network sees the named block and the goal in the front camera: ``[B, 4]``
        normalised (u, v) of each (None without a grounding head); for videos and checks."""
        if self.grounding is None:
            return None
        _, _, logits = self.forward(images, state, language, with_grounding=True)
        return soft_argmax(logits)

    def actions_from_scene(
        self, state: torch.Tensor, language: torch.Tensor, scene: torch.Tensor
    ) -> torch.Tensor:
        """The action chunks ``[B, chunk, action_dim]`` of a bottleneck's head for a known
        (normalised) scene state, without images: a latched network's steps after its first."""
        features = self.motor_features(state, language, scene)
        return self.head(features).view(-1, self.config.chunk, self.config.action_dim)

    def motor_features(
        self, state: torch.Tensor, language: torch.Tensor, scene: torch.Tensor
    ) -> torch.Tensor:
        """The action head's input for frames known by their scene state alone (bottleneck)."""
        if not self.bottleneck:
            raise ConfigError("motor rows need head_reads='scene'")
        return torch.cat([state, torch.relu(self.language(language)), scene], dim=1)


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def example_inputs(config: VLAConfig, batch: int = 1) -> tuple[torch.Tensor, ...]:
    """Random inputs of the right shapes (for measurements and tests)."""
    size = config.image_size
    return (
        torch.rand(batch, len(config.cameras), 3, size, size),
        torch.randn(batch, config.state_dim),
        torch.randn(batch, config.language_dim),
    )
