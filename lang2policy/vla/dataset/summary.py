"""What a dataset holds, from its metadata alone (no video decoded): counts, cameras, success
per task family, and the state/action statistics. ``lang2policy dataset info`` prints it."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from lang2policy.vla.dataset.lerobot_units import lerobot_names
from lang2policy.vla.dataset.meta import DatasetMeta
from lang2policy.vla.spec.schema import ACTION_KEY, STATE_KEY


def summarize(meta: DatasetMeta) -> dict[str, Any]:
    """A JSON-able summary of ``meta`` (see the module docstring)."""
    features = meta.info["features"]
    summary: dict[str, Any] = {
        "root": str(meta.root),
        "codebase_version": meta.info["codebase_version"],
        "robot_type": meta.info.get("robot_type"),
        "fps": meta.fps,
        "episodes": len(meta.episodes),
        "frames": meta.total_frames,
        "seconds": round(meta.total_frames / meta.fps, 1),
        "tasks": len(meta.tasks),
        "cameras": {
            camera: features[key]["shape"][:2]
            for camera, key in zip(meta.cameras, meta.video_keys, strict=True)
        },
        "episode_columns": meta.extra_columns(),
        "units": "lerobot" if lerobot_names(features) else "ours",
    }
    if "success" in summary["episode_columns"]:
        summary["success"] = success_rates(meta.episodes)
    if "split" in summary["episode_columns"]:
        summary["splits"] = dict(Counter(str(row["split"]) for row in meta.episodes))
    summary["stats"] = {
        key: _vector_stats(meta.stats[key], features[key].get("names"))
        for key in (STATE_KEY, ACTION_KEY)
        if key in meta.stats
    }
    return summary


def success_rates(episodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"all" | family: {"episodes", "succeeded", "rate"}}`` over episodes whose ``success``
    is known (None: not recorded); per ``family`` when the column is there."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for row in episodes:
        if row.get("success") is None:
            continue
        groups["all"].append(bool(row["success"]))
        if row.get("family") is not None:
            groups[str(row["family"])].append(bool(row["success"]))
    return {
        name: {
            "episodes": len(values),
            "succeeded": sum(values),
            "rate": round(sum(values) / len(values), 3),
        }
        for name, values in sorted(groups.items(), key=lambda item: item[0] != "all")
    }


def _vector_stats(feature: dict[str, np.ndarray], names: Any) -> dict[str, Any]:
    labels = names if isinstance(names, list) else None
    rows = {}
    for stat in ("min", "max", "mean", "std"):
        values = np.asarray(feature[stat], float).reshape(-1)
        rows[stat] = [round(float(v), 4) for v in values]
    return {"names": labels, **rows}


UNITS_TEXT = {
    "ours": "  units: ours (joints in rad about the model's zero pose, gripper opening 0..1)",
    "lerobot": "  units: LeRobot's (<motor>.pos: degrees about each range's middle, gripper "
    "0..100); train vla converts them with the arm's --calibration FILE",
}


def format_text(summary: dict[str, Any]) -> str:
    """The summary as lines a person reads."""
    cameras = ", ".join(f"{c} {h}x{w}" for c, (h, w) in summary["cameras"].items())
    lines = [
        f"{summary['root']}: LeRobotDataset {summary['codebase_version']}, robot "
        f"{summary['robot_type']}, {summary['fps']} fps",
        f"  {summary['episodes']} episodes, {summary['frames']} frames "
        f"({summary['seconds']} s), {summary['tasks']} tasks",
        f"  cameras: {cameras or 'none'}",
    ]
    lines.append(UNITS_TEXT[summary["units"]])
    if summary["episode_columns"]:
        lines.append(f"  episode columns: {', '.join(summary['episode_columns'])}")
    if "splits" in summary:
        lines.append(
            "  splits: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["splits"].items()))
        )
    for name, rate in summary.get("success", {}).items():
        lines.append(
            f"  success {name}: {rate['succeeded']}/{rate['episodes']} ({rate['rate']:.0%})"
        )
    for key, stats in summary["stats"].items():
        lines.append(f"  {key}:")
        names = stats["names"] or [str(i) for i in range(len(stats["mean"]))]
        for i, name in enumerate(names):
            lines.append(
                f"    {name:<14} min {stats['min'][i]:8.3f}  max {stats['max'][i]:8.3f}  "
                f"mean {stats['mean'][i]:8.3f}  std {stats['std'][i]:8.3f}"
            )
    return "\n".join(lines)
