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

``python -m lang2policy.vla.train.measure`` prints the parameter count, the safetensors size,
the CPU latency of one forward pass and the training throughput.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from lang2policy.errors import ConfigError
from lang2policy.vla.model.anchored_head import KeyframeAnchoredHead
from lang2policy.vla.model.anchored_head import mlp as _mlp
from lang2policy.vla.model.config import HEAD_READS, PERCEPTION_WORDS, VLAConfig
from lang2policy.vla.model.grounding import (
    GROUNDING_CAMERA,
    POINT_DIM,
    STAGES,
    GroundingHead,
    soft_argmax,
)
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.model.slots import SLOT_DIM

__all__ = ["HEAD_READS", "PERCEPTION_WORDS", "VLAConfig", "VLANet"]  # the config: re-exported


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
        self, images: torch.Tensor, condition: torch.Tensor, keep: tuple[int, ...] = (),
        maps_only: bool = False,
    ) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
        """``images [B, 3, H, W]`` in 0..1, ``condition [B, film_dim]`` → ``[B, out_dim]``
        keypoints, and the feature maps of the ``keep`` stages (for the grounding head).
        ``maps_only``: stop after the last kept stage and give no keypoints (a network that
        reads only its grounded points: the later stages would run for nothing)."""
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
            if maps_only and keep and stage == max(keep):
                return None, maps
        return torch.cat([*points, self.keypoints(h)], dim=1), maps


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
                    "observation.environment_state, with the auxiliary head on (auxiliary=True)"
                )
        self.aux_head = _mlp([aux_in, config.head_dim, config.aux_dim]) if config.aux_dim else None
        self.bottleneck = config.head_reads == "scene"
        if self.bottleneck and not config.aux_dim:
            raise ConfigError(
                "head_reads='scene' needs the scene state: train on a dataset that records "
                "observation.environment_state, with the auxiliary head on (auxiliary=True)"
            )
        if self.bottleneck:
            head_in = config.state_dim + config.film_dim + config.keyframe_dim
        # the scene head reads the grounded points and the action head the scene: the
        # encoder's last stages and keypoints are not read (nor trained)
        self.points_only = self.bottleneck and self.grounding is not None
        self.head = self._action_head(head_in + config.aux_dim, hidden)

    def _action_head(self, head_in: int, hidden: list[int]) -> nn.Module:
        """The MLP from the head's input to the chunk, anchored on the keyframes when the
        config asks (``vla/model/anchored_head.py``)."""
        config = self.config
        if config.keyframe_anchors:
            dof = config.state_dim - 1
            return KeyframeAnchoredHead(
                head_in, hidden, config.chunk, config.action_dim, config.keyframe_dim // dof, dof
            )
        return _mlp([head_in, *hidden, config.chunk * config.action_dim])

    def use_statistics(self, normalizer: Normalizer) -> None:
        """Give an anchored head the normaliser's units (nothing to do for a plain head)."""
        if isinstance(self.head, KeyframeAnchoredHead):
            self.head.use_statistics(normalizer)

    def forward(
        self,
        images: torch.Tensor,
        state: torch.Tensor,
        language: torch.Tensor,
        with_aux: bool = False,
        aux_input: torch.Tensor | None = None,
        aux_mask: torch.Tensor | None = None,
        motor_rows: tuple[torch.Tensor, ...] | None = None,
        with_grounding: bool = False,
        keyframes: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """``images [B, cameras, 3, H, W]`` in 0..1, ``state [B, state_dim]`` normalised,
        ``language [B, language_dim]`` → ``[B, chunk, action_dim]`` normalised actions
        (``with_aux``: and the normalised scene-state prediction ``[B, aux_dim]``, or None).

        ``aux_input`` (training only) is what the action head reads in place of the prediction
        (in the rows where ``aux_mask [B, 1]`` is true, all rows without a mask): training feeds
        it the recorded scene state, noised, for part of each batch, so the head learns the
        mapping from scene to motion while the encoder is still learning to see.

        ``motor_rows`` (training only, ``head_reads="scene"``): (state, language, scene state
        [, keyframes]) of more frames, whose action chunks are predicted without images and
        appended to the batch's; the motor part learns from many more frames than the encoder
        can afford.

        ``keyframes [B, keyframe_dim]`` (normalised): what a keyframes network's action head
        reads beside the scene state (``vla/model/keyframes.py``).

        ``with_grounding``: return (actions, scene prediction, grounding logits ``[B, 2, G, G]``
        or None) (the logits are what the heatmap loss trains)."""
        words = torch.relu(self.language(language))
        features, aux, logits = self._perceive(images, state, language, words)
        if aux is not None:
            read = aux
            if aux_input is not None:
                read = aux_input if aux_mask is None else torch.where(aux_mask, aux_input, aux)
            if self.bottleneck:
                features = self._head_input(state, words, read, keyframes)
            else:
                features = torch.cat([features, read], dim=1)
        if motor_rows is not None:
            features = torch.cat([features, self.motor_features(*motor_rows)], dim=0)
        actions = self.head(features).view(-1, self.config.chunk, self.config.action_dim)
        if with_grounding:
            return actions, aux, logits
        return (actions, aux) if with_aux else actions

    def _perceive(
        self, images: torch.Tensor, state: torch.Tensor, language: torch.Tensor,
        words: torch.Tensor,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """(the encoder's features with the state and words, or None where nothing reads
        them; the scene-state prediction or None; the grounding logits or None)."""
        batch = images.shape[0]
        seen_words = self._perception_words(language, words)
        condition = seen_words[:, None, :] + self.camera_embedding[None, :, :]
        keep = STAGES if self.grounding is not None else ()
        keypoints, maps = self.encoder(
            images.flatten(0, 1), condition.flatten(0, 1), keep, maps_only=self.points_only
        )
        features = None
        if keypoints is not None:
            features = torch.cat([keypoints.view(batch, -1), state, words], dim=1)
        logits = self._grounding_logits(maps, batch)
        if self.aux_head is None:
            return features, None, logits
        scene_input = features
        if logits is not None:
            seen_state = state[:, list(self.config.grounding_state)]
            scene_input = torch.cat([soft_argmax(logits), seen_state, seen_words], dim=1)
        return features, self.aux_head(scene_input), logits

    def perceive(
        self, images: torch.Tensor, state: torch.Tensor, language: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(the normalised scene-state prediction, the grounding logits), each None where the
        network has no such head; the action head does not run (a latched network's look)."""
        words = torch.relu(self.language(language))
        _, aux, logits = self._perceive(images, state, language, words)
        return aux, logits

    def _head_input(
        self, state: torch.Tensor, words: torch.Tensor, scene: torch.Tensor,
        keyframes: torch.Tensor | None,
    ) -> torch.Tensor:
        """A bottleneck's action-head input: the state, the words, the scene (and keyframes)."""
        parts = [state, words, scene]
        if self.config.keyframes:
            if keyframes is None:
                raise ConfigError("this network's action head reads keyframes: pass them")
            parts.append(keyframes)
        return torch.cat(parts, dim=1)

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
        _, logits = self.perceive(images, state, language)
        return soft_argmax(logits)

    def actions_from_scene(
        self, state: torch.Tensor, language: torch.Tensor, scene: torch.Tensor,
        keyframes: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The action chunks ``[B, chunk, action_dim]`` of a bottleneck's head for a known
        (normalised) scene state, without images: a latched network's steps."""
        features = self.motor_features(state, language, scene, keyframes)
        return self.head(features).view(-1, self.config.chunk, self.config.action_dim)

    def motor_features(
        self, state: torch.Tensor, language: torch.Tensor, scene: torch.Tensor,
        keyframes: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The action head's input for frames known by their scene state alone (bottleneck)."""
        if not self.bottleneck:
            raise ConfigError("motor rows need head_reads='scene'")
        return self._head_input(state, torch.relu(self.language(language)), scene, keyframes)


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
