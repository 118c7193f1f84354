"""``concat_datasets``: several loaded datasets as one, for training on demonstrations and scene
views recorded separately (``lang2policy train vla --dataset A B``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset.lerobot_units import in_our_units
from lang2policy.vla.dataset.meta import load_meta
from lang2policy.vla.dataset.reader import DemoDataset, load_dataset
from lang2policy.vla.spec.schema import IMAGE_SIZE, image_key

_ROWS = ("state", "action", "episode_index", "frame_index", "task_index", "timestamp")


@dataclass(frozen=True)
class ForeignData:
    """How ``train vla`` reads a dataset recorded elsewhere (by LeRobot, on a real arm).

    ``image_size``: every camera's frames fitted to this square (``fit_image``); None: square
    frames as recorded, others fitted to ``IMAGE_SIZE``. ``calibration``: the arm's calibration
    that converts a LeRobot dataset's units to ours (``lerobot_units``); ``body_units``: which
    of LeRobot's body units it holds ("degrees", LeRobot 0.6's default, or "range100")."""

    image_size: int | None = None
    calibration: Path | None = None
    body_units: str = "degrees"

    def fit_size(self, path: Path, cameras: Sequence[str] | None) -> int | None:
        """The square the frames of the dataset at ``path`` are fitted to, None to keep them."""
        if self.image_size is not None:
            return self.image_size
        meta = load_meta(Path(path))
        shapes = [
            meta.info["features"][image_key(camera)]["shape"]
            for camera in (meta.cameras if cameras is None else cameras)
            if camera in meta.cameras
        ]
        return IMAGE_SIZE if any(shape[0] != shape[1] for shape in shapes) else None


def load_datasets(
    paths: Sequence[Path],
    cameras: Sequence[str] | None = None,
    from_first_correction: bool = False,
    foreign: ForeignData | None = None,
) -> DemoDataset:
    """One dataset, or several (demonstrations and scene views, corrections and replayed
    demonstrations) combined into one, each episode marked with the position of the dataset
    it came from (``source``, which ``--mix`` counts); only ``cameras`` are decoded (all when
    None). ``from_first_correction``: the corrected datasets among them keep each episode
    from its first correction on (``interventions``); at least one must be corrections.
    ``foreign``: how to fit other cameras' frames and convert LeRobot's units (default: frames
    that are not square fitted to ``IMAGE_SIZE``; a LeRobot dataset then needs a calibration)."""
    foreign = foreign or ForeignData()
    parts = [
        in_our_units(
            load_dataset(path, cameras, foreign.fit_size(path, cameras)),
            foreign.calibration,
            foreign.body_units,
        )
        for path in paths
    ]
    if from_first_correction:
        parts = _trim_corrections(parts)
    if len(parts) == 1:
        return parts[0]
    for number, part in enumerate(parts):
        for episode in part.episodes:
            episode["source"] = number
    return concat_datasets(parts)


def _trim_corrections(parts: list[DemoDataset]) -> list[DemoDataset]:
    """Each corrected dataset from its episodes' first corrections on; the others as they are."""
    from lang2policy.vla.dataset.interventions import CORRECTION, from_first_correction

    if not any(CORRECTION in part.frame_columns for part in parts):
        raise Lang2PolicyError(
            "--from-first-correction: none of the datasets has corrected episodes "
            f"(a '{CORRECTION}' column): {[str(part.root) for part in parts]}"
        )
    trimmed = []
    for part in parts:
        if CORRECTION in part.frame_columns:
            part, dropped = from_first_correction(part)
            print(f"{part.root}: {dropped} frames before the first corrections left out",
                  file=sys.stderr)  # fmt: skip
        trimmed.append(part)
    return trimmed


def concat_datasets(parts: list[DemoDataset]) -> DemoDataset:
    """The datasets one after another: frames, episodes (their rows and indices shifted) and
    tasks (merged, indices remapped). They must have the same fps, cameras, image size, vector
    sizes, and all or none of them the scene state; the first one's info and stats are kept,
    and the own frame columns (``frame_columns``) that every one of them has."""
    if not parts:
        raise Lang2PolicyError("no datasets to combine")
    first = parts[0]
    for other in parts[1:]:
        _check_compatible(first, other)
    tasks: list[str] = []
    episodes: list[dict] = []
    arrays: dict[str, list[np.ndarray]] = {name: [] for name in _ROWS}
    offset = next_index = 0
    for part in parts:
        remap = np.array([_task_number(tasks, text) for text in part.tasks], np.int64)
        shift = next_index - min((int(e["index"]) for e in part.episodes), default=0)
        for episode in part.episodes:
            moved = {"from": episode["from"] + offset, "to": episode["to"] + offset}
            episodes.append({**episode, "index": int(episode["index"]) + shift, **moved})
        for name in _ROWS:
            arrays[name].append(getattr(part, name))
        arrays["task_index"][-1] = remap[part.task_index]
        arrays["episode_index"][-1] = part.episode_index + shift
        next_index = max(e["index"] for e in episodes) + 1
        offset += len(part)
    environment = None
    if first.environment is not None:
        environment = np.concatenate([part.environment for part in parts])
    shared = [name for name in first.frame_columns if all(name in p.frame_columns for p in parts)]
    return replace(
        first,
        frame_columns={
            name: np.concatenate([part.frame_columns[name] for part in parts]) for name in shared
        },
        tasks=tasks,
        episodes=episodes,
        images={c: np.concatenate([p.images[c] for p in parts]) for c in first.images},
        environment=environment,
        **{name: np.concatenate(values) for name, values in arrays.items()},
    )


def _task_number(tasks: list[str], text: str) -> int:
    if text not in tasks:
        tasks.append(text)
    return tasks.index(text)


def _check_compatible(first: DemoDataset, other: DemoDataset) -> None:
    def shape(data: DemoDataset) -> dict:
        return {
            "fps": data.fps,
            "cameras": sorted(data.images),
            "image": {c: data.images[c].shape[1:] for c in sorted(data.images)},
            "state": data.state.shape[1:],
            "action": data.action.shape[1:],
            "scene state": None if data.environment is None else data.environment.shape[1:],
        }

    mine, theirs = shape(first), shape(other)
    if mine != theirs:
        different = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
        raise Lang2PolicyError(
            f"datasets {first.root} and {other.root} cannot be combined; they differ in "
            f"{different}"
        )
