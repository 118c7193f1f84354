"""``load_dataset``: a whole v3.0 dataset in memory for training, every frame decoded.

Reads what LeRobot's ``LeRobotDataset`` reads, following the episode rows: the frames from
``data_path`` files, each camera's frames from the ``video_path`` files at the episode's
``from_timestamp``. Works for datasets written by ``DatasetWriter`` and, with the same kind of
features (vector state/action, RGB videos at the dataset's fps), by LeRobot itself.

Checked on the way: the frames table has one row per frame in dataset order and each episode's
rows say so; every video holds exactly the frames its episodes need, at the feature's size.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import layout, tables
from lang2policy.vla.dataset.meta import DatasetMeta, load_meta
from lang2policy.vla.dataset.video import video_frames
from lang2policy.vla.spec.image_fit import describe_fit, fit_image
from lang2policy.vla.spec.schema import (
    ACTION_KEY,
    ENV_KEY,
    SIM_ENV_KEY,
    STATE_KEY,
    environment_key,
    image_key,
)

_INDEX_COLUMNS = ("episode_index", "frame_index", "index", "task_index")
_FRAME_COLUMNS = (STATE_KEY, ACTION_KEY, "timestamp", *_INDEX_COLUMNS)
# DemoDataset's per-frame arrays, taken together by ``keep_spans``.
_ROW_ARRAYS = ("state", "action", "episode_index", "frame_index", "task_index", "timestamp")


@dataclass(frozen=True)
class DemoDataset:
    """All frames of a dataset (or of some of its episodes, ``select``), in episode order.

    ``episodes[i]`` describes the i-th episode held: ``index`` (its ``episode_index`` in the
    dataset), ``length``, ``from``/``to`` (its rows here: ``state[from:to]``), ``task`` and the
    dataset's own episode columns (``success``, ``family`` ...). ``stats`` are the dataset's
    (stats.json), also after ``select``.
    """

    root: Path
    info: dict[str, Any]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    stats: dict[str, dict[str, np.ndarray]]
    images: dict[str, np.ndarray]  # camera -> uint8 (N, H, W, 3)
    state: np.ndarray  # float32 (N, state dim)
    action: np.ndarray  # float32 (N, action dim)
    episode_index: np.ndarray  # int64 (N,)
    frame_index: np.ndarray  # int64 (N,): 0.. within each episode
    task_index: np.ndarray  # int64 (N,): into ``tasks``
    timestamp: np.ndarray  # float32 (N,): s since the episode's first frame
    environment: np.ndarray | None = None  # float32 (N, env dim): scene state, if recorded
    # The dataset's own per-frame columns, if any (corrected episodes: ``action.policy``,
    # ``correction.index``): name -> (N, dim) float32 or (N,) int64. Absent: empty.
    frame_columns: dict[str, np.ndarray] = field(default_factory=dict)
    # What was done to the recorded frames to train on them, in words a model's config keeps:
    # "image_fit" (a camera's frames cropped and resized), "units" (state and action converted
    # from LeRobot's units). Empty: used as recorded.
    adaptation: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.state)

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def cameras(self) -> list[str]:
        return list(self.images)

    def select(self, episodes: Iterable[int]) -> DemoDataset:
        """The episodes with these ``episode_index`` values, in the order given."""
        wanted = [int(e) for e in episodes]
        by_index = {ep["index"]: ep for ep in self.episodes}
        unknown = sorted(set(wanted) - set(by_index))
        if unknown or len(set(wanted)) != len(wanted):
            raise Lang2PolicyError(
                f"select: episodes must be distinct and among the {len(by_index)} held "
                f"({_ranges(sorted(by_index))}); unknown: {unknown}"
            )
        chosen = [by_index[e] for e in wanted]
        return self.keep_spans([(ep, ep["from"], ep["to"]) for ep in chosen])

    def keep_spans(self, spans: Iterable[tuple[dict[str, Any], int, int]]) -> DemoDataset:
        """The rows ``first:end`` of each ``(episode, first, end)``, one episode each, in the
        order given; each episode's ``from``/``to``/``length`` renumbered to its rows here."""
        spans = list(spans)
        rows = np.concatenate(
            [np.arange(first, end) for _, first, end in spans] or [np.zeros(0, np.int64)]
        )
        episodes, start = [], 0
        for episode, first, end in spans:
            length = end - first
            episodes.append({**episode, "from": start, "to": start + length, "length": length})
            start += length
        return replace(
            self,
            episodes=episodes,
            images={camera: frames[rows] for camera, frames in self.images.items()},
            environment=None if self.environment is None else self.environment[rows],
            frame_columns={name: values[rows] for name, values in self.frame_columns.items()},
            **{name: getattr(self, name)[rows] for name in _ROW_ARRAYS},
        )


def load_dataset(
    root: Path, cameras: Iterable[str] | None = None, image_size: int | None = None
) -> DemoDataset:
    """Every frame of the dataset at ``root`` (``cameras``: the ones to decode; default all).
    ``image_size``: each frame is fitted to that square as it is decoded (``fit_image``; only
    the fitted frames are held: a 640 x 480 dataset does not need 0.9 MB per frame)."""
    meta = load_meta(Path(root))
    cameras = list(meta.cameras if cameras is None else cameras)
    unknown = [c for c in cameras if c not in meta.cameras]
    if unknown:
        raise Lang2PolicyError(f"the dataset has no camera {unknown}; it has {meta.cameras}")
    frames = read_frames(meta)
    images = {camera: read_images(meta, image_key(camera), image_size) for camera in cameras}
    extra = meta.extra_columns()
    episodes = [
        {
            "index": row["episode_index"],
            "length": row["length"],
            "from": row["dataset_from_index"],
            "to": row["dataset_to_index"],
            "task": _task(row, meta.tasks),
            **{name: row[name] for name in extra},
        }
        for row in meta.episodes
    ]
    return DemoDataset(
        root=meta.root,
        info=meta.info,
        tasks=meta.tasks,
        episodes=episodes,
        stats=_scene_stats_by_model_name(meta.stats),
        images=images,
        adaptation=_image_fits(meta, cameras, image_size),
        **frames,
    )


def _image_fits(meta: DatasetMeta, cameras: list[str], size: int | None) -> dict[str, str]:
    """``{"image_fit": ...}`` naming what fitting did to each camera's frames, if anything."""
    if size is None:
        return {}
    done = []
    for camera in cameras:
        height, width, _ = meta.info["features"][image_key(camera)]["shape"]
        if (height, width) != (size, size):
            done.append(f"{camera}: {describe_fit(height, width, size)}")
    return {"image_fit": "; ".join(done)} if done else {}


def _task(row: dict[str, Any], tasks: list[str]) -> str:
    listed = row.get("tasks") or []
    return listed[0] if listed else tasks[0]


def read_frames(meta: DatasetMeta) -> dict[str, np.ndarray]:
    """The frames table(s) as arrays in dataset order, checked against the episode rows."""
    table = _frames_table(meta)
    what = f"the frames of {meta.root}"
    order = np.argsort(np.asarray(table.column("index")), kind="stable")
    table = table.take(pa.array(order))
    columns = {name: np.asarray(table.column(name), np.int64) for name in _INDEX_COLUMNS}
    if not np.array_equal(columns["index"], np.arange(meta.total_frames)):
        raise Lang2PolicyError(
            f"{what}: the index column must run 0..{meta.total_frames - 1} (one row per frame), "
            f"got {len(table)} rows from {columns['index'][:1]} to {columns['index'][-1:]}"
        )
    _check_rows(meta, columns)
    features = meta.info["features"]
    state_dim, action_dim = features[STATE_KEY]["shape"][0], features[ACTION_KEY]["shape"][0]
    environment, env_key = None, environment_key(features)
    if env_key is not None:
        environment = tables.vector_column(table, env_key, features[env_key]["shape"][0], what)
    own = {}
    for name in own_frame_features(features):
        column_type = table.schema.field(name).type
        if pa.types.is_list(column_type) or pa.types.is_fixed_size_list(column_type):
            own[name] = tables.vector_column(table, name, features[name]["shape"][0], what)
        else:  # a scalar per frame
            kind = np.int64 if features[name]["dtype"] == "int64" else np.float32
            own[name] = np.asarray(table.column(name), kind)
    return {
        "frame_columns": own,
        "environment": environment,
        "state": tables.vector_column(table, STATE_KEY, state_dim, what),
        "action": tables.vector_column(table, ACTION_KEY, action_dim, what),
        "episode_index": columns["episode_index"],
        "frame_index": columns["frame_index"],
        "task_index": columns["task_index"],
        "timestamp": np.asarray(table.column("timestamp"), np.float32),
    }


def _scene_stats_by_model_name(stats: dict) -> dict:
    """The dataset's stats with the scene state's under ``ENV_KEY`` too, the name the model's
    normaliser reads (the dataset writes it as ``SIM_ENV_KEY``)."""
    if SIM_ENV_KEY in stats and ENV_KEY not in stats:
        return {**stats, ENV_KEY: stats[SIM_ENV_KEY]}
    return stats


def own_frame_features(features: dict[str, Any]) -> list[str]:
    """The dataset's own per-frame features (neither LeRobot's, nor a camera's, nor the scene
    state): float32 vectors and int64 scalars, as ``DatasetWriter(frame_vectors=...,
    frame_indices=...)`` declares them."""
    known = {*_FRAME_COLUMNS, ENV_KEY, SIM_ENV_KEY}
    return [
        key
        for key, feature in features.items()
        if key not in known
        and feature.get("dtype") in ("float32", "int64")
        and len(feature.get("shape", ())) == 1
    ]


def _frames_table(meta: DatasetMeta) -> pa.Table:
    files = sorted({(row["data/chunk_index"], row["data/file_index"]) for row in meta.episodes})
    parts = []
    for chunk, file in files:
        relative = layout.format_path(
            meta.info["data_path"], "data_path", chunk_index=chunk, file_index=file
        )
        part = tables.read_table(meta.root / relative, "a frames table")
        features = meta.info["features"]
        env_key = environment_key(features)
        wanted = [*_FRAME_COLUMNS, *([env_key] if env_key else [])]
        wanted += own_frame_features(features)
        tables.require_columns(part, wanted, str(relative))
        parts.append(part.select(wanted))
    return pa.concat_tables(parts)


def _check_rows(meta: DatasetMeta, columns: dict[str, np.ndarray]) -> None:
    """Each episode's rows carry its episode_index and frame indices 0..length-1."""
    for row in meta.episodes:
        start, stop = row["dataset_from_index"], row["dataset_to_index"]
        episode = columns["episode_index"][start:stop]
        frames = columns["frame_index"][start:stop]
        if not (episode == row["episode_index"]).all() or not np.array_equal(
            frames, np.arange(stop - start)
        ):
            raise Lang2PolicyError(
                f"the frames table disagrees with episode {row['episode_index']}: rows "
                f"{start}..{stop} must be its frames 0..{stop - start - 1}"
            )


def read_images(meta: DatasetMeta, key: str, size: int | None = None) -> np.ndarray:
    """All frames of the video feature ``key`` in dataset order, uint8 ``(N, H, W, 3)``, or
    ``(N, size, size, 3)`` fitted as they are decoded (``fit_image``)."""
    height, width, _ = meta.info["features"][key]["shape"]
    held = (height, width) if size is None else (size, size)
    images = np.empty((meta.total_frames, *held, 3), np.uint8)
    by_file: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for row in meta.episodes:
        by_file[(row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"])].append(row)
    for (chunk, file), rows in sorted(by_file.items()):
        relative = layout.format_path(
            meta.info["video_path"], "video_path", video_key=key, chunk_index=chunk, file_index=file
        )
        targets = _FrameTargets(rows, key, meta.fps)
        count = 0
        for count, frame in enumerate(video_frames(meta.root / relative), start=1):
            if frame.shape[:2] != (height, width):
                raise Lang2PolicyError(
                    f"video {relative}: frames are {frame.shape[:2]}, info.json says {key} is "
                    f"{(height, width)}"
                )
            target = targets.row(count - 1)
            if target is not None:
                images[target] = fit_image(frame, size)
        if count != targets.needed:
            raise Lang2PolicyError(
                _count_error(relative, count, targets.needed, rows, key, meta.fps)
            )
    return images


class _FrameTargets:
    """Which dataset row each frame of one video file belongs to. Kept as one span per
    episode, not one entry per frame, so an episode's ``from_timestamp`` never sizes an
    allocation (a "from 10^12 s" row must not ask for 10^13 entries)."""

    def __init__(self, rows: list[dict[str, Any]], key: str, fps: int) -> None:
        spans = []
        for row in rows:
            seconds = row[f"videos/{key}/from_timestamp"]
            if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
                raise Lang2PolicyError(
                    f"episode {row['episode_index']}: videos/{key}/from_timestamp is "
                    f"{seconds!r}; it must be a finite number of seconds >= 0"
                )
            spans.append((round(seconds * fps), row["length"], row["dataset_from_index"]))
        spans.sort()
        self._starts = [start for start, _, _ in spans]
        self._spans = spans
        self.needed = max(start + length for start, length, _ in spans)

    def row(self, frame: int) -> int | None:
        """The dataset row of the video's ``frame`` (0-based), None for a frame of no episode."""
        index = bisect.bisect_right(self._starts, frame) - 1
        if index < 0:
            return None
        start, length, first = self._spans[index]
        return first + frame - start if frame < start + length else None


def _count_error(
    relative: str, count: int, needed: int, rows: list[dict[str, Any]], key: str, fps: int
) -> str:
    listed = ", ".join(
        f"episode {row['episode_index']}: {row['length']} frames from "
        f"{row[f'videos/{key}/from_timestamp']:.3f} s"
        for row in rows[:5]
    )
    more = ", ..." if len(rows) > 5 else ""
    return (
        f"video {relative} has {count} frames but its episodes need {needed} at {fps} fps "
        f"({listed}{more})"
    )


def _ranges(values: list[int]) -> str:
    """``0..9`` for a contiguous run, else the first few values."""
    if values and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}..{values[-1]}"
    return str(values[:10])
