"""``merge_datasets``: several v3.0 datasets written by ``DatasetWriter`` (shards) made one.

Why: ``record demos --shard-size N`` lets each worker write its own shard of consecutive
episodes, so the parent no longer receives every frame and encodes every video itself; the
shards are then merged here, in order, into the one dataset the command promised.

How, as LeRobot's ``aggregate_datasets`` does it: every data and video file of every shard
becomes a further file of the merged dataset (v3 holds several files per chunk; the file
number counts on across the shards, a new chunk every ``chunks_size`` files). Videos are
copied byte for byte, never re-encoded (H.264 is lossy), so each episode keeps its
``from_timestamp``/``to_timestamp`` in its file. The frame tables are rewritten with
``episode_index``, ``index`` and ``task_index`` re-based (tasks united in first-seen order),
the episode rows say where each episode's files now are, and the stats are pooled from the
episodes' own stats (with the re-based columns' recomputed) exactly as the writer pools them,
so the merged stats are those of one dataset written with all the episodes. The same shards
in the same order give the same bytes.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import layout, stats, tables
from lang2policy.vla.dataset.meta import EPISODE_COLUMNS, DatasetMeta, load_meta

# What every shard must share (info.json); episodes, frames and tasks may differ.
SAME_INFO = (
    "codebase_version", "robot_type", "fps", "chunks_size", "data_path", "video_path",
    "features",
)  # fmt: skip
RENUMBERED = ("episode_index", "index", "task_index")  # frame columns re-based by the merge
_INT_COLUMNS = (
    *(name for name in EPISODE_COLUMNS if name != "tasks"),
    "meta/episodes/chunk_index",
    "meta/episodes/file_index",
)
_ALLOWED = (
    "shards must share the robot type, fps, codebase version, chunk size, path templates, "
    "features (state/action names, cameras, image size, video encoding) and their own episode "
    "columns; their episodes, frames and tasks may differ"
)


@dataclass
class _Merged:
    """What the merge has written so far into ``work``."""

    work: Path
    info: dict[str, Any]
    tasks: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    frames: int = 0
    files: dict[str, int] = field(default_factory=dict)  # "data" or a video key -> files so far

    def next_file(self, kind: str) -> tuple[int, int]:
        """The (chunk, file) of the next ``kind`` file: ``chunks_size`` files to a chunk."""
        number = self.files.get(kind, 0)
        self.files[kind] = number + 1
        size = int(self.info.get("chunks_size", layout.CHUNKS_SIZE))
        return number // size, number % size


def merge_datasets(shards: Sequence[Path], out: Path) -> Path:
    """Merge the datasets ``shards`` (in this order) into a new dataset at ``out``; returns
    ``out``. Written under ``<out>.part`` and renamed when complete, as the writer does, so
    ``out`` is never half a dataset. Shards that differ in what they must share are refused,
    naming the difference."""
    roots, out = [Path(shard) for shard in shards], Path(out)
    if not roots:
        raise Lang2PolicyError(f"nothing to merge into {out}: no shards given")
    metas = [load_meta(root) for root in roots]
    for meta in metas[1:]:
        check_mergeable(metas[0], meta)
    work = out.with_name(out.name + ".part")
    _check_out(out, work)
    merged = _Merged(work, copy.deepcopy(metas[0].info))
    try:
        for meta in metas:
            _add_shard(merged, meta)
        _write_meta(merged)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    work.replace(out)  # replaces an empty directory too
    return out


def check_mergeable(first: DatasetMeta, other: DatasetMeta) -> None:
    """``other`` can follow ``first`` in one dataset, or a ``Lang2PolicyError`` says what
    differs and what may."""
    differences = []
    for key in SAME_INFO:
        if key == "features":
            differences += _feature_differences(first.info["features"], other.info["features"])
        elif first.info.get(key) != other.info.get(key):
            differences.append(f"{key}: {first.info.get(key)!r} vs {other.info.get(key)!r}")
    mine, theirs = first.extra_columns(), other.extra_columns()
    if sorted(mine) != sorted(theirs):
        differences.append(f"episode columns: {mine} vs {theirs}")
    if differences:
        raise Lang2PolicyError(
            f"cannot merge {other.root} after {first.root}; they differ in "
            f"{'; '.join(differences)}. {_ALLOWED}"
        )


def _feature_differences(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Each feature present in one only, or described differently (which parts, both ways)."""
    found = []
    for key in [*mine, *(k for k in theirs if k not in mine)]:
        if key not in theirs or key not in mine:
            found.append(f"feature {key!r} only in the {'first' if key in mine else 'second'}")
        elif mine[key] != theirs[key]:
            parts = {
                part: (mine[key].get(part), theirs[key].get(part))
                for part in sorted({*mine[key], *theirs[key]})
                if mine[key].get(part) != theirs[key].get(part)
            }
            found.append(f"feature {key!r}: {parts}")
    return found


def _check_out(out: Path, work: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise Lang2PolicyError(
            f"{out} already exists and is not an empty directory; shards are merged into a new "
            "(or empty) directory"
        )
    if work.exists():
        raise Lang2PolicyError(f"{work} exists: an earlier merge into {out} did not finish; "
                               "remove it")  # fmt: skip


def _add_shard(merged: _Merged, meta: DatasetMeta) -> None:
    """Append one shard: its frame tables re-based, its videos copied, its episode rows moved."""
    rows = _episode_rows(meta.root)
    task_map = np.array([_task_number(merged.tasks, text) for text in meta.tasks], np.int64)
    episode_map = {row["episode_index"]: len(merged.rows) + n for n, row in enumerate(rows)}
    shift = merged.frames
    data_files, columns = {}, []
    for chunk, file in sorted({(r["data/chunk_index"], r["data/file_index"]) for r in rows}):
        data_files[(chunk, file)] = merged.next_file("data")
        columns.append(_rewrite_frames(merged, meta, (chunk, file), data_files[(chunk, file)],
                                       (episode_map, shift, task_map)))  # fmt: skip
    renumbered = _in_frame_order(columns, shift, meta)
    videos = {key: _copy_videos(merged, meta, rows, key) for key in meta.video_keys}
    for row in rows:
        moved = _moved_row(row, episode_map, shift, data_files, videos)
        first, end = moved["dataset_from_index"] - shift, moved["dataset_to_index"] - shift
        for name, values in renumbered.items():
            if f"stats/{name}/count" in row:
                moved.update(stats.to_columns({name: stats.vector_stats(values[first:end])}))
        merged.rows.append(moved)
    merged.frames += meta.total_frames


def _episode_rows(root: Path) -> list[dict[str, Any]]:
    """Every episode row of the dataset at ``root``, stats included, by ``episode_index``."""
    rows: list[dict[str, Any]] = []
    for path in sorted((root / "meta" / "episodes").glob("*/*.parquet")):
        rows += tables.read_table(path, "an episodes table").to_pylist()
    if not any(name.startswith("stats/") for name in rows[0]):
        raise Lang2PolicyError(
            f"{root}: the episode rows carry no per-episode stats (stats/<feature>/<stat>); the "
            "merge pools them into the merged dataset's stats, as DatasetWriter writes them"
        )
    return sorted(rows, key=lambda row: row["episode_index"])


def _task_number(tasks: list[str], text: str) -> int:
    """``text``'s index in the merged tasks, added at the end when first seen."""
    if text not in tasks:
        tasks.append(text)
    return tasks.index(text)


def _rewrite_frames(
    merged: _Merged,
    meta: DatasetMeta,
    source: tuple[int, int],
    target: tuple[int, int],
    maps: tuple[dict[int, int], int, np.ndarray],
) -> dict[str, np.ndarray]:
    """Write the shard's frame file ``source`` as the merged dataset's ``target`` with the
    re-based columns (``maps``: old -> new episode index, the frames before this shard, old ->
    new task index); returns the re-based columns."""
    episode_map, shift, task_map = maps
    template = meta.info["data_path"]
    chunk, file = source
    relative = layout.format_path(template, "data_path", chunk_index=chunk, file_index=file)
    table = tables.read_table(meta.root / relative, "a frames table")
    tables.require_columns(table, list(RENUMBERED), relative)
    old = {name: np.asarray(table.column(name), np.int64) for name in RENUMBERED}
    tasks = old["task_index"]
    bad_tasks = len(tasks) > 0 and (tasks.min() < 0 or tasks.max() >= len(task_map))
    if bad_tasks or not set(np.unique(old["episode_index"]).tolist()) <= set(episode_map):
        raise Lang2PolicyError(
            f"{meta.root / relative}: frames of episodes or tasks that the shard's episodes and "
            "tasks tables do not list"
        )
    new = {
        "episode_index": np.array([episode_map[int(e)] for e in old["episode_index"]], np.int64),
        "index": old["index"] + shift,
        "task_index": task_map[old["task_index"]],
    }
    for name, values in new.items():
        position = table.schema.get_field_index(name)
        table = table.set_column(position, table.schema.field(name), pa.array(values, pa.int64()))
    chunk, file = target
    written = layout.format_path(template, "data_path", chunk_index=chunk, file_index=file)
    tables.write_table(table, merged.work / written)
    return new


def _in_frame_order(
    columns: list[dict[str, np.ndarray]], shift: int, meta: DatasetMeta
) -> dict[str, np.ndarray]:
    """The shard's re-based columns over all its frame files, in frame order; the frames must
    be the shard's ``total_frames``, one row each."""
    joined = {name: np.concatenate([c[name] for c in columns]) for name in RENUMBERED}
    order = np.argsort(joined["index"], kind="stable")
    joined = {name: values[order] for name, values in joined.items()}
    if not np.array_equal(joined["index"], np.arange(shift, shift + meta.total_frames)):
        raise Lang2PolicyError(
            f"{meta.root}: the frame tables must hold frames 0..{meta.total_frames - 1}, one "
            f"row each (info.json's total_frames); they hold {len(order)} rows"
        )
    return joined


def _copy_videos(
    merged: _Merged, meta: DatasetMeta, rows: list[dict[str, Any]], key: str
) -> dict[tuple[int, int], tuple[int, int]]:
    """Copy the shard's video files of ``key`` (byte for byte) as the next files of the merged
    dataset; returns old (chunk, file) -> new."""
    template, moved = meta.info["video_path"], {}
    used = {(row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"]) for row in rows}
    for chunk, file in sorted(used):
        moved[(chunk, file)] = merged.next_file(key)
        source = layout.format_path(
            template, "video_path", video_key=key, chunk_index=chunk, file_index=file
        )
        new_chunk, new_file = moved[(chunk, file)]
        target = merged.work / layout.format_path(
            template, "video_path", video_key=key, chunk_index=new_chunk, file_index=new_file
        )
        if not (meta.root / source).is_file():
            raise Lang2PolicyError(f"video file is missing: expected {meta.root / source}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(meta.root / source, target)
    return moved


def _moved_row(
    row: dict[str, Any],
    episode_map: dict[int, int],
    shift: int,
    data_files: dict[tuple[int, int], tuple[int, int]],
    videos: dict[str, dict[tuple[int, int], tuple[int, int]]],
) -> dict[str, Any]:
    """An episode row as it reads in the merged dataset: its index, frames and files moved."""
    moved = dict(row)
    moved["episode_index"] = episode_map[row["episode_index"]]
    moved["dataset_from_index"] = row["dataset_from_index"] + shift
    moved["dataset_to_index"] = row["dataset_to_index"] + shift
    chunk, file = data_files[(row["data/chunk_index"], row["data/file_index"])]
    moved["data/chunk_index"], moved["data/file_index"] = chunk, file
    for key, files in videos.items():
        old = (row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"])
        moved[f"videos/{key}/chunk_index"], moved[f"videos/{key}/file_index"] = files[old]
    moved["meta/episodes/chunk_index"] = moved["meta/episodes/file_index"] = 0
    return moved


def _write_meta(merged: _Merged) -> None:
    """The merged episodes table, tasks, pooled stats and info.json."""
    work, rows = merged.work, merged.rows
    first_file = layout.EPISODES_PATH.format(chunk_index=0, file_index=0)
    tables.write_table(tables.episodes_table(rows, _INT_COLUMNS), work / first_file)
    tables.write_table(tables.tasks_table(merged.tasks), work / layout.TASKS_PATH)
    pooled = stats.pool_features([stats.from_columns(row) for row in rows])
    layout.write_json(stats.to_json(pooled), work / layout.STATS_PATH)
    merged.info.update(
        total_episodes=len(rows),
        total_frames=merged.frames,
        total_tasks=len(merged.tasks),
        splits={"train": f"0:{len(rows)}"},
    )
    layout.write_json(merged.info, work / layout.INFO_PATH)
