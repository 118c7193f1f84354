"""``DatasetWriter``: whole episodes in, a LeRobotDataset v3.0 directory out.

Runs in one process (the parent of the workers that make the episodes). ``add_episode``
checks an episode, sends its images to one running ffmpeg per camera (the episodes of a file
are concatenated, as v3 does), keeps its state/action rows and its per-episode stats, and
returns; ``finish`` writes the frames, episodes, tasks, stats and ``info.json``. Files are
written under ``<root>.part`` and the directory is renamed to ``root`` when finished, so a
``root`` is always a complete dataset; an abandoned write (an exception in the ``with`` block,
``abandon()``) removes its ``.part`` directory.

Everything goes to chunk 0, file 0 (a few hundred 96x96 episodes are a few MB); the episode
rows say so, so a reader that follows the rows (LeRobot's, ours) needs nothing else.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import layout, stats, tables
from lang2policy.vla.dataset.record import EpisodeRecord, check_frame_columns, check_record
from lang2policy.vla.dataset.video import VideoEncoder, VideoSettings
from lang2policy.vla.spec.schema import (
    ACTION_KEY,
    CAMERAS,
    ENV_KEY,
    FPS,
    IMAGE_SIZE,
    ROBOT_TYPE,
    SIM_ENV_KEY,
    STATE_KEY,
    STATE_NAMES,
    image_key,
)

# Episode columns that LeRobot defines; the caller's own must have other names.
_INT_COLUMNS = (
    "episode_index",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
    "meta/episodes/chunk_index",
    "meta/episodes/file_index",
)
_RESERVED_PREFIXES = ("data/", "videos/", "meta/", "stats/")


class DatasetWriter:
    """Writes episodes to a new dataset directory ``root`` (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        fps: int = FPS,
        cameras: Sequence[str] = CAMERAS,
        image_size: int = IMAGE_SIZE,
        robot_type: str | None = ROBOT_TYPE,
        extra_episode_columns: Sequence[str] = (),
        names: Sequence[str] = STATE_NAMES,
        video: VideoSettings | None = None,
        environment_names: Sequence[str] = (),
        frame_vectors: Mapping[str, Sequence[str]] | None = None,
        frame_indices: Sequence[str] = (),
    ) -> None:
        self.root = Path(root)
        self.environment_names = tuple(environment_names)
        # The caller's own per-frame columns: float32 vectors (named elements), int64 scalars.
        self.frame_vectors = {k: tuple(v) for k, v in (frame_vectors or {}).items()}
        self.frame_indices = tuple(frame_indices)
        self.work = self.root.with_name(self.root.name + ".part")
        self.fps, self.image_size = int(fps), int(image_size)
        self.cameras, self.names = tuple(cameras), tuple(names)
        self.extra_columns = tuple(extra_episode_columns)
        _check_settings(self.root, self.fps, self.cameras, self.image_size, self.extra_columns)
        _check_frame_names([*self.frame_vectors, *self.frame_indices])
        if self.work.exists():
            raise Lang2PolicyError(
                f"{self.work} exists: an earlier write of {self.root} did not finish; remove it"
            )
        self.video = video or VideoSettings()
        self.info = layout.new_info(self.fps, self._features(), robot_type)
        self.tasks: dict[str, int] = {}  # task text -> task_index, in order of first use
        self.total_frames = 0
        self._rows: list[dict[str, Any]] = []  # one per episode
        self._frames: list[dict[str, np.ndarray]] = []  # each episode's frame columns
        self._stats: list[dict[str, stats.Stats]] = []  # each episode's stats
        self._kinds: dict[str, str] = {}  # extra column -> the kind of its values so far
        self.closed = self.finished = False
        self._encoders = {camera: self._encoder(camera) for camera in self.cameras}

    def _features(self) -> dict[str, dict[str, Any]]:
        video_info = self.video.info(self.image_size, self.fps)
        return {
            **{
                image_key(c): layout.video_feature(self.image_size, video_info)
                for c in self.cameras
            },
            STATE_KEY: layout.vector_feature(self.names),
            ACTION_KEY: layout.vector_feature(self.names),
            **(
                {SIM_ENV_KEY: layout.vector_feature(self.environment_names)}
                if self.environment_names
                else {}
            ),
            **{key: layout.vector_feature(names) for key, names in self.frame_vectors.items()},
            **{key: {"dtype": "int64", "shape": [1], "names": None} for key in self.frame_indices},
        }

    def _encoder(self, camera: str) -> VideoEncoder:
        path = self.work / layout.VIDEO_PATH.format(
            video_key=image_key(camera), chunk_index=0, file_index=0
        )
        return VideoEncoder(path, self.image_size, self.fps, self.video)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.finish()
        else:
            self.abandon()

    @property
    def episodes(self) -> int:
        return len(self._rows)

    def add_episode(self, record: EpisodeRecord) -> int:
        """Append one episode; returns its ``episode_index``."""
        if self.closed:
            raise Lang2PolicyError(f"the writer of {self.root} is closed; no more episodes")
        check_record(
            record, self.cameras, self.image_size, len(self.names), self.extra_columns,
            len(self.environment_names),
        )  # fmt: skip
        self._check_kinds(record.extra)
        index, length = len(self._rows), record.length
        task_index = self.tasks.setdefault(record.task, len(self.tasks))
        columns = self._frame_columns(record, index, task_index)
        episode_stats = {key: stats.vector_stats(values) for key, values in columns.items()}
        row = self._episode_row(index, record.task, length)
        for camera, encoder in self._encoders.items():
            key = image_key(camera)
            row[f"videos/{key}/from_timestamp"] = encoder.frames / self.fps
            encoder.append(record.images[camera])
            row[f"videos/{key}/to_timestamp"] = encoder.frames / self.fps
            episode_stats[key] = stats.image_stats(record.images[camera])
        row.update(stats.to_columns(episode_stats))
        row.update({name: _plain(record.extra[name]) for name in self.extra_columns})
        self._rows.append(row)
        self._frames.append(columns)
        self._stats.append(episode_stats)
        self.total_frames += length
        return index

    def _check_kinds(self, extra: dict[str, Any]) -> None:
        """An episode column keeps one kind of value (bool, number, text; None goes anywhere),
        checked here so that a mix fails at its episode, not when the table is written."""
        kinds = {name: _kind(value) for name, value in extra.items() if value is not None}
        clash = {
            name: (self._kinds[name], kind)
            for name, kind in kinds.items()
            if self._kinds.get(name, kind) != kind
        }
        if clash:
            raise Lang2PolicyError(
                f"episode {len(self._rows)}: episode columns change kind (before, now): {clash}"
            )
        self._kinds.update(kinds)

    def _frame_columns(
        self, record: EpisodeRecord, index: int, task_index: int
    ) -> dict[str, np.ndarray]:
        length = record.length
        frame_index = np.arange(length, dtype=np.int64)
        environment = {}
        if self.environment_names:
            environment[SIM_ENV_KEY] = np.asarray(record.environment, np.float32)
        own = check_frame_columns(record, self.frame_vectors, self.frame_indices)
        return {
            STATE_KEY: np.asarray(record.state, np.float32),
            ACTION_KEY: np.asarray(record.action, np.float32),
            **environment,
            **own,
            "timestamp": (frame_index / self.fps).astype(np.float32),
            "frame_index": frame_index,
            "episode_index": np.full(length, index, np.int64),
            "index": self.total_frames + frame_index,
            "task_index": np.full(length, task_index, np.int64),
        }

    def _episode_row(self, index: int, task: str, length: int) -> dict[str, Any]:
        row: dict[str, Any] = {
            "episode_index": index,
            "tasks": [task],
            "length": length,
            "data/chunk_index": 0,
            "data/file_index": 0,
            "dataset_from_index": self.total_frames,
            "dataset_to_index": self.total_frames + length,
        }
        for camera in self.cameras:
            row[f"videos/{image_key(camera)}/chunk_index"] = 0
            row[f"videos/{image_key(camera)}/file_index"] = 0
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
        return row

    def finish(self) -> Path:
        """Close the videos and write the tables and meta files; returns the dataset root."""
        if self.finished:
            return self.root
        if self.closed:
            raise Lang2PolicyError(f"the write of {self.root} was abandoned; nothing to finish")
        self.close()
        if not self._rows:
            self.abandon()
            raise Lang2PolicyError(f"no episodes were added to {self.root}; nothing to write")
        columns = {key: np.concatenate([f[key] for f in self._frames]) for key in self._frames[0]}
        tables.write_table(tables.frames_table(columns), self._path(layout.DATA_PATH))
        episodes = tables.episodes_table(self._rows, _INT_COLUMNS)
        tables.write_table(episodes, self._path(layout.EPISODES_PATH))
        tables.write_table(tables.tasks_table(list(self.tasks)), self.work / layout.TASKS_PATH)
        pooled = stats.pool_features(self._stats)
        layout.write_json(stats.to_json(pooled), self.work / layout.STATS_PATH)
        self.info.update(
            total_episodes=len(self._rows),
            total_frames=self.total_frames,
            total_tasks=len(self.tasks),
            splits={"train": f"0:{len(self._rows)}"},
        )
        layout.write_json(self.info, self.work / layout.INFO_PATH)
        self.work.replace(self.root)  # replaces an empty directory too
        self.finished = True
        return self.root

    def close(self) -> None:
        """Stop the video encoders."""
        self.closed = True
        for encoder in self._encoders.values():
            encoder.close()

    def abandon(self) -> None:
        """Stop and remove what was written (the ``.part`` directory); ``root`` stays as it was."""
        self.close()
        shutil.rmtree(self.work, ignore_errors=True)

    def _path(self, template: str) -> Path:
        return self.work / template.format(chunk_index=0, file_index=0)


def _check_settings(
    root: Path, fps: int, cameras: tuple[str, ...], image_size: int, extra: tuple[str, ...]
) -> None:
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise Lang2PolicyError(
            f"{root} already exists and is not an empty directory; a dataset is written to a "
            "new (or empty) directory"
        )
    if fps <= 0 or image_size <= 0 or not cameras:
        raise Lang2PolicyError(
            f"a dataset needs fps > 0, image_size > 0 and at least one camera; got fps={fps}, "
            f"image_size={image_size}, cameras={list(cameras)}"
        )
    reserved = [
        name
        for name in extra
        if name in (*_INT_COLUMNS, "tasks") or name.startswith(_RESERVED_PREFIXES)
    ]
    if reserved or len(set(extra)) != len(extra):
        raise Lang2PolicyError(
            f"extra episode columns must be unique and not LeRobot's own ({list(_INT_COLUMNS)}, "
            f"tasks, {'/..., '.join(_RESERVED_PREFIXES)}/...); got {list(extra)}"
        )


def _check_frame_names(names: list[str]) -> None:
    """The caller's frame columns must not be the writer's own, nor appear twice."""
    own = (STATE_KEY, ACTION_KEY, ENV_KEY, SIM_ENV_KEY, "timestamp", "frame_index",
           "episode_index", "index", "task_index")  # fmt: skip
    taken = [n for n in names if n in own or n.startswith("observation.images.")]
    if taken or len(set(names)) != len(names):
        raise Lang2PolicyError(
            f"extra frame columns must be unique and none of {list(own)} or a camera's; got "
            f"{names}"
        )


def _kind(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    return "text" if isinstance(value, str) else "number"


def _plain(value: Any) -> Any:
    """numpy scalars as Python values (parquet columns are typed from them)."""
    return value.item() if isinstance(value, np.generic) else value
