"""The parquet tables of a v3.0 dataset, with the column names and types LeRobot uses.

- frames (``data/...``): ``observation.state`` and ``action`` as fixed-size float32 lists,
  ``timestamp`` float32, ``frame_index``, ``episode_index``, ``index``, ``task_index`` int64
  (what LeRobot's ``datasets.Sequence(length=n, float32)`` / ``Value`` features read as);
- episodes (``meta/episodes/...``): ``episode_index``, ``tasks`` (list of text), ``length``,
  ``data/chunk_index``, ``data/file_index``, ``dataset_from_index``, ``dataset_to_index``,
  per video ``videos/<key>/chunk_index|file_index|from_timestamp|to_timestamp``,
  ``meta/episodes/chunk_index|file_index``, then the caller's own columns (``success`` ...);
- tasks (``meta/tasks.parquet``): ``task_index`` int64 and ``task`` text, stored as pandas
  stores a frame indexed by task (LeRobot reads it with ``pd.read_parquet`` and looks tasks
  up in the index), here written with pyarrow alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lang2policy.errors import Lang2PolicyError


def frames_table(columns: dict[str, np.ndarray]) -> pa.Table:
    """A frames table: 2-D arrays become fixed-size float32 lists, 1-D ones plain columns."""
    arrays = {}
    for name, values in columns.items():
        if values.ndim == 2:
            flat = pa.array(values.astype(np.float32).reshape(-1), type=pa.float32())
            kind = pa.list_(pa.field("element", pa.float32()), values.shape[1])
            arrays[name] = pa.FixedSizeListArray.from_arrays(flat, type=kind)
        else:
            arrays[name] = pa.array(values)
    return pa.table(arrays)


def episodes_table(rows: Sequence[dict[str, Any]], int_columns: Sequence[str]) -> pa.Table:
    """One row per episode; ``int_columns`` are int64, ``tasks`` a list of text, the rest
    (timestamps float64, the caller's columns) take the type of their values."""
    names = list(rows[0])
    arrays = {}
    for name in names:
        values = [row[name] for row in rows]
        if name == "tasks":
            arrays[name] = pa.array(values, type=pa.list_(pa.string()))
        elif name in int_columns:
            arrays[name] = pa.array(values, type=pa.int64())
        else:
            arrays[name] = _column(name, values)
    return pa.table(arrays)


def _column(name: str, values: list[Any]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        kinds = sorted({type(v).__name__ for v in values})
        raise Lang2PolicyError(
            f"episode column {name!r} mixes value types {kinds}; give every episode the same "
            "type (bool, int, float or str; None for unknown)"
        ) from exc


def tasks_table(tasks: Sequence[str]) -> pa.Table:
    """``meta/tasks.parquet``: ``task_index`` with the task text as the (pandas) index."""
    table = pa.table(
        {
            "task_index": pa.array(range(len(tasks)), type=pa.int64()),
            "task": pa.array(list(tasks), type=pa.string()),
        }
    )
    return table.replace_schema_metadata({b"pandas": json.dumps(_pandas_index("task")).encode()})


def _pandas_index(index: str) -> dict[str, Any]:
    """pandas' parquet metadata for a frame with one int64 column indexed by text ``index``."""

    def column(name: str, pandas_type: str, numpy_type: str) -> dict[str, Any]:
        return {
            "name": name,
            "field_name": name,
            "pandas_type": pandas_type,
            "numpy_type": numpy_type,
            "metadata": None,
        }

    return {
        "index_columns": [index],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [column("task_index", "int64", "int64"), column(index, "unicode", "object")],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }


def write_table(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="snappy")


def read_table(path: Path, what: str) -> pa.Table:
    """The parquet table at ``path``; a ``Lang2PolicyError`` naming ``what`` if missing or bad."""
    if not path.is_file():
        raise Lang2PolicyError(f"{what} is missing: expected the file {path}")
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise Lang2PolicyError(f"{what} ({path}) is not a readable parquet file: {exc}") from exc


def require_columns(table: pa.Table, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise Lang2PolicyError(f"{what} lacks the columns {missing}; it has {table.column_names}")


def vector_column(table: pa.Table, name: str, width: int, what: str) -> np.ndarray:
    """A list column as a float32 ``(rows, width)`` array; an error if a row has another length."""
    column = table.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(column.type) or pa.types.is_list(column.type):
        lengths = np.asarray(pc.list_value_length(column).fill_null(-1))
        if len(lengths) and (lengths != width).any():
            bad = sorted({int(v) for v in lengths[lengths != width]})
            raise Lang2PolicyError(
                f"{what}: column {name!r} has rows of length {bad}; info.json says {width}"
            )
        values = np.asarray(column.flatten().to_numpy(zero_copy_only=False), np.float32)
        return values.reshape(len(column), width)
    raise Lang2PolicyError(f"{what}: column {name!r} is {column.type}, expected a list of floats")
