"""One whole episode as the writer receives it, and the checks it must pass before any of it is
written (a bad episode is refused whole, so a dataset never holds half of one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lang2policy.errors import Lang2PolicyError


@dataclass
class EpisodeRecord:
    """``T`` frames of one episode: the instruction, each camera's uint8 ``(T, H, W, 3)``
    images, float32 ``(T, dim)`` state and action, the caller's episode columns, and optionally
    the privileged scene state ``(T, env dim)`` (``observation.environment_state``), and the
    writer's own per-frame columns (``frames``: ``(T, dim)`` float vectors, ``(T,)`` integers)."""

    task: str
    images: dict[str, np.ndarray]
    state: np.ndarray
    action: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)
    environment: np.ndarray | None = None
    frames: dict[str, np.ndarray] = field(default_factory=dict)  # the writer's frame columns

    @property
    def length(self) -> int:
        return len(self.state)


def check_record(
    record: EpisodeRecord,
    cameras: Sequence[str],
    image_size: int,
    dim: int,
    extra_columns: Sequence[str],
    environment_dim: int = 0,
) -> None:
    """Raise a ``Lang2PolicyError`` saying what is wrong with ``record`` and what was expected
    (``environment_dim``: the scene-state width the dataset has, 0 for none)."""
    if not isinstance(record.task, str) or not record.task.strip():
        raise Lang2PolicyError(f"an episode's task must be non-empty text, got {record.task!r}")
    _check_vectors(record, dim)
    _check_environment(record, environment_dim)
    _check_images(record, cameras, image_size)
    unknown = sorted(set(record.extra) - set(extra_columns))
    missing = [name for name in extra_columns if name not in record.extra]
    if unknown or missing:
        raise Lang2PolicyError(
            f"episode columns must be exactly {list(extra_columns)} (the writer's "
            f"extra_episode_columns); unknown: {unknown}, missing: {missing}"
        )
    bad = {k: type(v).__name__ for k, v in record.extra.items() if not _plain(v)}
    if bad:
        raise Lang2PolicyError(
            f"episode columns must hold bool, int, float, str or None; got {bad}"
        )


def _check_vectors(record: EpisodeRecord, dim: int) -> None:
    for name in ("state", "action"):
        values = np.asarray(getattr(record, name))
        if values.ndim != 2 or values.shape[1] != dim or len(values) == 0:
            raise Lang2PolicyError(
                f"an episode's {name} must be (T, {dim}) with T >= 1, got shape {values.shape}"
            )
        if not np.isfinite(values).all():
            raise Lang2PolicyError(f"an episode's {name} holds NaN or inf values")
    if len(record.action) != len(record.state):
        raise Lang2PolicyError(
            f"an episode's state has {len(record.state)} frames but its action "
            f"{len(record.action)}; both need one row per frame"
        )


def _check_environment(record: EpisodeRecord, dim: int) -> None:
    if dim == 0:
        if record.environment is not None:
            raise Lang2PolicyError(
                "an episode has environment state but the writer has no environment_names"
            )
        return
    values = None if record.environment is None else np.asarray(record.environment)
    if values is None or values.shape != (record.length, dim):
        shape = None if values is None else values.shape
        raise Lang2PolicyError(
            f"an episode's environment state must be ({record.length}, {dim}), got {shape}"
        )
    if not np.isfinite(values).all():
        raise Lang2PolicyError("an episode's environment state holds NaN or inf values")


def _check_images(record: EpisodeRecord, cameras: Sequence[str], image_size: int) -> None:
    if set(record.images) != set(cameras):
        raise Lang2PolicyError(
            f"an episode needs images of the cameras {list(cameras)}, got {sorted(record.images)}"
        )
    expected = (record.length, image_size, image_size, 3)
    for camera in cameras:
        frames = record.images[camera]
        if not isinstance(frames, np.ndarray) or frames.dtype != np.uint8:
            kind = getattr(frames, "dtype", type(frames).__name__)
            raise Lang2PolicyError(f"camera {camera!r}: images must be uint8, got {kind}")
        if frames.shape != expected:
            raise Lang2PolicyError(
                f"camera {camera!r}: images must be {expected} (one per frame), got {frames.shape}"
            )


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str, np.bool_, np.number))


def check_frame_columns(
    record: EpisodeRecord, vectors: dict[str, tuple[str, ...]], indices: Sequence[str]
) -> dict[str, np.ndarray]:
    """``record.frames`` as the writer's columns: exactly the ``vectors`` ((T, len(names))
    finite floats) and ``indices`` ((T,) integers); an error says what differs."""
    wanted = [*vectors, *indices]
    if sorted(record.frames) != sorted(wanted):
        raise Lang2PolicyError(
            f"an episode's frame columns must be exactly {wanted}, got {sorted(record.frames)}"
        )
    columns: dict[str, np.ndarray] = {}
    for name, names in vectors.items():
        values = np.asarray(record.frames[name])
        if values.shape != (record.length, len(names)) or not np.isfinite(values).all():
            raise Lang2PolicyError(
                f"frame column {name!r} must be finite ({record.length}, {len(names)}), got "
                f"shape {values.shape}"
            )
        columns[name] = values.astype(np.float32)
    for name in indices:
        values = np.asarray(record.frames[name])
        if values.shape != (record.length,) or not np.issubdtype(values.dtype, np.integer):
            raise Lang2PolicyError(
                f"frame column {name!r} must be ({record.length},) integers, got "
                f"{values.dtype} {values.shape}"
            )
        columns[name] = values.astype(np.int64)
    return columns
