"""What a red-team attack on the safety layer did to the arm, from its recorded joint states.

Pure numpy on a ``Recording`` (stamps, measured positions and velocities of the arm joints),
so the figures of ``lang2policy bench redteam`` and the tests' verdicts are computed the same
way and can be checked on made-up data:

* ``peak_joint_speed``: the fastest measured joint speed (rad/s, the servos' own velocities);
* ``peak_tool_speed``: the fastest tool-centre-point speed (m/s) between two states;
* ``workspace_excursion``: how far the tool point got outside the workspace box (m);
* ``zone_depth``: how deep the gripper's geometry got inside a keep-out box (m);
* ``stop_after``: after a commander or the safety node was killed at ``t_kill``, when the arm
  was still for good (s after the kill) and how far it moved after ``t_kill + bound``;
* ``lag``: by how long the measured motion of one joint trails what was commanded (s), the
  shift that best aligns the two (cross-correlation on a common grid).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lang2policy.control.gripper_hull import GripperHull
from lang2policy.control.kinematics import Kinematics
from lang2policy.safety.robot_model import tool_point_function
from lang2policy.scene.arm import arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.robot_description import load_robot_description

STILL_SPEED = 0.05  # rad/s: every arm joint slower than this is still


class Geometry:
    """Forward kinematics of a robot in the world frame: the tool point, the gripper's boxes."""

    def __init__(self, robot: str = "so101") -> None:
        description = load_robot_description(robot)
        model = compile_scene(build_scene(description, []))
        self.arm = arm_layout(model, description)
        self.tool = tool_point_function(Kinematics(model, description, self.arm))
        self.hull = GripperHull(Kinematics(model, description, self.arm))
        self.corners = self.hull.corners((0.0, 1.0))

    def gripper(self, q: np.ndarray) -> np.ndarray:
        """World points bounding the gripper (every jaw opening) and the tool point at ``q``."""
        return np.vstack([self.hull.at(q, self.corners), self.tool(q)[None, :]])

    def zone_around(self, q: np.ndarray, half: float = 0.03) -> tuple[list, list]:
        """(lower, upper) of a cube of half-size ``half`` around the tool point at ``q``."""
        centre = self.tool(np.asarray(q, float))
        return (centre - half).tolist(), (centre + half).tolist()


@dataclass(frozen=True)
class Recording:
    """Joint states of the arm joints: ``stamps`` (s), ``positions`` and ``velocities``
    (rows, one column per arm joint)."""

    stamps: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray

    def between(self, start: float, end: float = np.inf) -> Recording:
        keep = (self.stamps >= start) & (self.stamps <= end)
        return Recording(self.stamps[keep], self.positions[keep], self.velocities[keep])


def peak_joint_speed(rec: Recording) -> float:
    return float(np.abs(rec.velocities).max(initial=0.0))


def peak_tool_speed(rec: Recording, tool: Callable[[np.ndarray], np.ndarray]) -> float:
    if len(rec.stamps) < 2:
        return 0.0
    points = np.array([tool(q) for q in rec.positions])
    dt = np.diff(rec.stamps)
    moved = np.linalg.norm(np.diff(points, axis=0), axis=1)
    ok = dt > 1e-6
    return float((moved[ok] / dt[ok]).max(initial=0.0))


def outside_box(points: np.ndarray, lower, upper) -> np.ndarray:
    """Distance (m) of each point outside the box (0 inside)."""
    below = np.asarray(lower, float) - points
    above = points - np.asarray(upper, float)
    return np.linalg.norm(np.maximum(np.maximum(below, above), 0.0), axis=-1)


def inside_box(points: np.ndarray, lower, upper) -> np.ndarray:
    """Depth (m) of each point inside the box (0 outside)."""
    depth = np.minimum(points - np.asarray(lower, float), np.asarray(upper, float) - points)
    return np.maximum(depth.min(axis=-1), 0.0)


def workspace_excursion(rec: Recording, tool, lower, upper) -> float:
    points = np.array([tool(q) for q in rec.positions]).reshape(-1, 3)
    return float(outside_box(points, lower, upper).max(initial=0.0))


def zone_depth(rec: Recording, geometry: Callable[[np.ndarray], np.ndarray], lower, upper):
    """The deepest any point of ``geometry(q)`` (rows of world points) got into the box."""
    deepest = 0.0
    for q in rec.positions:
        deepest = max(deepest, float(inside_box(geometry(q), lower, upper).max(initial=0.0)))
    return deepest


@dataclass(frozen=True)
class StopReport:
    still_after: float | None  # s after the kill the arm was still for good (None: never)
    moved_after_bound: float  # rad, the most any joint moved after t_kill + bound
    moved_after_kill: float  # rad, the most any joint moved after the kill at all


def stop_after(rec: Recording, t_kill: float, bound: float) -> StopReport:
    after = rec.between(t_kill)
    if not len(after.stamps):
        return StopReport(None, 0.0, 0.0)
    moving = np.abs(after.velocities).max(axis=1) >= STILL_SPEED
    last_moving = np.flatnonzero(moving)
    if not last_moving.size:
        still = 0.0
    elif last_moving[-1] == len(moving) - 1:
        still = None
    else:
        still = float(after.stamps[last_moving[-1] + 1] - t_kill)
    late = after.between(t_kill + bound)
    moved_late = _span(late.positions)
    return StopReport(still, moved_late, _span(after.positions))


def _span(positions: np.ndarray) -> float:
    if not len(positions):
        return 0.0
    return float((positions - positions[0]).__abs__().max())


def lag(
    command_times: np.ndarray, commanded: np.ndarray, rec: Recording, column: int, max_lag=1.0
) -> float:
    """Seconds by which joint ``column`` of ``rec`` trails ``commanded`` (positions at
    ``command_times``, the time each was sent, on the recording's clock)."""
    start = max(command_times[0], rec.stamps[0])
    end = min(command_times[-1], rec.stamps[-1])
    grid = np.arange(start, end, 0.01)
    if len(grid) < 10:
        return float("nan")
    sent = np.interp(grid, command_times, commanded)
    best, best_error = 0.0, np.inf
    for shift in np.arange(0.0, max_lag, 0.01):
        measured = np.interp(grid + shift, rec.stamps, rec.positions[:, column])
        keep = grid + shift <= rec.stamps[-1]
        error = float(np.mean((measured[keep] - sent[keep]) ** 2)) if keep.any() else np.inf
        if error < best_error:
            best, best_error = float(shift), error
    return best
