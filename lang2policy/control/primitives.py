"""Motion primitives: move_to, open/close_gripper, pick, place, go_home.

Each primitive plans every pose it needs (IK) before the arm moves, so an unreachable target
raises ``UnreachableError`` with the arm untouched. Motions are smooth joint trajectories sent
through the robot interface, one action per control period; straight-line moves (descend, lift)
follow Cartesian waypoints.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.trajectory import duration_for, sample_path
from lang2policy.errors import UnknownObjectError, UnreachableError
from lang2policy.robots.robot import Robot
from lang2policy.scene.pose import Pose

_LINE_STEP = 0.01  # metres between Cartesian waypoints on straight-line moves
_GRIPPER_TIME = 0.5  # seconds to open or close the gripper
_SETTLE_TIME = 0.25  # seconds to hold still after a motion
_GRIPPER_SETTLE_MAX = 1.5  # longest wait (seconds) for the fingers to stop


def _above(point: np.ndarray, height: float) -> np.ndarray:
    return np.asarray(point, float) + np.array([0.0, 0.0, height])


class SceneQuery(Protocol):
    """What primitives need to know about objects (the sim world, or perception on hardware)."""

    def object_names(self) -> list[str]: ...
    def object_pose(self, name: str) -> Pose: ...
    def object_kind(self, name: str) -> str: ...
    def object_size(self, name: str) -> float: ...


class MotionPrimitives:
    def __init__(
        self, robot: Robot, kinematics: Kinematics, scene: SceneQuery, control_period: float = 0.02
    ) -> None:
        self.robot, self.kin, self.scene = robot, kinematics, scene
        self.dt = control_period
        self.max_speed = kinematics.description.max_joint_speed * 0.8
        self.gripper = 1.0
        self.holding: str | None = None
        self._target: np.ndarray | None = None  # last commanded arm joints

    # ---------------------------------------------------------------- state
    def joints(self) -> np.ndarray:
        return self.robot.get_observation().position[:-1]

    def ee_pose(self) -> Pose:
        return self.kin.forward(self.joints())

    # ---------------------------------------------------------------- basic motions
    def move_to(self, pose: Pose) -> None:
        """Move the tool centre point to ``pose`` (world frame) along a joint-space path."""
        q = self.kin.solve_or_raise(pose.position, pose.rotation(), self.joints(), "move_to")
        self._follow(np.vstack([self.joints(), q]))

    def move_to_position(self, position, yaw: float | None = None) -> None:
        """Top-down move to ``position``; ``yaw`` defaults to the arm's natural yaw there."""
        position = np.asarray(position, float)
        yaw = self.kin.natural_yaw(position) if yaw is None else yaw
        q = self._reach(position, yaw, "move_to")[1]
        self._follow(np.vstack([self.joints(), q]))

    def go_home(self) -> None:
        self._follow(np.vstack([self.joints(), self.kin.arm.home]))

    def open_gripper(self, opening: float = 1.0) -> None:
        self._move_gripper(opening)
        self.holding = None

    def close_gripper(self) -> None:
        self._move_gripper(0.0)

    # ---------------------------------------------------------------- pick and place
    def pick(self, obj: str) -> None:
        """Grasp ``obj`` from above and lift it. Raises if it is out of reach."""
        self._require(obj)
        grasp = self.kin.description.grasp
        center = self.scene.object_pose(obj).position
        yaw = self.kin.grasp_yaw(center, self.scene.object_pose(obj).yaw(), math.pi / 2)
        yaw, line_down = self._plan_vertical(
            _above(center, grasp.grasp_offset), yaw, grasp.approach_height, f"pick('{obj}')"
        )
        self.open_gripper(grasp.pre_grasp_opening)
        self._follow(self._transit(_above(center, grasp.approach_height), yaw, line_down[0]))
        self._follow(line_down)
        self.close_gripper()
        self._follow(line_down[::-1])
        self.holding = obj

    def place(self, obj: str, target: str) -> None:
        """Put the held ``obj`` on or in ``target`` (a bowl or a block) and let go."""
        self._require(obj)
        self._require(target)
        if self.holding != obj:
            self.pick(obj)
        drop = self._drop_point(obj, target)
        self.place_at(drop)

    def place_at(self, drop: np.ndarray) -> None:
        """Lower the held object so its centre reaches ``drop``, release, and back off."""
        grasp = self.kin.description.grasp
        yaw = self.kin.grasp_yaw(drop, self.kin.natural_yaw(drop), math.pi / 2)
        yaw, line_down = self._plan_vertical(drop, yaw, grasp.approach_height, "place")
        self._follow(self._transit(_above(drop, grasp.approach_height), yaw, line_down[0]))
        self._follow(line_down)
        self.open_gripper(grasp.pre_grasp_opening)
        self._follow(line_down[::-1])

    def put_first_on_second(self, obj: str, target: str) -> None:
        self.pick(obj)
        self.place(obj, target)

    # ---------------------------------------------------------------- planning helpers
    def _drop_point(self, obj: str, target: str) -> np.ndarray:
        base = self.scene.object_pose(target).position
        half = self.scene.object_size(obj)
        if self.scene.object_kind(target) == "bowl":
            return _above(base, 0.008 + half + 0.01)
        return _above(base, self.scene.object_size(target) + half + 0.01)

    def _transit(self, goal: np.ndarray, goal_yaw: float, q_goal: np.ndarray) -> np.ndarray:
        """Joint path to ``q_goal`` that keeps the tool clear of the table: up to the goal's
        height (if below it), across at that height, then into the goal configuration."""
        q_now = self.joints()
        pose = self.kin.forward(q_now)
        start = pose.position
        height = max(goal[2], start[2])
        corners = [np.array([start[0], start[1], height]), np.array([goal[0], goal[1], height])]
        path, q = [q_now], q_now
        for a, b in zip([start, corners[0]], corners, strict=True):
            count = max(2, int(np.ceil(np.linalg.norm(b - a) / (2 * _LINE_STEP))) + 1)
            for point in np.linspace(a, b, count)[1:]:
                q = self._reach_near(point, goal_yaw, q)
                path.append(q)
        path.append(q_goal)
        return np.array(path)

    def _reach_near(self, point: np.ndarray, yaw: float, q_seed: np.ndarray) -> np.ndarray:
        """Best-effort IK for a transit waypoint (any tilt; position matters, not orientation)."""
        best = None
        for tilt in self.kin.description.grasp.tilts:
            rotation = self.kin.tool_rotation(point, yaw, tilt)
            result = self.kin.solve(point, rotation, q_seed)
            if result.ok(self.kin.options.position_tol, self.kin.options.rotation_tol):
                return result.q
            if best is None or result.position_error < best.position_error:
                best = result
        position_only = self.kin.solve(point, None, q_seed)
        return position_only.q if position_only.position_error < best.position_error else best.q

    def _plan_vertical(self, point, yaw, height, what) -> tuple[float, np.ndarray]:
        """Find a yaw (``yaw`` first, then the square's other face pairs) and a tilt at which
        the vertical segment from ``height`` above ``point`` down to it is reachable.

        Returns (yaw, joint path from the top down to ``point``)."""
        error = None
        for turn in (0.0, math.pi / 2, -math.pi / 2):
            for tilt in self.kin.description.grasp.tilts:
                try:
                    top = _above(point, height)
                    q_above = self._solve(top, yaw + turn, tilt, self.joints(), what)
                    return yaw + turn, self._line(top, point, yaw + turn, tilt, q_above)
                except UnreachableError as exc:
                    error = exc
        raise UnreachableError(str(error))

    def _reach(self, position, yaw, what) -> tuple[float, np.ndarray]:
        error = None
        for tilt in self.kin.description.grasp.tilts:
            try:
                return tilt, self._solve(position, yaw, tilt, self.joints(), what)
            except UnreachableError as exc:
                error = exc
        raise error  # type: ignore[misc]

    def _solve(self, center, yaw, tilt, q_start, what) -> np.ndarray:
        rotation = self.kin.tool_rotation(center, yaw, tilt)
        target = self.kin.site_target(np.asarray(center, float), rotation)
        return self.kin.solve_or_raise(target, rotation, q_start, what)

    def _line(self, start, end, yaw, tilt, q_start) -> np.ndarray:
        """Joint waypoints for a straight line of the object centre from ``start`` to ``end``."""
        start, end = np.asarray(start, float), np.asarray(end, float)
        count = max(2, int(np.ceil(np.linalg.norm(end - start) / _LINE_STEP)) + 1)
        path, q = [], q_start
        for point in np.linspace(start, end, count):
            q = self._solve(point, yaw, tilt, q, "straight-line move")
            path.append(q)
        return np.array(path)

    def _require(self, name: str) -> None:
        if name not in self.scene.object_names():
            raise UnknownObjectError(
                f"no object named '{name}'; objects present: {self.scene.object_names()}"
            )

    # ---------------------------------------------------------------- execution
    def _follow(self, path: np.ndarray) -> None:
        duration = duration_for(path, self.max_speed)
        for q in sample_path(path, duration, self.dt):
            self.robot.send_action(np.append(q, self.gripper))
            self.robot.sleep(self.dt)
        self._hold(path[-1], _SETTLE_TIME)

    def _move_gripper(self, opening: float) -> None:
        target = self.joints() if self._target is None else self._target
        steps = max(1, round(_GRIPPER_TIME / self.dt))
        for g in np.linspace(self.gripper, opening, steps):
            self.robot.send_action(np.append(target, g))
            self.robot.sleep(self.dt)
        self.gripper = opening
        self._hold_until_gripper_settles(target)

    def _hold_until_gripper_settles(self, q: np.ndarray) -> None:
        """Hold until the fingers stop moving (closed on an object, or at the target)."""
        previous = self.robot.get_observation().position[-1]
        for _ in range(round(_GRIPPER_SETTLE_MAX / self.dt)):
            self._hold(q, self.dt)
            current = self.robot.get_observation().position[-1]
            if abs(current - previous) < 0.002:
                return
            previous = current

    def _hold(self, q: np.ndarray, seconds: float) -> None:
        self._target = np.asarray(q, float)
        for _ in range(max(1, round(seconds / self.dt))):
            self.robot.send_action(np.append(q, self.gripper))
            self.robot.sleep(self.dt)
