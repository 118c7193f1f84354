"""The VLA network's configuration (``VLAConfig``): every size and choice of the network, saved
next to its weights as ``config.json`` and checked when a model directory is read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lang2policy.errors import ConfigError
from lang2policy.vla.model.grounding import GROUNDING_CAMERA, STAGES
from lang2policy.vla.model.keyframes import NAMES as KEYFRAME_NAMES
from lang2policy.vla.model.language import MINILM, MINILM_DIM, MINILM_SLOTS, language_dim
from lang2policy.vla.spec import schema
from lang2policy.vla.spec.loader_limits import (
    VLA_MAX_CAMERAS,
    VLA_MAX_CHANNEL,
    VLA_MAX_NAME_CHARS,
    VLA_MAX_STAGES,
    VLA_SIZE_LIMITS,
)

HEAD_READS = ("features", "scene")
MAX_NOTE_CHARS = 2000  # image_fit, units: what training did, in words
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
    # Heatmaps of the named block and the goal in the front camera (``vla/model/grounding.py``): the
    # scene-state head then reads their image positions, the state and the words
    grounding: bool = False
    # With grounding: the state dimensions the scene head reads beside the grounded points and
    # the words (e.g. (5,): the gripper opening). Not the arm's joints by default: with them it
    # learns "the block is where the gripper is" from the demonstrations' grasps, and follows
    # the arm when the arm heads elsewhere (measured in closed loop)
    grounding_state: tuple[int, ...] = ()
    # Look once, then act (``vla/train/scene_latch.py``; needs head_reads="scene"): the action head
    # reads the scene state estimated on an episode's first frame, held until the episode or
    # the instruction changes, and the scene head learns from frames whose block has not moved
    scene_latch: bool = False
    # What the perception part (the encoder's FiLM, the grounding and scene heads) reads of the
    # instruction: the whole "sentence" vector, or only its "slots" (the named colours and
    # side, ``vla/model/slots.py``; needs the MiniLM+slots encoder). With slots, where the named
    # block is does not depend on the task family, so a held-out family x colour combination
    # is seen as its colour was seen in the other families; the action head reads the sentence
    perception_words: str = "sentence"
    # The action head also reads the latched scene lifted into joint space by the arm's IK
    # (``vla/model/keyframes.py``: above the block, its grasp, the drop, the push's start and end);
    # needs scene_latch (solved once per episode, about 0.1-0.3 s)
    keyframes: bool = False
    # The action head picks among the keyframes (softmax weights) and adds a residual, so it
    # can reach a keyframe's joints exactly (``vla/model/anchored_head.py``); needs keyframes
    keyframe_anchors: bool = False
    fps: int = schema.FPS  # the dataset's: one action per ``1 / fps`` s
    # What was done to the dataset's frames to train on them (``DemoDataset.adaptation``): how
    # its camera frames were fitted to ``image_size`` (the VLA node fits camera images the same
    # way) and how its state and action were converted to our units; "" for neither
    image_fit: str = ""
    units: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "channels", tuple(self.channels))
        object.__setattr__(self, "fine_keypoints", tuple(self.fine_keypoints))
        object.__setattr__(self, "grounding_state", tuple(self.grounding_state))
        self._check_limits()
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
        if self.grounding:
            self._check_grounding()
        if self.head_reads not in HEAD_READS:
            raise ConfigError(f"head_reads must be one of {HEAD_READS}, got {self.head_reads!r}")
        if self.perception_words not in PERCEPTION_WORDS:
            raise ConfigError(
                f"perception_words must be one of {PERCEPTION_WORDS}, got {self.perception_words!r}"
            )
        if self.perception_words == "slots" and not self.grounding:
            raise ConfigError(
                "perception_words='slots' conditions the grounding heatmaps and the scene head "
                "that reads them: it needs grounding"
            )
        if self.perception_words == "slots" and self.language_model != MINILM_SLOTS:
            raise ConfigError(
                f"perception_words='slots' reads the slots the {MINILM_SLOTS} encoder appends; "
                f"this model's encoder is {self.language_model}"
            )
        if self.keyframes and not self.scene_latch:
            raise ConfigError(
                "keyframes are solved once per episode from the latched scene: they need "
                "scene_latch"
            )
        if self.keyframe_anchors and not self.keyframes:
            raise ConfigError(
                "keyframe_anchors anchors the action head on the keyframes: it needs keyframes"
            )
        if self.scene_latch and self.head_reads != "scene":
            raise ConfigError(
                "scene_latch holds the scene state the action head reads: it needs "
                "head_reads='scene'"
            )

    def _check_limits(self) -> None:
        """Every field has its type and every size is within ``VLA_SIZE_LIMITS`` (and the
        other ``VLA_*`` limits), before anything is built from them: a config.json that says
        ``head_dim: 10**9`` is refused here, not when torch tries to allocate it."""
        for name, (least, most) in VLA_SIZE_LIMITS.items():
            _whole(getattr(self, name), name, least, most)
        _names(self.cameras, "cameras", VLA_MAX_CAMERAS)
        _names((self.language_model,), "language_model", 1)
        if not 1 <= len(self.channels) <= VLA_MAX_STAGES:
            raise ConfigError(
                f"channels: {len(self.channels)} conv stages; 1..{VLA_MAX_STAGES} are allowed"
            )
        for index, count in enumerate(self.channels):
            _whole(count, f"channels[{index}]", 1, VLA_MAX_CHANNEL)
        for name in ("fine_keypoints", "grounding_state"):  # their ranges: checked below
            for index, value in enumerate(getattr(self, name)):
                _integer(value, f"{name}[{index}]")
        for name in ("grounding", "scene_latch", "keyframes", "keyframe_anchors"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r:.40}")
        for name in ("head_reads", "perception_words", "image_fit", "units"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{name} must be text, got {getattr(self, name)!r:.40}")
        for name in ("image_fit", "units"):
            if len(getattr(self, name)) > MAX_NOTE_CHARS:
                raise ConfigError(f"{name}: at most {MAX_NOTE_CHARS} characters are allowed")

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

    @property
    def keyframe_dim(self) -> int:
        """Keyframe values the action head reads: the arm's joints (the state without the
        gripper) per keyframe; 0 without keyframes."""
        return len(KEYFRAME_NAMES) * (self.state_dim - 1) if self.keyframes else 0

    def to_dict(self) -> dict[str, Any]:
        items = dataclasses.asdict(self).items()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in items}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VLAConfig:
        """The config from ``to_dict``'s output; an unknown key is an error, not ignored."""
        if not isinstance(data, dict):
            raise ConfigError(f"a VLA config is a JSON object, got {type(data).__name__}")
        for name in ("cameras", "channels", "fine_keypoints", "grounding_state"):
            if not isinstance(data.get(name, ()), list | tuple):
                raise ConfigError(f"{name} must be a list, got {data[name]!r:.40}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown VLA config keys {unknown}; known: {sorted(known)}")
        return cls(**data)


def _integer(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r:.40}")


def _whole(value: Any, name: str, least: int, most: int) -> None:
    _integer(value, name)
    if not least <= value <= most:
        raise ConfigError(f"{name} is {value}; {least}..{most} is allowed")


def _names(values: tuple[Any, ...], name: str, most: int) -> None:
    if not values or len(values) > most:
        raise ConfigError(f"{name}: {len(values)} given; 1..{most} are allowed")
    for value in values:
        if not isinstance(value, str) or not 0 < len(value) <= VLA_MAX_NAME_CHARS:
            raise ConfigError(
                f"{name} must be text of 1..{VLA_MAX_NAME_CHARS} characters, got {value!r:.40}"
            )
