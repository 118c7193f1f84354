"""What training reads from a demonstration dataset: which episodes, which frames, and batches of
(frame t, the actions t .. t+k-1) ready for the network.

Only successful episodes are trained on (failed ones stay in the dataset, marked). A few of
them are held out for a validation loss. An action chunk that runs past the end of its episode
is padded with the episode's last action and masked out of the loss, so the model is never
taught to predict what follows an episode's end.

The dataset is duck-typed: anything with the attributes of ``FrameArrays`` will do, as the
recorded ``DemoDataset`` (``lang2policy.vla.dataset``) does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from lang2policy.errors import ConfigError
from lang2policy.vla.model.normalize import Normalizer, images_to_float


class Frames(Protocol):
    """The attributes of a dataset that training reads."""

    images: dict[str, np.ndarray]  # camera -> uint8 [N, H, W, 3]
    state: np.ndarray  # float32 [N, state_dim]
    action: np.ndarray  # float32 [N, action_dim]
    # optional attribute ``environment``: float32 [N, env_dim] scene state (auxiliary target)
    episode_index: np.ndarray  # int [N]
    task_index: np.ndarray  # int [N]
    tasks: list[str]  # instruction by task index
    # per episode: its rows "from"/"to" (or LeRobot's "dataset_from_index"/"dataset_to_index"),
    # "success", "split", "family" ...
    episodes: list[dict[str, Any]]
    stats: dict[str, dict[str, Any]]


@dataclass
class FrameArrays:
    """An in-memory dataset with the attributes training reads (tests, tools)."""

    images: dict[str, np.ndarray]
    state: np.ndarray
    action: np.ndarray
    episode_index: np.ndarray
    frame_index: np.ndarray
    task_index: np.ndarray
    tasks: list[str]
    episodes: list[dict[str, Any]]
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    environment: np.ndarray | None = None


@dataclass(frozen=True)
class EpisodeSplit:
    """Episode indices (positions in ``dataset.episodes``) to train and validate on."""

    train: list[int]
    val: list[int]
    failed: int  # successful == False: kept in the data, never trained on
    other_split: int  # marked for a split other than "train" (held-out evaluation)


VAL_SPLITS = ("val", "validation")  # episodes recorded for the validation loss


def split_episodes(
    episodes: Sequence[dict[str, Any]], val_episodes: int, seed: int
) -> EpisodeSplit:
    """The successful episodes to train on and to validate on.

    Episodes marked for a validation split validate; otherwise ``val_episodes`` training
    episodes are drawn (by ``seed``) for it. An episode with no ``success`` (or None) counts as
    successful (teleoperated data), one with no ``split`` as a training episode; other splits
    (held-out evaluation) are left out. Scene views (``view``: one frame, no motion;
    ``scene_views``) always train, never validate."""
    usable, marked_val, views, failed, other = [], [], [], 0, 0
    for position, episode in enumerate(episodes):
        split = episode.get("split") or "train"
        if split not in ("train", *VAL_SPLITS):
            other += 1
        elif episode.get("success") is not None and not bool(episode["success"]):
            failed += 1
        elif episode.get("view"):
            views.append(position)
        else:
            (marked_val if split in VAL_SPLITS else usable).append(position)
    if not usable:
        raise ConfigError(
            f"no successful training episodes among {len(episodes)} ({failed} failed, "
            f"{other} in other splits)"
        )
    if marked_val:
        return EpisodeSplit(usable + views, marked_val, failed, other)
    count = min(max(0, val_episodes), len(usable) - 1)
    held = set(np.random.default_rng(seed).choice(usable, size=count, replace=False).tolist())
    train = [p for p in usable if p not in held]
    return EpisodeSplit(train + views, sorted(held), failed, other)


def episode_span(data: Frames, position: int) -> tuple[int, int]:
    """The frames ``start .. end - 1`` of the episode at ``position``, checked."""
    episode = data.episodes[position]
    if "from" in episode:  # DemoDataset: rows in the arrays held (also after select)
        start, end = int(episode["from"]), int(episode["to"])
    else:  # LeRobot's episode columns
        start, end = int(episode["dataset_from_index"]), int(episode["dataset_to_index"])
    if not 0 <= start < end <= len(data.state):
        name = episode.get("index", episode.get("episode_index", position))
        raise ConfigError(
            f"episode {name} spans frames {start}..{end}, "
            f"outside the dataset's {len(data.state)} frames"
        )
    return start, end


def episode_frames(data: Frames, positions: Sequence[int]) -> np.ndarray:
    """The frame indices of the episodes at ``positions`` (positions in ``data.episodes``)."""
    spans = [episode_span(data, position) for position in positions]
    return np.concatenate([np.arange(start, end) for start, end in spans] or [np.zeros(0, int)])


def episode_ends(data: Frames) -> np.ndarray:
    """Per frame, the index one past the last frame of its episode (``int64 [N]``)."""
    ends = np.zeros(len(data.state), np.int64)
    for position in range(len(data.episodes)):
        start, end = episode_span(data, position)
        ends[start:end] = end
    return ends


def view_frames(data: Frames) -> np.ndarray:
    """Per frame, whether it belongs to a scene view (``bool [N]``): no action to learn."""
    marked = np.zeros(len(data.state), bool)
    for position, episode in enumerate(data.episodes):
        if episode.get("view"):
            start, end = episode_span(data, position)
            marked[start:end] = True
    return marked


@dataclass
class MotorBatch:
    """Frames without images, for the action head of a bottleneck network; normalised."""

    state: torch.Tensor  # [B, state_dim]
    language: torch.Tensor  # [B, language_dim]
    actions: torch.Tensor  # [B, chunk, action_dim]
    mask: torch.Tensor  # [B, chunk]
    environment: torch.Tensor | None  # [B, env_dim], the recorded scene state
    keyframes: torch.Tensor | None  # [B, keyframe_dim] (``vla/model/keyframes.py``), or None

    def __len__(self) -> int:
        return len(self.state)


@dataclass
class Batch(MotorBatch):
    """One training batch on the training device: ``MotorBatch``'s fields and the images."""

    images: torch.Tensor  # [B, cameras, 3, H, W] in 0..1
    grounding: torch.Tensor | None = None  # [B, 4] heatmap targets (``vla/model/grounding.py``)


class BatchMaker:
    """Gathers batches by frame index from a dataset held in memory."""

    def __init__(
        self,
        data: Frames,
        cameras: Sequence[str],
        chunk: int,
        frame_end: np.ndarray,
        task_vectors: np.ndarray,
        normalizer: Normalizer,
        device: torch.device,
        grounding: np.ndarray | None = None,
        environment: np.ndarray | None = None,
        keyframes: np.ndarray | None = None,
    ) -> None:
        """``grounding``: per frame, the heatmap targets (``grounding.grounding_targets``);
        ``environment``: per frame, the scene state to learn and read in place of the
        dataset's own (a latched scene: its episode's first frame's); ``keyframes``: per
        frame, the normalised keyframes its action head reads."""
        missing = [c for c in cameras if c not in data.images]
        if missing:
            raise ConfigError(f"the dataset has no images of cameras {missing}")
        self.images = [data.images[c] for c in cameras]
        self.normalizer = normalizer
        self.raw_state = np.asarray(data.state, np.float32)
        self.state = normalizer.normalize_state(self.raw_state)
        self.action = np.asarray(data.action, np.float32)
        if environment is None:
            environment = getattr(data, "environment", None)
        self.environment = None
        if environment is not None and normalizer.has_environment:
            self.environment = normalizer.normalize_environment(
                np.asarray(environment, np.float32)
            ).astype(np.float32)
        self.task_index = np.asarray(data.task_index)
        self.task_vectors = torch.as_tensor(task_vectors, dtype=torch.float32, device=device)
        self.frame_end = frame_end
        self.view = view_frames(data)  # their actions are masked out: only the scene is taught
        self.offsets = np.arange(chunk)
        self.device = device
        self.grounding = grounding
        self.keyframes = keyframes

    def __call__(self, frames: np.ndarray) -> Batch:
        motor = self.motor(frames, need_environment=False)
        images = np.stack([camera[frames] for camera in self.images], axis=1)
        grounding = None if self.grounding is None else self._put(self.grounding[frames])
        return Batch(**vars(motor), images=images_to_float(self._put(images)), grounding=grounding)

    def motor(self, frames: np.ndarray, need_environment: bool = True) -> MotorBatch:
        """``frames`` without their images (what a bottleneck's action head learns from)."""
        if need_environment and self.environment is None:
            raise ConfigError("motor batches need the recorded scene state (environment_state)")
        targets = frames[:, None] + self.offsets[None, :]
        ends = self.frame_end[frames][:, None]
        mask = (targets < ends) & ~self.view[frames][:, None]
        targets = np.minimum(targets, ends - 1)  # pad with the episode's last action
        actions = self.normalizer.normalize_chunk(self.action[targets], self.raw_state[frames])
        return MotorBatch(
            state=self._put(self.state[frames]),
            language=self.task_vectors[self._put(self.task_index[frames])],
            actions=self._put(actions.astype(np.float32)),
            mask=self._put(mask.astype(np.float32)),
            environment=None if self.environment is None else self._put(self.environment[frames]),
            keyframes=None if self.keyframes is None else self._put(self.keyframes[frames]),
        )

    def _put(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)


def batch_indices(
    frames: np.ndarray, batch_size: int, rank: int, world_size: int, seed: int, start_step: int
) -> Iterator[np.ndarray]:
    """Frame-index batches of ``batch_size`` for this process from ``start_step`` on, epoch
    after epoch.

    The order is that of the global batch (``batch_size * world_size`` frames a step), whatever
    the number of processes: each epoch is one permutation of the frames (seeded by ``seed``
    and the epoch, as torch's ``DistributedSampler`` draws it), cut into global batches (an
    incomplete last one is dropped), and rank ``r`` of ``W`` takes every ``W``-th frame of
    each from the ``r``-th. So a run resumed at ``start_step`` sees the batches it would have
    seen, and one on 2 processes with ``batch_size`` 16 trains on the same frames, step by
    step, as one on a single process with 32."""
    size = batch_size * world_size
    if len(frames) < size:
        raise ConfigError(
            f"{len(frames)} training frames cannot fill one batch of {batch_size} in each of "
            f"{world_size} processes: lower --batch-size or record more episodes"
        )
    if not 0 <= rank < world_size:
        raise ConfigError(f"rank {rank} is not one of {world_size} processes")
    per_epoch = len(frames) // size
    epoch, skip = divmod(start_step, per_epoch)
    while True:
        order = epoch_order(len(frames), seed, epoch)
        for number in range(skip, per_epoch):
            yield frames[order[number * size + rank : (number + 1) * size : world_size]]
        epoch, skip = epoch + 1, 0


def epoch_order(count: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of ``count`` frames for ``epoch``: ``DistributedSampler``'s draw."""
    generator = torch.Generator().manual_seed(seed + epoch)
    return torch.randperm(count, generator=generator).numpy()
