"""Everything a training run decides before its first step: the episodes, the normaliser, the
instruction vectors and the network's config, checked against the dataset."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.vla.model.checkpoint import load_model_dir
from lang2policy.vla.model.grounding import GROUNDING_CAMERA, CameraProjection, grounding_targets
from lang2policy.vla.model.keyframes import (
    episode_keyframes,
    normalize_keyframes,
    planner_for_robot,
)
from lang2policy.vla.model.language import Encoder, InstructionEmbeddings, encoder_for
from lang2policy.vla.model.network import VLAConfig, VLANet
from lang2policy.vla.model.normalize import MIN_STD, Normalizer
from lang2policy.vla.spec.schema import ACTION_KEY, STATE_KEY
from lang2policy.vla.train.batches import (
    EpisodeSplit,
    Frames,
    episode_ends,
    episode_frames,
    episode_span,
    split_episodes,
    view_frames,
)
from lang2policy.vla.train.scene_latch import (
    anchor_environment,
    episode_starts,
    start_environment,
    unmoved_frames,
)

MAX_VAL_FRAMES = 2048  # frames the validation loss is computed on (a fixed random subset)


@dataclass
class TrainData:
    """A dataset made ready for training."""

    split: EpisodeSplit
    train_frames: np.ndarray
    val_frames: np.ndarray
    frame_end: np.ndarray
    normalizer: Normalizer
    language: InstructionEmbeddings
    task_vectors: np.ndarray  # [tasks, language_dim]
    # the frames image batches are drawn from (``train_frames`` unless the scene is latched:
    # then only those whose named block has not moved yet)
    image_frames: np.ndarray | None = None
    # what the scene head learns and the action head reads per frame, when not the dataset's
    # own ``environment`` (a latched scene: the episode's first frame's)
    environment: np.ndarray | None = None
    # per frame, the normalised keyframes of its episode's first scene (``config.keyframes``)
    keyframes: np.ndarray | None = None
    # the validation frames the scene and grounding errors are measured on (``val_frames``
    # unless the scene is latched: then those whose block has not moved)
    val_scene_frames: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.image_frames is None:
            self.image_frames = self.train_frames
        if self.val_scene_frames is None:
            self.val_scene_frames = self.val_frames


def model_config(data: Frames, base: VLAConfig, auxiliary: bool = True) -> VLAConfig:
    """``base`` with the dataset's fps, image size, state and action sizes, what was done to
    its frames (``adaptation``), and an auxiliary scene-state head when ``auxiliary`` and the
    dataset records scene state; its cameras must exist."""
    missing = [camera for camera in base.cameras if camera not in data.images]
    if missing:
        raise ConfigError(
            f"the model wants cameras {list(base.cameras)} but the dataset has only "
            f"{sorted(data.images)}"
        )
    shape = data.images[base.cameras[0]].shape
    if len(shape) != 4 or shape[1] != shape[2] or shape[3] != 3:
        raise ConfigError(f"dataset images must be uint8 [N, S, S, 3], got shape {shape}")
    environment = getattr(data, "environment", None)
    adaptation = getattr(data, "adaptation", None) or {}
    return replace(
        base,
        fps=int(getattr(data, "fps", base.fps)),
        image_fit=adaptation.get("image_fit", ""),
        units=adaptation.get("units", ""),
        image_size=int(shape[1]),
        state_dim=int(np.shape(data.state)[1]),
        action_dim=int(np.shape(data.action)[1]),
        aux_dim=int(np.shape(environment)[1]) if auxiliary and environment is not None else 0,
    )


def normalizer_for(
    data: Frames,
    frames: np.ndarray,
    frame_end: np.ndarray,
    chunk: int,
    action_mode: str,
    environment: np.ndarray | None = None,
) -> Normalizer:
    """From the dataset's stats when it has them, else from the training frames; in ``delta``
    mode the action statistics are those of the training frames' chunks. The scene state's
    statistics are those of ``environment`` when given (a latched scene), else of the
    dataset's own."""
    stats = getattr(data, "stats", None) or {}
    state, action = np.asarray(data.state), np.asarray(data.action)
    if STATE_KEY in stats and ACTION_KEY in stats:
        normalizer = Normalizer.from_stats(stats)
    else:
        normalizer = Normalizer.from_arrays(state[frames], action[frames])
    if environment is not None:
        normalizer = replace(normalizer, env_mean=None, env_std=None)
    else:
        environment = getattr(data, "environment", None)
    if environment is not None and not normalizer.has_environment:
        scene = np.asarray(environment)[frames]
        normalizer = replace(
            normalizer,
            env_mean=scene.mean(0).astype(np.float32),
            env_std=np.maximum(scene.std(0), MIN_STD).astype(np.float32),
        )
    if action_mode == "absolute":
        return normalizer
    if action_mode != "delta":
        raise ConfigError(f"action_mode must be 'absolute' or 'delta', got {action_mode!r}")
    return normalizer.with_delta_actions(data.state, data.action, frames, frame_end, chunk)


def prepare(
    data: Frames,
    config: VLAConfig,
    *,
    val_episodes: int,
    seed: int,
    encoder: Encoder | None = None,
    normalizer: Normalizer | None = None,
    action_mode: str = "delta",
    mix: float = 0.0,
    progress: bool = False,
) -> TrainData:
    """Split the episodes, embed every instruction once, and fix the normaliser (``normalizer``
    given: a resumed or fine-tuned run keeps its own). ``mix`` > 0: that fraction of the
    training frames drawn from the first dataset (episodes with ``source`` 0), the rest from
    the others (``mixed_frames``)."""
    split = split_episodes(data.episodes, val_episodes, seed)
    train_frames = episode_frames(data, split.train)
    if mix > 0:
        train_frames = mixed_frames(data, split.train, mix, seed)
    is_view = view_frames(data)
    val_frames = episode_frames(data, split.val)
    if len(val_frames) > MAX_VAL_FRAMES:
        rng = np.random.default_rng(seed)
        val_frames = np.sort(rng.choice(val_frames, MAX_VAL_FRAMES, replace=False))
    frame_end = episode_ends(data)
    motion_frames = np.unique(train_frames[~is_view[train_frames]])  # scene views do not move
    latched = latched_scene(data) if config.scene_latch else None
    normalizer = normalizer or normalizer_for(
        data, motion_frames, frame_end, config.chunk, action_mode, latched
    )
    normalizer.check_dims(config.state_dim, config.action_dim, config.chunk)
    if config.aux_dim and (
        not normalizer.has_environment or normalizer.env_mean.shape != (config.aux_dim,)
    ):
        have = normalizer.env_mean.shape if normalizer.has_environment else None
        raise ConfigError(
            f"the model predicts {config.aux_dim} scene-state values; the statistics have {have}"
        )
    encode = encoder or encoder_for(config.language_model)
    language = InstructionEmbeddings(encode, config.language_dim)
    task_vectors = language.embed_many(list(data.tasks))
    image_frames = val_scene_frames = None
    if latched is not None:  # the scene head learns only where the block has not moved yet
        recorded = np.asarray(data.environment)
        starts = _episode_starts(data)
        image_frames = unmoved_frames(recorded, starts, train_frames)
        val_scene_frames = unmoved_frames(recorded, starts, val_frames)
    keyframes = None
    if config.keyframes:
        moving = [p for p in (*split.train, *split.val) if not data.episodes[p].get("view")]
        keyframes = _keyframes(data, latched, moving, normalizer, progress)
    return TrainData(
        split, train_frames, val_frames, frame_end, normalizer, language, task_vectors,
        image_frames, latched, keyframes, val_scene_frames,
    )  # fmt: skip


def _keyframes(
    data: Frames, latched: np.ndarray, positions: list[int], normalizer: Normalizer,
    progress: bool,
) -> np.ndarray:
    """Per frame, the normalised keyframes of its episode's first scene (the episodes at
    ``positions``; zeros elsewhere), solved by the simulated SO-101's IK."""
    planner = planner_for_robot("so101")
    spans = [episode_span(data, position) for position in positions]
    frames = episode_keyframes(planner, latched, spans, progress=progress)
    return normalize_keyframes(frames, normalizer.state_mean, normalizer.state_std)


def _episode_starts(data: Frames) -> np.ndarray:
    spans = [episode_span(data, position) for position in range(len(data.episodes))]
    return episode_starts(spans, len(data.state))


def latched_scene(data: Frames) -> np.ndarray:
    """Per frame, the scene state of its episode's first frame: what a latched network's
    action head reads (``scene_latch``)."""
    environment = getattr(data, "environment", None)
    if environment is None:
        raise ConfigError("a latched scene needs a dataset that records the scene state")
    return start_environment(environment, _episode_starts(data))


def frame_families(data: Frames) -> np.ndarray:
    """Per frame, its episode's task family (``object [N]``; None where not recorded)."""
    families = np.full(len(data.state), None, dtype=object)
    for position, episode in enumerate(data.episodes):
        start, end = episode_span(data, position)
        families[start:end] = episode.get("family")
    return families


def grounding_targets_for(frames: Frames, config: VLAConfig) -> np.ndarray | None:
    """Per frame, the grounding heatmaps' targets (networks with a grounding head only): the
    recorded block and goal projected into the simulated SO-101's front camera."""
    if not config.grounding:
        return None
    environment = getattr(frames, "environment", None)
    if environment is None:
        raise ConfigError("grounding needs a dataset that records the scene state")
    camera = CameraProjection.of_robot("so101", GROUNDING_CAMERA)
    if config.scene_latch:  # the goal heatmap on the object the goal is defined by
        families = frame_families(frames)
        if any(family is None for family in families):
            raise ConfigError(
                "a latched grounding network anchors its goal heatmap by the task family: "
                "every episode needs a 'family' column (recorded demonstrations and views "
                "have one; converted recordings do not)"
            )
        environment = anchor_environment(environment, families)
    return grounding_targets(environment, config.image_size, camera)


def finetune_start(model_dir: Path, frames: Frames) -> tuple[VLANet, VLAConfig, Normalizer]:
    """The network, config and normaliser of ``model_dir``, checked against the dataset: the
    normaliser is kept, so the policy's input and output scales do not change."""
    loaded = load_model_dir(model_dir)
    config = loaded.config
    seen = model_config(frames, config, auxiliary=bool(config.aux_dim))
    if (seen.image_size, seen.state_dim, seen.action_dim) != (
        config.image_size, config.state_dim, config.action_dim
    ):
        raise ConfigError(
            f"{model_dir} takes {config.image_size} px images, state {config.state_dim}, action "
            f"{config.action_dim}; the dataset has {seen.image_size} px, {seen.state_dim}, "
            f"{seen.action_dim}"
        )
    return loaded.model.train(), config, loaded.normalizer


def mixed_frames(data: Frames, positions: list[int], mix: float, seed: int) -> np.ndarray:
    """The training frames of the episodes at ``positions``, drawn (with replacement, as many
    as there are) so that a ``mix`` fraction comes from the first dataset (``source`` 0, as
    ``lang2policy train vla`` marks several datasets) and the rest from the others."""
    first = [p for p in positions if data.episodes[p].get("source", 0) == 0]
    others = [p for p in positions if p not in set(first)]
    if not 0 < mix <= 1 or not first or (mix < 1 and not others):
        raise ConfigError(
            f"mix must be in (0, 1] with training episodes in the first dataset and (below 1) "
            f"in the others; got {mix} with {len(first)} and {len(others)} episodes"
        )
    frames = [episode_frames(data, first), episode_frames(data, others)]
    total = sum(len(f) for f in frames)
    rng = np.random.default_rng(seed)
    wanted = (round(mix * total), total - round(mix * total))
    drawn = [rng.choice(f, n, replace=True) for f, n in zip(frames, wanted, strict=True) if n]
    return np.sort(np.concatenate(drawn))


def describe(data: TrainData) -> dict[str, Any]:
    """Episode and frame counts, for the summary and the first status line."""
    split = data.split
    return {
        "episodes": {
            "train": len(split.train),
            "val": len(split.val),
            "failed_excluded": split.failed,
            "other_split_excluded": split.other_split,
        },
        "frames": {
            "train": len(data.train_frames),
            "val": len(data.val_frames),
            "images": len(data.image_frames),  # fewer with a latched scene (block not moved)
        },
        "instructions": len(data.task_vectors),
    }


def check_choices(net: VLANet, optim: Any, shift: int) -> None:
    """Refuse training choices (``OptimConfig`` ``optim``, the random ``shift``) the network,
    fresh, resumed or fine-tuned, cannot take."""
    if net.config.grounding and shift:  # also a resumed or fine-tuned one
        raise ConfigError("this model grounds image positions: train it with no random shift")
    if (optim.motor_batch or optim.motor_steps) and not net.bottleneck:
        raise ConfigError(
            "a motor batch needs a bottleneck network (head_reads='scene'): only its action "
            "head can learn from frames without images (resuming a plain run: --design plain)"
        )
    if optim.motor_steps and not optim.motor_batch:
        raise ConfigError("motor steps need a motor batch size (optim.motor_batch)")
