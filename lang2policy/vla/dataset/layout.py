"""Where things live in a LeRobotDataset v3.0 directory, and what ``meta/info.json`` says.

The layout (LeRobot's ``lerobot.datasets.utils`` and ``dataset_metadata``, codebase v3.0)::

    meta/info.json                                    the schema: features, fps, counts, paths
    meta/stats.json                                   per feature min/max/mean/std/count
    meta/tasks.parquet                                task text -> task_index
    meta/episodes/chunk-000/file-000.parquet          one row per episode
    data/chunk-000/file-000.parquet                   one row per frame, many episodes
    videos/<feature>/chunk-000/file-000.mp4           one video per camera, episodes in a row

Files are grouped ``chunks_size`` to a chunk directory; a dataset of a few hundred 96x96
episodes fits in the first file of the first chunk, which is all the writer makes.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.spec.loader_limits import (
    META_JSON_MAX_BYTES,
    PATH_FIELD_MAX_WIDTH,
    PATH_TEMPLATE_FIELDS,
    PATH_TEMPLATE_MAX_CHARS,
    at_most,
)

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk directory
DATA_FILES_SIZE_IN_MB = 100  # LeRobot's defaults: where a data / video file would roll over
VIDEO_FILES_SIZE_IN_MB = 500

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"

_FORMATTER = string.Formatter()
_FIELD_SPEC = re.compile(r"0?([0-9]{1,9})?d?")  # "", "03d", "d", "3": the width is checked

IMAGE_PREFIX = "observation.images."
IMAGE_NAMES = ["height", "width", "channels"]
# Every frame's bookkeeping columns, as LeRobot's DEFAULT_FEATURES.
INDEX_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}


def vector_feature(names: Sequence[str]) -> dict[str, Any]:
    """A float32 vector feature (state, action) with one name per element."""
    return {"dtype": "float32", "shape": [len(names)], "names": list(names)}


def video_feature(image_size: int, video_info: dict[str, Any]) -> dict[str, Any]:
    """A camera stored as video: square RGB frames, channels last, with the encoding's info."""
    return {
        "dtype": "video",
        "shape": [image_size, image_size, 3],
        "names": list(IMAGE_NAMES),
        "info": dict(video_info),
    }


def new_info(
    fps: int, features: dict[str, dict[str, Any]], robot_type: str | None
) -> dict[str, Any]:
    """``meta/info.json`` of an empty dataset with ``features`` (the index features added)."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILES_SIZE_IN_MB,
        "video_files_size_in_mb": VIDEO_FILES_SIZE_IN_MB,
        "fps": fps,
        "splits": {},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH,
        "features": {**features, **INDEX_FEATURES},
    }


def camera_name(video_key: str) -> str:
    """``front`` from ``observation.images.front``."""
    return video_key.removeprefix(IMAGE_PREFIX)


def video_keys(info: dict[str, Any]) -> list[str]:
    """The features of ``info`` stored as video, in the order info.json lists them."""
    return [key for key, ft in info["features"].items() if ft.get("dtype") == "video"]


def write_json(data: Any, path: Path) -> None:
    """Indented UTF-8 JSON, as LeRobot writes its meta files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")


def read_json(path: Path, what: str) -> Any:
    """The JSON in ``path``; a ``Lang2PolicyError`` naming ``what`` when missing, broken or
    larger than ``META_JSON_MAX_BYTES``."""
    if not path.is_file():
        raise Lang2PolicyError(f"{what} is missing: expected the file {path}")
    at_most(path.stat().st_size, META_JSON_MAX_BYTES, "its size", f"{what} ({path})", unit="bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise Lang2PolicyError(f"{what} ({path}) is not valid JSON: {exc}") from exc


def check_template(template: Any, what: str) -> str:
    """info.json's ``data_path`` or ``video_path`` (``what``), checked: text of at most
    ``PATH_TEMPLATE_MAX_CHARS`` whose fields are those the reader fills in
    (``PATH_TEMPLATE_FIELDS``), each plain or zero-padded to at most ``PATH_FIELD_MAX_WIDTH``
    (``{chunk_index:03d}``)."""
    allowed = PATH_TEMPLATE_FIELDS[what]
    where = f"info.json's {what}"
    if not isinstance(template, str):
        raise Lang2PolicyError(f"{where} must be text like {DATA_PATH!r}, got {template!r:.80}")
    at_most(len(template), PATH_TEMPLATE_MAX_CHARS, "its length", where, unit="characters")
    try:
        fields = [
            (name, spec, conversion) for _, name, spec, conversion in _FORMATTER.parse(template)
        ]
    except ValueError as exc:
        raise Lang2PolicyError(f"{where} {template!r} is not a path template: {exc}") from exc
    for name, spec, conversion in fields:
        if name is None:
            continue
        width = _FIELD_SPEC.fullmatch(spec or "")
        if name not in allowed or conversion or width is None:
            raise Lang2PolicyError(
                f"{where} {template!r}: field {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} is not allowed; a field is one of "
                f"{list(allowed)}, plain or zero-padded like {{chunk_index:03d}}"
            )
        at_most(int(width[1] or 0), PATH_FIELD_MAX_WIDTH, f"the width of {{{name}}}", where)
    return template


def format_path(template: str, what: str, **fields: Any) -> str:
    """``template`` (info.json's ``data_path`` / ``video_path``) filled in: a path relative to
    the dataset's root that stays inside it (not absolute, no ``..``), or a clear error. The
    dataset's own symbolic links are followed (a Hugging Face cache links every file)."""
    try:
        relative = check_template(template, what).format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise Lang2PolicyError(
            f"info.json's {what} {template!r} cannot be filled in ({exc}); a v3.0 template "
            f"uses {sorted(fields)}, e.g. {DATA_PATH!r}"
        ) from exc
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or ".." in parts or "\\" in relative:
        raise Lang2PolicyError(
            f"info.json's {what} {template!r} gives the path {relative!r}, which is not inside "
            "the dataset's directory; paths are relative to it, without '..'"
        )
    return relative
