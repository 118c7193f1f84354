"""Feature statistics as LeRobot keeps them in ``meta/stats.json`` (its ``compute_stats``).

Per feature: ``min``, ``max``, ``mean``, ``std`` (population, over all frames), ``count``
(``[frames]``) and the quantiles ``q01``, ``q10``, ``q50``, ``q90``, ``q99`` that LeRobot's
quantile normalisers read (pi0.5 normalises with q01/q99). Vectors keep one value per element;
images one per channel, shape ``(3, 1, 1)``, with pixels scaled to 0..1. Stats are computed per
episode as episodes arrive and pooled at the end (the parallel variance formula, which gives
the statistics of all frames without holding them; quantiles as LeRobot pools them, the
episodes' quantiles weighted by their frames); the writer uses every frame of every image,
where LeRobot samples a hundred or so per episode (96x96 frames are cheap).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Stats = dict[str, np.ndarray]  # one feature's: min, max, mean, std, count
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
STAT_NAMES = ("min", "max", "mean", "std", "count", *QUANTILES)


def vector_stats(values: np.ndarray) -> Stats:
    """Stats of ``(frames,)`` or ``(frames, dim)`` values (scalars keep a length-1 shape)."""
    array = np.asarray(values, dtype=np.float64)
    keepdims = array.ndim == 1
    return {
        "min": np.min(array, axis=0, keepdims=keepdims),
        "max": np.max(array, axis=0, keepdims=keepdims),
        "mean": np.mean(array, axis=0, keepdims=keepdims),
        "std": np.std(array, axis=0, keepdims=keepdims),
        "count": np.array([len(array)]),
        **{
            name: np.quantile(array, q, axis=0, keepdims=keepdims)
            for name, q in QUANTILES.items()
        },
    }


def image_stats(frames: np.ndarray) -> Stats:
    """Per-channel stats of uint8 ``(frames, H, W, 3)`` images, in 0..1, shaped ``(3, 1, 1)``."""
    pixels = np.asarray(frames).reshape(-1, frames.shape[-1])
    mean = pixels.mean(axis=0, dtype=np.float64)
    std = pixels.std(axis=0, dtype=np.float64)

    def channels(values: np.ndarray) -> np.ndarray:
        return (np.asarray(values, dtype=np.float64) / 255.0).reshape(-1, 1, 1)

    return {
        "min": channels(pixels.min(axis=0)),
        "max": channels(pixels.max(axis=0)),
        "mean": channels(mean),
        "std": channels(std),
        "count": np.array([len(frames)]),
        **{name: channels(_channel_quantile(pixels, q)) for name, q in QUANTILES.items()},
    }


def _channel_quantile(pixels: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile of each channel of uint8 ``(N, 3)`` pixels, from their histogram (a
    sort of every pixel would cost seconds per episode)."""
    result = []
    for channel in range(pixels.shape[1]):
        counts = np.bincount(pixels[:, channel], minlength=256)
        position = q * (len(pixels) - 1)  # numpy's "linear": between the two nearest ranks
        cumulative = np.cumsum(counts)
        low = int(np.searchsorted(cumulative, np.floor(position) + 1))
        high = int(np.searchsorted(cumulative, np.ceil(position) + 1))
        result.append(low + (position - np.floor(position)) * (high - low))
    return np.asarray(result)


def pool(parts: Sequence[Stats]) -> Stats:
    """The stats of the union of the frames behind ``parts`` (LeRobot's ``aggregate_stats``)."""
    counts = np.array([float(part["count"][0]) for part in parts])
    total = counts.sum()
    means = np.stack([part["mean"] for part in parts])
    weights = counts.reshape(-1, *([1] * (means.ndim - 1)))
    mean = (means * weights).sum(axis=0) / total
    variances = np.stack([part["std"] ** 2 for part in parts])
    variance = ((variances + (means - mean) ** 2) * weights).sum(axis=0) / total
    pooled = {
        "min": np.min(np.stack([part["min"] for part in parts]), axis=0),
        "max": np.max(np.stack([part["max"] for part in parts]), axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": np.array([int(total)]),
    }
    for name in QUANTILES:  # LeRobot's pooling: the parts' quantiles weighted by their frames
        if all(name in part for part in parts):
            values = np.stack([part[name] for part in parts])
            pooled[name] = (values * weights).sum(axis=0) / total
    return pooled


def pool_features(episodes: Sequence[dict[str, Stats]]) -> dict[str, Stats]:
    """Per-feature ``pool`` over episodes that each have stats for the same features."""
    if not episodes:
        return {}
    return {key: pool([episode[key] for episode in episodes]) for key in episodes[0]}


def to_json(stats: dict[str, Stats]) -> dict[str, dict[str, Any]]:
    """Nested lists, as stats.json holds them."""
    return {key: {name: value.tolist() for name, value in ft.items()} for key, ft in stats.items()}


def to_columns(episode_stats: dict[str, Stats]) -> dict[str, Any]:
    """Per-episode stats as LeRobot stores them in the episodes table: ``stats/<key>/<stat>``."""
    return {
        f"stats/{key}/{name}": value.tolist()
        for key, feature in episode_stats.items()
        for name, value in feature.items()
    }


def from_columns(row: dict[str, Any]) -> dict[str, Stats]:
    """The per-episode stats an episodes-table row holds (``to_columns``'s inverse)."""
    nested: dict[str, dict[str, Any]] = {}
    for column, value in row.items():
        if column.startswith("stats/"):
            key, name = column.removeprefix("stats/").rsplit("/", 1)
            nested.setdefault(key, {})[name] = value
    return from_json(nested)


def from_json(data: dict[str, dict[str, Any]]) -> dict[str, Stats]:
    """stats.json's lists as numpy arrays (float64; ``count`` int64)."""
    return {
        key: {
            name: np.asarray(value, dtype=np.int64 if name == "count" else np.float64)
            for name, value in ft.items()
        }
        for key, ft in data.items()
        if isinstance(ft, dict)
    }
