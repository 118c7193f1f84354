"""A v3.0 dataset's metadata (``meta/``), read and checked without touching frames or videos.

``load_meta`` is all ``lang2policy dataset info`` needs, and the first step of
``load_dataset``. Every check says what was found and what was expected: a missing file, a
codebase version other than v3.0, features without state or action, an episodes table whose
lengths do not add up to info.json's frame count, task indices that are not 0..n-1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import layout, stats, tables
from lang2policy.vla.spec.loader_limits import (
    DATASET_MAX_FPS,
    IMAGE_MAX_SIDE,
    VECTOR_MAX_DIM,
    at_most,
)
from lang2policy.vla.spec.schema import ACTION_KEY, STATE_KEY

EPISODE_COLUMNS = (
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
)
VIDEO_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
# Columns of LeRobot's own; any other episode column is the dataset's (``success`` ...).
_OWN_PREFIXES = ("data/", "videos/", "meta/", "stats/")


@dataclass(frozen=True)
class DatasetMeta:
    """``info.json``, the tasks by index, the episode rows (by ``episode_index``), the stats."""

    root: Path
    info: dict[str, Any]
    tasks: list[str]
    episodes: list[dict[str, Any]]
    stats: dict[str, stats.Stats]

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def video_keys(self) -> list[str]:
        return layout.video_keys(self.info)

    @property
    def cameras(self) -> list[str]:
        return [layout.camera_name(key) for key in self.video_keys]

    @property
    def total_frames(self) -> int:
        return int(self.info["total_frames"])

    def extra_columns(self) -> list[str]:
        """The episode columns that are not LeRobot's (``success``, ``family`` ...)."""
        if not self.episodes:
            return []
        return [
            name
            for name in self.episodes[0]
            if name not in EPISODE_COLUMNS and not name.startswith(_OWN_PREFIXES)
        ]


def load_meta(root: Path) -> DatasetMeta:
    """Read and check ``root/meta``; a ``Lang2PolicyError`` says what is wrong."""
    root = Path(root)
    if not root.is_dir():
        raise Lang2PolicyError(f"no dataset at {root}: not a directory")
    info = layout.read_json(root / layout.INFO_PATH, "the dataset's meta/info.json")
    check_info(info, root)
    tasks = read_tasks(root)
    episodes = read_episodes(root, info)
    check_episodes(episodes, info, len(tasks))
    stats_json = layout.read_json(root / layout.STATS_PATH, "the dataset's meta/stats.json")
    return DatasetMeta(root, info, tasks, episodes, stats.from_json(stats_json))


def check_info(info: Any, root: Path) -> None:
    """info.json is a v3.0 one with state, action, fps and square RGB video features."""
    where = root / layout.INFO_PATH
    if not isinstance(info, dict):
        raise Lang2PolicyError(f"{where} must hold a JSON object, got {type(info).__name__}")
    version = info.get("codebase_version")
    if version != layout.CODEBASE_VERSION:
        raise Lang2PolicyError(
            f"{where}: codebase_version is {version!r}; this reader reads LeRobotDataset "
            f"{layout.CODEBASE_VERSION!r} (convert older datasets with LeRobot's "
            "convert_dataset_v21_to_v30)"
        )
    missing = [key for key in ("fps", "features", "total_frames", "data_path") if key not in info]
    if missing:
        raise Lang2PolicyError(f"{where} lacks {missing}; a v3.0 info.json has them all")
    fps = info["fps"]
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not 0 < fps <= DATASET_MAX_FPS:
        raise Lang2PolicyError(
            f"{where}: fps is {fps!r:.40}; it must be a number in (0, {DATASET_MAX_FPS}]"
        )
    features = info["features"]
    if not isinstance(features, dict) or not all(isinstance(f, dict) for f in features.values()):
        raise Lang2PolicyError(f"{where}: features must map names to objects, got {features!r:.80}")
    layout.check_template(info["data_path"], "data_path")
    _check_features(info, where)
    if layout.video_keys(info):
        layout.check_template(info["video_path"], "video_path")


def _check_features(info: dict[str, Any], where: Path) -> None:
    features = info["features"]
    absent = [key for key in (STATE_KEY, ACTION_KEY) if key not in features]
    if absent:
        raise Lang2PolicyError(f"{where}: no feature {absent}; its features are {list(features)}")
    for key in (STATE_KEY, ACTION_KEY):
        if len(features[key].get("shape", ())) != 1:
            raise Lang2PolicyError(f"{where}: {key} must be a vector, got {features[key]}")
    for key, feature in features.items():
        _check_shape(feature, key, where)
    images = [key for key, ft in features.items() if ft.get("dtype") == "image"]
    if images:
        raise Lang2PolicyError(
            f"{where}: {images} are stored as images in the parquet files; this reader reads "
            "cameras stored as video (dtype 'video')"
        )
    if layout.video_keys(info) and not info.get("video_path"):
        raise Lang2PolicyError(f"{where} has video features but no video_path")
    for key in layout.video_keys(info):
        shape = list(features[key].get("shape", ()))
        if len(shape) != 3 or shape[2] != 3:
            raise Lang2PolicyError(f"{where}: {key} must be (height, width, 3), got {shape}")
        video_fps = (features[key].get("info") or {}).get("video.fps", info["fps"])
        if float(video_fps) != float(info["fps"]):
            raise Lang2PolicyError(
                f"{where}: {key} is encoded at {video_fps} fps, the dataset is {info['fps']} "
                "fps; frames are read one video frame per dataset frame, so they must agree"
            )


def _check_shape(feature: dict[str, Any], key: str, where: Path) -> None:
    """A feature's shape: whole numbers, each at most ``VECTOR_MAX_DIM`` (``IMAGE_MAX_SIDE``
    for the height and width of a video), checked before anything is allocated for them."""
    shape = feature.get("shape", ())
    if not isinstance(shape, list | tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise Lang2PolicyError(
            f"{where}: {key} must have a shape of whole numbers, got {shape!r:.80}"
        )
    video = feature.get("dtype") == "video"
    for axis, size in enumerate(shape):
        limit = IMAGE_MAX_SIDE if video and axis < 2 else VECTOR_MAX_DIM
        at_most(size, limit, f"{key}'s shape[{axis}]", str(where))


def read_tasks(root: Path) -> list[str]:
    """The task texts by ``task_index`` (from LeRobot's pandas-indexed table or ours)."""
    what = "the dataset's meta/tasks.parquet"
    table = tables.read_table(root / layout.TASKS_PATH, what)
    tables.require_columns(table, ["task_index"], what)
    text = next(
        (
            name
            for name in ("task", "__index_level_0__", *table.column_names)
            if name in table.column_names and _is_text(table.schema.field(name).type)
        ),
        None,
    )
    if text is None:
        raise Lang2PolicyError(f"{what} has no text column; it has {table.column_names}")
    indices = table.column("task_index").to_pylist()
    if sorted(indices) != list(range(len(indices))):
        raise Lang2PolicyError(f"{what}: task_index must be 0..{len(indices) - 1}, got {indices}")
    by_index = dict(zip(indices, table.column(text).to_pylist(), strict=True))
    return [by_index[i] for i in range(len(indices))]


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def read_episodes(root: Path, info: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row of ``meta/episodes/*/*.parquet``, by ``episode_index``, without ``stats/``."""
    paths = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not paths:
        expected = root / layout.EPISODES_PATH.format(chunk_index=0, file_index=0)
        raise Lang2PolicyError(f"the dataset's episodes table is missing: expected {expected}")
    required = [*EPISODE_COLUMNS]
    for key in layout.video_keys(info):
        required += [f"videos/{key}/{column}" for column in VIDEO_COLUMNS]
    rows: list[dict[str, Any]] = []
    for path in paths:
        table = tables.read_table(path, "an episodes table")
        tables.require_columns(table, required, f"the episodes table {path}")
        keep = [name for name in table.column_names if not name.startswith("stats/")]
        rows += table.select(keep).to_pylist()
    return sorted(rows, key=lambda row: row["episode_index"])


def check_episodes(episodes: list[dict[str, Any]], info: dict[str, Any], tasks: int) -> None:
    """Episode rows agree with info.json and with each other."""
    indices = [row["episode_index"] for row in episodes]
    if len(set(indices)) != len(indices):
        raise Lang2PolicyError(f"the episodes table repeats episode indices: {indices}")
    lengths = np.array([row["length"] for row in episodes])
    total, count = int(lengths.sum()), info.get("total_episodes", len(episodes))
    if total != int(info["total_frames"]) or len(episodes) != count:
        raise Lang2PolicyError(
            f"info.json says {info.get('total_episodes')} episodes, {info['total_frames']} "
            f"frames; the episodes table has {len(episodes)} episodes, {total} frames"
        )
    for row in episodes:
        span = row["dataset_to_index"] - row["dataset_from_index"]
        if span != row["length"] or row["length"] <= 0:
            raise Lang2PolicyError(
                f"episode {row['episode_index']}: length {row['length']} but frames "
                f"{row['dataset_from_index']}..{row['dataset_to_index']}; they must agree"
            )
    if tasks == 0:
        raise Lang2PolicyError("the dataset's tasks table is empty")
