"""Joint paths for the tool, planned by IK before the arm moves.

``ToolPaths`` turns tool centre point goals into joint configurations and joint paths: one pose
(``solve``), a straight Cartesian line (``line``), a vertical approach at the first yaw and
tilt that reach (``vertical``), and a transit that keeps the tool clear of the table
(``transit``). Nothing here sends a command: the motion primitives and the push planner both
plan with it, then execute what it returns.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.errors import UnreachableError

LINE_STEP = 0.01  # metres between Cartesian waypoints on straight-line moves
_LEAN_TILTS = np.round(np.arange(-0.6, 1.21, 0.15), 2)  # tilts move_to tries as a fallback
_TOOL_IK_ROUNDS = 4  # position-only IK rounds for the tool centre point (site offset varies)


def _radial(point) -> float:
    """The direction of ``point`` from the base (world z axis through the origin)."""
    return math.atan2(point[1], point[0])


def above(point: np.ndarray, height: float) -> np.ndarray:
    """``point`` raised by ``height`` (metres, world z)."""
    return np.asarray(point, float) + np.array([0.0, 0.0, height])


class ToolPaths:
    """IK planning of tool paths for one arm; ``joints()`` reads the arm's joints now (the seed
    of every plan that starts where the arm is)."""

    def __init__(self, kinematics: Kinematics, joints: Callable[[], np.ndarray]) -> None:
        self.kin = kinematics
        self.joints = joints

    def tool_point(self, q: np.ndarray) -> np.ndarray:
        """Tool centre point (world frame) at joints ``q``."""
        pose = self.kin.forward(np.asarray(q, float))
        return pose.position + pose.rotation() @ self.kin.center_offset

    def solve(self, center, yaw, tilt, q_start, what) -> np.ndarray:
        """Joints that put the tool centre point at ``center`` with ``yaw`` and ``tilt``."""
        rotation = self.kin.tool_rotation(center, yaw, tilt)
        target = self.kin.site_target(np.asarray(center, float), rotation)
        return self.kin.solve_or_raise(target, rotation, q_start, what)

    def line(self, start, end, yaw, tilt, q_start) -> np.ndarray:
        """Joint waypoints for a straight line of the object centre from ``start`` to ``end``."""
        start, end = np.asarray(start, float), np.asarray(end, float)
        count = max(2, int(np.ceil(np.linalg.norm(end - start) / LINE_STEP)) + 1)
        path, q = [], q_start
        for point in np.linspace(start, end, count):
            q = self.solve(point, yaw, tilt, q, "straight-line move")
            path.append(q)
        return np.array(path)

    def reach(self, position, yaw, what) -> tuple[float, np.ndarray]:
        """The first configured tilt that reaches ``position`` and its joints."""
        error = None
        for tilt in self.kin.description.grasp.tilts:
            try:
                return tilt, self.solve(position, yaw, tilt, self.joints(), what)
            except UnreachableError as exc:
                error = exc
        raise error  # type: ignore[misc]

    def reach_or_lean(self, position, yaw, what) -> np.ndarray:
        """Joints for ``position``: the first configured tilt that reaches it, else the
        least lean that does (``lean``); raises if nothing reaches."""
        try:
            return self.reach(position, yaw, what)[1]
        except UnreachableError as exc:
            return self.lean(position, yaw, exc)

    def lean(self, position, yaw, error: UnreachableError) -> np.ndarray:
        """Joints for ``position`` when none of the configured tilts reaches it: the smallest
        tilt of a finer sweep, else any orientation. Raises ``error`` if nothing reaches."""
        q = self.joints()
        for _ in range(_TOOL_IK_ROUNDS):  # position-only IK of the tool centre point
            offset = self.kin.forward(q).rotation() @ self.kin.center_offset
            q = self.kin.solve(position - offset, None, q).q
        if np.linalg.norm(self.tool_point(q) - position) > self.kin.options.position_tol:
            raise error
        for tilt in sorted(_LEAN_TILTS, key=abs):
            rotation = self.kin.tool_rotation(position, yaw, tilt)
            result = self.kin.solve(self.kin.site_target(position, rotation), rotation, q)
            if result.ok(self.kin.options.position_tol, self.kin.options.rotation_tol):
                return result.q
        return q

    def vertical(self, point, yaw, height, what) -> tuple[float, np.ndarray]:
        """Find a yaw (``yaw`` first, then the square's other face pairs) and a tilt at which
        the vertical segment from ``height`` above ``point`` down to it is reachable.

        Returns (yaw, joint path from the top down to ``point``)."""
        error = None
        for turn in (0.0, math.pi / 2, -math.pi / 2):
            for tilt in self.kin.description.grasp.tilts:
                try:
                    top = above(point, height)
                    q_above = self.solve(top, yaw + turn, tilt, self.joints(), what)
                    return yaw + turn, self.line(top, point, yaw + turn, tilt, q_above)
                except UnreachableError as exc:
                    error = exc
        raise UnreachableError(str(error))

    def transit(self, goal: np.ndarray, goal_yaw: float, q_goal: np.ndarray) -> np.ndarray:
        """Joint path to ``q_goal`` that keeps the tool clear of the table: up to the goal's
        height (if below it), across at that height, then into the goal configuration."""
        q_now = self.joints()
        pose = self.kin.forward(q_now)
        start = pose.position
        height = max(goal[2], start[2])
        corners = [np.array([start[0], start[1], height]), np.array([goal[0], goal[1], height])]
        points = []
        for a, b in zip([start, corners[0]], corners, strict=True):
            count = max(2, int(np.ceil(np.linalg.norm(b - a) / (2 * LINE_STEP))) + 1)
            points.extend(np.linspace(a, b, count)[1:])
        path, q, tilt = [q_now], q_now, None
        yaws = self._turning_yaws(pose, points, goal, goal_yaw)
        for point, yaw in zip(points, yaws, strict=True):
            q, tilt = self._reach_near(point, yaw, q, tilt)
            path.append(q)
        path.append(q_goal)
        return np.array(path)

    def _turning_yaws(self, pose, points, goal, goal_yaw: float) -> list[float]:
        """The gripper's yaw at each transit waypoint: its angle to the direction from the base
        turns evenly from where it is now to the goal's, so the wrist turns evenly while the base
        pans. (A yaw held fixed in the world while the base panned 1.7 rad ran the SO-101's wrist
        into its limit; IK then spun it round twice, and a 5 cm move took 35 s.)"""
        side = pose.rotation() @ np.roll(self.kin.approach_axis, 1)
        start = math.atan2(side[1], side[0]) - _radial(pose.position)
        turn = math.remainder(goal_yaw - _radial(goal) - start, 2 * math.pi)
        last = max(1, len(points))
        return [_radial(p) + start + turn * (i + 1) / last for i, p in enumerate(points)]

    def _reach_near(
        self, point: np.ndarray, yaw: float, q_seed: np.ndarray, first: float | None = None
    ) -> tuple[np.ndarray, float | None]:
        """Best-effort IK for a transit waypoint (any tilt; position matters, not orientation):
        (joints, the tilt that reached it or None). The tilt ``first`` (the previous
        waypoint's) is tried first: neighbouring waypoints nearly always share one, and each
        tilt that fails first costs a whole IK solve (11 of 18 solves of a typical transit)."""
        tilts = list(self.kin.description.grasp.tilts)
        if first in tilts:
            tilts.remove(first)
            tilts.insert(0, first)
        best = None
        for tilt in tilts:
            rotation = self.kin.tool_rotation(point, yaw, tilt)
            result = self.kin.solve(point, rotation, q_seed)
            if result.ok(self.kin.options.position_tol, self.kin.options.rotation_tol):
                return result.q, tilt
            if best is None or result.position_error < best.position_error:
                best = result
        position_only = self.kin.solve(point, None, q_seed)
        if position_only.position_error < best.position_error:
            return position_only.q, None
        return best.q, None
