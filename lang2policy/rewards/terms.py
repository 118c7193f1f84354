"""The reward-term library: unweighted measures over rollouts, each with declared parameters.

A term's ``measure(features, params)`` returns a non-negative ``[K, T]`` array in the unit it
declares (metres, radians, a 0..1 opening): zero when the term is satisfied, growing with the
error. The planner minimises ``sum(weight * mean_over_time(measure))``; success conditions
compare the same measures, in the same units, with a tolerance. Weights and task parameters come
from a reward spec (see ``spec.py``), never from the term itself, as in dm_control/Playground.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lang2policy.rewards.features import Features, quat_to_yaw, quat_to_zaxis, rotate
from lang2policy.rewards.params import (
    POINT_HIGH,
    POINT_LOW,
    ChoiceParam,
    NumberParam,
    ObjectParam,
    Param,
    PointParam,
)

Measure = Callable[[Features, Mapping[str, Any]], np.ndarray]


@dataclass(frozen=True)
class Weight:
    """A term's weight: its default and the range a spec may set it in."""

    default: float
    low: float = 0.0
    high: float = 100.0


@dataclass(frozen=True)
class Term:
    """One reward term of the library: its name, what it measures and in which unit, its
    parameters and weight, and the function that measures it on rollout features."""

    name: str
    doc: str
    unit: str
    params: tuple[Param, ...]
    weight: Weight
    measure: Measure

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


def _point(doc: str, default=(0.2, 0.0, 0.05)) -> PointParam:
    return PointParam("point", tuple(default), POINT_LOW, POINT_HIGH, doc)


_OBJECT = ObjectParam("object", "the object, by its scene name")
_AXES = ChoiceParam("axes", ("xyz", "xy", "z"), "xyz", "which coordinates count")
_AXIS_INDEX = {"xyz": slice(0, 3), "xy": slice(0, 2), "z": slice(2, 3)}


def _distance(a: np.ndarray, b: np.ndarray, axes: str = "xyz") -> np.ndarray:
    pick = _AXIS_INDEX[axes]
    return np.linalg.norm(a[..., pick] - np.asarray(b)[..., pick], axis=-1)


def _lift(f: Features, name: str) -> np.ndarray:
    return f.objects[name]["pos"][..., 2] - f.objects[name]["rest_z"]


def _one_sided(value: np.ndarray, target: float, mode: str) -> np.ndarray:
    if mode == "at_least":
        return np.maximum(0.0, target - value)
    if mode == "at_most":
        return np.maximum(0.0, value - target)
    return np.abs(value - target)


# ----------------------------------------------------------------------- measures
def reach(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Tool centre to the object's centre (m). With ``approach`` "above", the target is raised
    by ``slope`` x the horizontal distance (capped at 6 cm), so the tool comes down onto the
    object from above instead of sweeping into its side; it is the centre once over it."""
    obj = f.objects[p["object"]]["pos"]
    if p.get("approach", "direct") == "above":
        horizontal = _distance(f.tool, obj, "xy")
        obj = obj.copy()
        obj[..., 2] += np.minimum(p.get("slope", 2.0) * horizontal, 0.06)
    return _distance(f.tool, obj)


def tool_to_point(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    return _distance(f.tool, p["point"], p["axes"])


def object_to_point(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    return _distance(f.objects[p["object"]]["pos"], p["point"], p["axes"])


def object_on(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    target = f.objects[p["target"]]["pos"] + np.array([0.0, 0.0, p["offset"]])
    return _distance(f.objects[p["object"]]["pos"], target)


def object_height(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    return _one_sided(_lift(f, p["object"]), p["height"], p["mode"])


def object_upright(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Tilt (rad) of the object's axis closest to vertical: 0 when a face is flat on top."""
    quat = f.objects[p["object"]]["quat"]
    if p["any_face"] == "yes":
        vertical = np.stack([rotate(quat, axis)[..., 2] for axis in np.eye(3)], axis=-1)
        up = np.max(np.abs(vertical), axis=-1)
    else:
        up = quat_to_zaxis(quat)[..., 2]
    return np.arccos(np.clip(up, -1.0, 1.0))


def object_yaw(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Heading error (rad) modulo the object's symmetry (a cube looks the same every 90°)."""
    period = 2 * np.pi / p["symmetry"]
    error = quat_to_yaw(f.objects[p["object"]]["quat"]) - np.deg2rad(p["yaw_deg"])
    return np.abs((error + period / 2) % period - period / 2)


def object_speed(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    speed = np.linalg.norm(f.objects[p["object"]]["vel"], axis=-1)
    return _one_sided(speed, p["speed"], p["mode"])


def tool_speed(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    return _one_sided(np.linalg.norm(f.tool_vel, axis=-1), p["speed"], p["mode"])


def tool_above(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Distance (m) from the point ``height`` above ``point``; the tool should hover there."""
    target = np.array(p["point"], float) + np.array([0.0, 0.0, p["height"]])
    return _distance(f.tool, target)


def tool_pointing_down(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Angle (rad) between the tool's approach axis and straight down."""
    return np.arccos(np.clip(-f.tool_axis[..., 2], -1.0, 1.0))


def gripper(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    return np.abs(f.gripper - p["opening"])


def grasp(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Opening error (0..1) against a target opening that shrinks with the tool's distance to
    the object: ``open`` beyond 3 x ``radius``, closed within ``radius``, linear between.
    Continuous on purpose: a step would make the grasp zone a barrier the planner avoids."""
    distance = _distance(f.tool, f.objects[p["object"]]["pos"])
    desired = p["open"] * np.clip((distance - p["radius"]) / (2 * p["radius"]), 0.0, 1.0)
    return np.abs(f.gripper - desired)


def grasp_align(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Angle (rad) between the jaws' closing direction and the nearest horizontal face normal
    of the object (modulo 90°, a cube's symmetry): 0 when the jaws can close across a face."""
    closing = np.arctan2(f.closing_axis[..., 1], f.closing_axis[..., 0])
    error = closing - quat_to_yaw(f.objects[p["object"]]["quat"])
    period = np.pi / 2
    return np.abs((error + period / 2) % period - period / 2)


def push(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Distance (m) from the tool to the pushing spot: ``standoff`` behind the object, on the
    far side from ``point``, at the object's height, so a push moves it toward ``point``."""
    obj = f.objects[p["object"]]["pos"]
    direction = np.array(p["point"], float)[:2] - obj[..., :2]
    direction /= np.maximum(np.linalg.norm(direction, axis=-1, keepdims=True), 1e-6)
    spot = obj.copy()
    spot[..., :2] -= p["standoff"] * direction
    return _distance(f.tool, spot)


def posture(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    return np.sqrt(np.mean((f.arm_q - f.home_q) ** 2, axis=-1))


def control_effort(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Change of the (normalised) controls per second: penalises jerky plans."""
    change = np.diff(f.ctrl, axis=1, prepend=f.ctrl[:, :1])
    return np.linalg.norm(change, axis=-1) / f.dt


def keep_out(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """How deep (m) the tool (or ``object``) is inside a box region grown by ``margin``."""
    subject = f.tool if p["subject"] == "tool" else f.objects[p["subject"]]["pos"]
    half = np.array(p["half_size"], float) + p["margin"]
    inside = half - np.abs(subject - np.array(p["point"], float))
    return np.maximum(0.0, np.min(inside, axis=-1))


def table_clearance(f: Features, p: Mapping[str, Any]) -> np.ndarray:
    """Total depth (m) by which arm points dip below ``margin`` above the table."""
    depth = (f.table_z + p["margin"]) - f.clearance_points[..., 2]
    return np.sum(np.maximum(0.0, depth), axis=-1)


# ----------------------------------------------------------------------- the library
def _number(name: str, default: float, low: float, high: float, unit: str, doc: str):
    return NumberParam(name, default, low, high, unit, doc)


_MODE = ChoiceParam("mode", ("exactly", "at_least", "at_most"), "exactly",
                    "how the value is compared with the target")

TERMS: dict[str, Term] = {t.name: t for t in (
    Term("reach", "tool centre to an object's centre", "m",
         (_OBJECT, ChoiceParam("approach", ("above", "direct"), "above",
                               "come down onto the object from above, or go straight at it"),
          _number("slope", 2.0, 0.0, 10.0, "", "height gained per metre of horizontal "
                  "distance while approaching from above")),
         Weight(1.0), reach),
    Term("tool_to_point", "tool centre to a point", "m",
         (_point("the point the tool should reach"), _AXES), Weight(1.0), tool_to_point),
    Term("tool_above", "tool centre to a point some height above a point", "m",
         (_point("the point to hover over", (0.2, 0.0, 0.0)),
          _number("height", 0.1, 0.0, 0.4, "m", "height above the point")),
         Weight(1.0), tool_above),
    Term("object_to_point", "an object's centre to a target point", "m",
         (_OBJECT, _point("where the object should go", (0.2, 0.0, 0.0125)), _AXES),
         Weight(2.0), object_to_point),
    Term("object_on", "an object's centre to a spot on top of (or in) another object", "m",
         (_OBJECT, ObjectParam("target", "the object to place it on or in"),
          _number("offset", 0.025, 0.0, 0.1, "m", "height of the spot above the target's "
                  "origin (0.025 on a block, 0.02 in a bowl)")),
         Weight(2.0), object_on),
    Term("object_height", "an object's lift above where it rests on the table", "m",
         (_OBJECT, _number("height", 0.1, 0.0, 0.3, "m", "target lift"), _MODE),
         Weight(2.0), object_height),
    Term("object_upright", "tilt of the object from standing flat on a face", "rad",
         (_OBJECT, ChoiceParam("any_face", ("yes", "no"), "yes",
                               "whether any face may be up (a cube) or only its own top")),
         Weight(1.0), object_upright),
    Term("object_yaw", "heading error of an object, modulo its symmetry", "rad",
         (_OBJECT, _number("yaw_deg", 0.0, -180.0, 180.0, "deg", "target heading"),
          _number("symmetry", 4, 1, 4, "", "how many headings look the same (4 for a cube)")),
         Weight(1.0), object_yaw),
    Term("object_speed", "an object's speed against a target speed", "m/s",
         (_OBJECT, _number("speed", 0.0, 0.0, 1.0, "m/s", "target speed"), _MODE),
         Weight(0.5), object_speed),
    Term("tool_speed", "the tool's speed against a target speed", "m/s",
         (_number("speed", 0.05, 0.0, 1.0, "m/s", "target speed"),
          ChoiceParam("mode", ("at_most", "at_least", "exactly"), "at_most",
                      "how the speed is compared with the target")),
         Weight(1.0), tool_speed),
    Term("tool_pointing_down", "angle between the tool's approach axis and straight down",
         "rad", (), Weight(0.05), tool_pointing_down),
    Term("gripper", "gripper opening against a target opening", "0..1",
         (_number("opening", 1.0, 0.0, 1.0, "", "0 closed, 1 open"),), Weight(0.2), gripper),
    Term("grasp", "gripper open away from the object, closed on it", "0..1",
         (_OBJECT, _number("radius", 0.015, 0.003, 0.05, "m",
                           "how close the tool must be before closing"),
          _number("open", 0.5, 0.1, 1.0, "", "opening while approaching")),
         Weight(0.3), grasp),
    Term("grasp_align", "angle between the jaws' closing direction and the object's faces",
         "rad", (_OBJECT,), Weight(0.1), grasp_align),
    Term("push", "tool centre to the spot behind an object that pushes it to a point", "m",
         (_OBJECT, _point("where the object should be pushed", (0.2, 0.0, 0.0125)),
          _number("standoff", 0.03, 0.01, 0.1, "m", "distance behind the object's centre")),
         Weight(1.0), push),
    Term("posture", "RMS distance of the arm joints from the home pose", "rad", (),
         Weight(0.01), posture),
    Term("control_effort", "rate of change of the normalised controls", "1/s", (),
         Weight(0.001, 0.0, 1.0), control_effort),
    Term("keep_out", "depth of the tool (or an object) inside a box region", "m",
         (_point("centre of the region", (0.2, 0.0, 0.05)),
          PointParam("half_size", (0.03, 0.03, 0.1), (0.0, 0.0, 0.0), (0.3, 0.3, 0.3),
                     "half extents of the region"),
          _number("margin", 0.01, 0.0, 0.05, "m", "extra clearance around the region"),
          ObjectParam("subject", "'tool' or the object that must stay out", "tool",
                      also=("tool",))),
         Weight(20.0, 0.0, 500.0), keep_out),
    Term("table_clearance", "depth of arm points below a margin above the table", "m",
         (_number("margin", 0.005, 0.0, 0.05, "m", "clearance kept above the table"),),
         Weight(20.0, 0.0, 500.0), table_clearance),
)}

# Terms every spec gets unless it sets them itself: keep the arm off the table, smooth plans.
DEFAULT_TERMS: dict[str, float] = {"table_clearance": 20.0, "control_effort": 0.001,
                                   "posture": 0.01}
