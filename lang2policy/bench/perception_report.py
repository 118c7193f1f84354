"""The figures, table and pictures of ``lang2policy bench perception`` (pure, no ROS).

``frame_record`` compares one frame's perceived object set with the simulator's truth;
``summarise`` turns a list of them into rates and errors per kind and colour; ``format_text``
prints the table against the targets of issue 34; ``overlay`` draws a frame's detections and
the true poses for a person to judge.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

# Targets of issue 34 (2-core machine, SO-101): per level, at rest.
TARGETS = {
    "mild": {"detection": 0.98, "phantoms": 0, "p90_cm": 1.0},
    "hard": {"p90_cm": 2.0},
    "fps_one_core": 10.0,
}


def frame_record(objects, truth: dict, visible: dict[str, int], min_px: int) -> dict:
    """One frame: per object on the table whether it was expected (visible), found, and how far
    off; the names perceived that are not on the table (phantoms)."""
    found = {o.name: o for o in objects}
    rows = []
    for name, (position, yaw, kind) in sorted(truth.items()):
        row = {"name": name, "kind": kind, "color": name.split()[0]}
        row["visible"] = visible.get(name, 0) >= min_px
        seen = found.get(name)
        row["found"] = seen is not None
        if seen is not None:
            row["error_cm"] = 100 * math.dist(seen.position[:2], position[:2])
            if kind == "block":
                row["yaw_deg"] = yaw_error_deg(seen.quat, yaw)
        rows.append(row)
    phantoms = sorted(set(found) - set(truth))
    return {"objects": rows, "phantoms": phantoms}


def yaw_error_deg(found_quat, true_yaw: float) -> float:
    """Degrees between two block yaws, modulo the cube's 90 degree symmetry."""
    w, _, _, z = found_quat
    difference = 2 * math.atan2(z, w) - true_yaw
    return abs(math.degrees((difference + math.pi / 4) % (math.pi / 2) - math.pi / 4))


def summarise(records: list[dict], moving: bool = False) -> dict:
    """Rates and errors over ``records`` (frames), overall and per kind and colour."""
    if not records:
        return {"frames": 0}
    rows = [row for record in records for row in record["objects"]]
    summary = {"frames": len(records), **_figures(rows)}
    summary["phantoms"] = sum(len(r["phantoms"]) for r in records)
    summary["phantom_names"] = sorted({n for r in records for n in r["phantoms"]})
    summary["by_kind"] = {
        k: _figures([r for r in rows if r["kind"] == k]) for k in _keys(rows, "kind")
    }
    summary["by_color"] = {
        c: _figures([r for r in rows if r["color"] == c]) for c in _keys(rows, "color")
    }
    wall = [r["wall_s"] for r in records]
    cpu = [r["cpu_s"] for r in records]
    summary["fps"] = len(wall) / sum(wall) if sum(wall) > 0 else None
    summary["cpu_ms_per_frame"] = 1000 * float(np.mean(cpu))
    summary["fps_one_core"] = 1.0 / float(np.mean(cpu)) if np.mean(cpu) > 0 else None
    if moving:  # the table's object set is constant during an episode: any change is a flicker
        summary["set_changes"] = sum(1 for r in records[1:] if r["changed"])
    return summary


def _keys(rows: list[dict], key: str) -> list[str]:
    return sorted({r[key] for r in rows})


def _figures(rows: list[dict]) -> dict:
    expected = [r for r in rows if r["visible"]]
    found = [r for r in expected if r["found"]]
    errors = [r["error_cm"] for r in rows if r["found"]]
    yaws = [r["yaw_deg"] for r in rows if "yaw_deg" in r]
    return {
        "expected": len(expected),
        "detected": len(found),
        "detection": len(found) / len(expected) if expected else None,
        "hidden_found": sum(1 for r in rows if r["found"] and not r["visible"]),
        "error_mean_cm": float(np.mean(errors)) if errors else None,
        "error_p90_cm": float(np.percentile(errors, 90)) if errors else None,
        "yaw_mean_deg": float(np.mean(yaws)) if yaws else None,
        "yaw_p90_deg": float(np.percentile(yaws, 90)) if yaws else None,
    }


# ----------------------------------------------------------------- the table
def rows(result: dict) -> list[tuple[str, str, str, bool | None]]:
    """(name, value, target, passed) per line of the table."""
    lines = []
    for level in result["levels"]:
        name, rest, moving = level["level"], level["rest"], level["moving"]
        target = TARGETS.get(name, {})
        lines.append(_detection_row(name, rest, target))
        lines.append(_baseline_row(name, level.get("rest_scene_palette") or {}))
        lines.append(_phantom_row(name, rest, target))
        lines.append(_error_row(name, rest, target))
        yaw = f"{_num(rest.get('yaw_mean_deg'))} / {_num(rest.get('yaw_p90_deg'))} deg"
        lines.append((f"{name}: block yaw error mean / p90", yaw, "-", None))
        lines.append(_fps_row(name, rest, moving))
        if moving.get("frames"):
            lines.append(_moving_row(name, moving))
    return lines


def _baseline_row(name: str, base: dict):
    """The same frames with the scene's palette: what the colour calibration adds."""
    value = (
        f"{_pct(base.get('detection'))} ({base.get('detected', 0)} of "
        f"{base.get('expected', 0)}), {base.get('phantoms', 0)} phantoms, "
        f"p90 {_num(base.get('error_p90_cm'))} cm"
    )
    return (f"{name}: baseline, scene palette (not calibrated)", value, "-", None)


def _fps_row(name: str, rest: dict, moving: dict):
    """Frames per second on one core, judged on the moving episodes' stream of frames (as the
    perception node sees them); the layouts at rest, each a new light and a new palette
    lookup to fill, are slower and shown beside it."""
    stream = moving if moving.get("frames") else rest
    fps = stream.get("fps_one_core")
    value = f"{_num(fps, 1)} ({_num(stream.get('cpu_ms_per_frame'), 1)} ms CPU per frame)"
    if stream is moving:
        value += f"; at rest, each frame a new light: {_num(rest.get('fps_one_core'), 1)}"
    return (
        f"{name}: frames per second on one core",
        value,
        f">= {TARGETS['fps_one_core']:g}",
        fps is not None and fps >= TARGETS["fps_one_core"],
    )


def _detection_row(name: str, rest: dict, target: dict):
    rate = rest.get("detection")
    want = target.get("detection")
    value = f"{_pct(rate)} ({rest.get('detected', 0)} of {rest.get('expected', 0)} visible)"
    passed = None if want is None else rate is not None and rate >= want
    return (f"{name}: detected at rest", value, "-" if want is None else f">= {_pct(want)}", passed)


def _phantom_row(name: str, rest: dict, target: dict):
    count, want = rest.get("phantoms", 0), target.get("phantoms")
    value = f"{count}" + (f" ({', '.join(rest['phantom_names'])})" if count else "")
    passed = None if want is None else count <= want
    return (
        f"{name}: phantom objects at rest",
        value,
        "-" if want is None else f"<= {want}",
        passed,
    )


def _error_row(name: str, rest: dict, target: dict):
    p90, want = rest.get("error_p90_cm"), target.get("p90_cm")
    value = f"{_num(rest.get('error_mean_cm'))} / {_num(p90)} cm"
    passed = None if want is None else p90 is not None and p90 <= want
    return (
        f"{name}: position error mean / p90",
        value,
        "-" if want is None else f"p90 <= {want:g} cm",
        passed,
    )


def _moving_row(name: str, moving: dict):
    value = (
        f"detected {_pct(moving.get('detection'))}, "
        f"error p90 {_num(moving.get('error_p90_cm'))} cm, "
        f"phantoms {moving.get('phantoms', 0)}, set changed {moving.get('set_changes', 0)} times "
        f"in {moving['frames']} frames"
    )
    return (f"{name}: while the arm moves", value, "-", None)


def format_text(result: dict) -> str:
    table = rows(result)
    width = max(len(r[0]) for r in table) if table else 10
    head = (
        f"lang2policy bench perception: {result['robot']}, camera {result['camera']} "
        f"{result['size']}x{result['size']}, {result['layouts']} layouts per level"
    )
    lines = [head]
    for name, value, target, passed in table:
        mark = "-" if passed is None else ("PASS" if passed else "FAIL")
        lines.append(f"  {name:<{width}}  {mark:<4}  {value}  [{target}]")
    for level in result["levels"]:
        kinds = level["rest"].get("by_kind", {})
        colors = level["rest"].get("by_color", {})
        parts = [
            f"{k} {_pct(v['detection'])} p90 {_num(v['error_p90_cm'])} cm" for k, v in kinds.items()
        ]
        parts += [f"{c} {_pct(v['detection'])}" for c, v in colors.items()]
        lines.append(f"  {level['level']} per kind / colour: {'; '.join(parts)}")
    if result.get("pictures"):
        lines.append(f"  pictures: {result['pictures']} (PNG per layout, MP4 per moving episode)")
    lines.append(f"  overall: {'PASS' if all_passed(result) else 'FAIL'}")
    return "\n".join(lines)


def all_passed(result: dict) -> bool:
    return all(passed is not False for *_, passed in rows(result))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# ----------------------------------------------------------------- pictures
def overlay(rgb: np.ndarray, camera, objects, truth: dict) -> np.ndarray:
    """``rgb`` with each true pose (red cross) and each detection (green circle and name)."""
    import cv2

    image = np.ascontiguousarray(rgb[..., ::-1])  # BGR for OpenCV drawing
    for position, _yaw, _kind in truth.values():
        u, v = camera.project(np.asarray(position, float)[None])[0]
        cv2.drawMarker(image, (round(u), round(v)), (0, 0, 255), cv2.MARKER_CROSS, 8, 1)
    for obj in objects:
        u, v = camera.project(np.asarray(obj.position, float)[None])[0]
        cv2.circle(image, (round(u), round(v)), 4, (0, 200, 0), 1)
        cv2.putText(image, obj.name, (round(u) + 5, round(v) - 4), cv2.FONT_HERSHEY_PLAIN, 0.7,
                    (0, 255, 0), 1, cv2.LINE_AA)  # fmt: skip
    return image[..., ::-1]


def save_png(path: Path, rgb: np.ndarray) -> None:
    import cv2

    cv2.imwrite(str(path), np.ascontiguousarray(rgb[..., ::-1]))


def save_mp4(path: Path, frames: list[np.ndarray], fps: int) -> None:
    from lang2policy.scene.render import write_mp4

    write_mp4(frames, path, fps)
