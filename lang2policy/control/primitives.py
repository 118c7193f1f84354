"""Motion primitives: move_to, open/close_gripper, pick, place, push, go_home.

Each primitive plans every pose it needs (IK) before the arm moves, so an unreachable target
raises ``UnreachableError`` with the arm untouched. Motions are smooth joint trajectories sent
through the robot interface, one action per control period; straight-line moves (descend, lift,
push) follow Cartesian waypoints.

Two limits apply to every motion: ``tcp_speed`` caps the speed of the tool centre point (the
point between the jaws that ``move_to_position`` places), and ``deadline`` (robot time) stops
the arm where it is with ``MotionTimeExceeded`` once it passes.
"""

from __future__ import annotations

import math

import numpy as np

from lang2policy.control.bowl_spot import spot_in_bowl
from lang2policy.control.kinematics import Kinematics
from lang2policy.control.pusher import PUSH_SPEED, PushPlan, plan_push
from lang2policy.control.scene_query import SceneQuery, require_object
from lang2policy.control.tool_paths import ToolPaths, above
from lang2policy.control.trajectory import duration_for, min_jerk_scale, path_length, sample_path
from lang2policy.errors import InvalidIntentError, MotionTimeExceeded
from lang2policy.robots.robot import Robot
from lang2policy.scene.pose import Pose

_GRIPPER_TIME = 0.5  # seconds to open or close the gripper
_SETTLE_TIME = 0.25  # seconds to hold still after a motion
_GRIPPER_SETTLE_MAX = 1.5  # longest wait (seconds) for the fingers to stop
_DROP_CLEARANCE = 0.01  # a placed object is let go this far above where it comes to rest
_TCP_SAMPLE_STEP = 0.005  # joint-path length (rad) between samples when timing tool speed
_STOP_TIME_MAX = 0.3  # longest braking (seconds) after a deadline stop
_STOP_SPEED = 0.02  # joint speed (rad/s) below which a stopped arm counts as still
LOOK_TCP_SPEED = 0.15  # m/s of the tool on the way to ``look`` (the skills' default speed)


class MotionPrimitives:
    """The arm's motions on a robot: each plans its joint paths (``ToolPaths``) before the arm
    moves, then follows them one control period at a time."""

    def __init__(
        self, robot: Robot, kinematics: Kinematics, scene: SceneQuery, control_period: float = 0.02
    ) -> None:
        self.robot, self.kin, self.scene = robot, kinematics, scene
        self.paths = ToolPaths(kinematics, self.joints)
        self.dt = control_period
        self.max_speed = kinematics.description.max_joint_speed * 0.8
        self.gripper = 1.0
        self.holding: str | None = None
        # (name, its pose in the ee frame) of the grasp that made ``holding``: where a mirror
        # keeps a held object that perception no longer sees (``held_in_hand``)
        self._grip: tuple[str, Pose] | None = None
        self._target: np.ndarray | None = None  # last commanded arm joints
        # Speed cap (m/s) of the tool centre point; None: joint speed limits only.
        self.tcp_speed: float | None = None
        # Speed cap (m/s) of the tool centre point while it pushes an object.
        self.push_speed = PUSH_SPEED
        self._deadline: float | None = None
        self._deadline_set_at = 0.0

    # ---------------------------------------------------------------- limits
    @property
    def deadline(self) -> float | None:
        """Robot time (``get_observation().time``) by which motions must end, or None.

        Every control step checks it; once passed, the arm is held where it is and
        ``MotionTimeExceeded`` is raised. Setting it records the time it was set (the budget's
        start, for the error message)."""
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline = None if value is None else float(value)
        self._deadline_set_at = self.now()

    def now(self) -> float:
        return float(self.robot.get_observation().time)

    # ---------------------------------------------------------------- state
    def joints(self) -> np.ndarray:
        return self.robot.get_observation().position[:-1]

    def ee_pose(self) -> Pose:
        return self.kin.forward(self.joints())

    def tool_point(self, q: np.ndarray | None = None) -> np.ndarray:
        """Tool centre point (world frame) at joints ``q`` (default: now): the point between the
        jaws where a grasped object's centre sits, the point ``move_to_position`` places."""
        return self.paths.tool_point(self.joints() if q is None else q)

    # ---------------------------------------------------------------- basic motions
    def move_to(self, pose: Pose) -> None:
        """Move the tool centre point to ``pose`` (world frame) along a joint-space path."""
        q = self.kin.solve_or_raise(pose.position, pose.rotation(), self.joints(), "move_to")
        self._follow(np.vstack([self.joints(), q]))

    def move_to_position(self, position, yaw: float | None = None) -> None:
        """Move the tool centre point to ``position``, pointing down if the arm can (else
        leaning as little as it must); ``yaw`` defaults to the arm's natural yaw there."""
        self._follow(np.vstack([self.joints(), self.plan_move_to(position, yaw)]))

    def plan_move_to(self, position, yaw: float | None = None) -> np.ndarray:
        """The joints ``move_to_position`` will go to (deterministic: same IK, same seed)."""
        position = np.asarray(position, float)
        self.kin.check_reach(position, "move_to")
        yaw = self.kin.natural_yaw(position) if yaw is None else yaw
        return self.paths.reach_or_lean(position, yaw, "move_to")

    def go_home(self) -> None:
        self._follow(np.vstack([self.joints(), self.kin.arm.home]))

    def go_look(self) -> None:
        """Raise the arm out of the overhead camera's view (the description's ``look``), the
        tool no faster than a skill's default speed (``LOOK_TCP_SPEED``)."""
        cap = self.tcp_speed
        self.tcp_speed = LOOK_TCP_SPEED if cap is None else min(cap, LOOK_TCP_SPEED)
        try:
            self._follow(np.vstack([self.joints(), self.kin.arm.look]))
        finally:
            self.tcp_speed = cap

    def open_gripper(self, opening: float = 1.0) -> None:
        self._move_gripper(opening)
        self.holding = None

    def close_gripper(self) -> None:
        self._move_gripper(0.0)

    # ---------------------------------------------------------------- pick and place
    def pick(self, obj: str) -> None:
        """Grasp ``obj`` from above and lift it. Raises if it is out of reach."""
        require_object(self.scene, obj)
        grasp = self.kin.description.grasp
        center = self.scene.object_pose(obj).position
        yaw = self.kin.grasp_yaw(center, self.scene.object_pose(obj).yaw(), math.pi / 2)
        yaw, line_down = self.paths.vertical(
            above(center, grasp.grasp_offset), yaw, grasp.approach_height, f"pick('{obj}')"
        )
        self.holding = None  # the jaw opens on the way: what it held is let go
        approach = self.paths.transit(above(center, grasp.approach_height), yaw, line_down[0])
        self._follow(approach, opening=grasp.pre_grasp_opening)
        self._follow(line_down)
        self.close_gripper()
        self._grip = (obj, self._in_hand(obj))
        self._follow(line_down[::-1])
        self.holding = obj

    def _in_hand(self, obj: str) -> Pose:
        """``obj``'s pose in the ee frame now (the jaws just closed on it)."""
        ee, pose = self.ee_pose(), self.scene.object_pose(obj)
        rotation = ee.rotation()
        return Pose.from_matrix(
            rotation.T @ (pose.position - ee.position), rotation.T @ pose.rotation()
        )

    def held_in_hand(self) -> tuple[str, Pose] | None:
        """The held object and its pose in the ee frame at the grasp (None: nothing held)."""
        grip = self._grip
        return grip if grip is not None and grip[0] == self.holding else None

    def place(self, obj: str, target: str) -> None:
        """Put the held ``obj`` on or in ``target`` (a bowl or a block) and let go."""
        require_object(self.scene, obj)
        require_object(self.scene, target)
        if self.holding != obj:
            self.pick(obj)
        drop = self.drop_point(obj, target)
        self.place_at(drop)

    def place_at(self, drop: np.ndarray) -> None:
        """Lower the held object so its centre reaches ``drop``, release, and back off."""
        grasp = self.kin.description.grasp
        yaw = self.kin.grasp_yaw(drop, self.kin.natural_yaw(drop), math.pi / 2)
        yaw, line_down = self.paths.vertical(drop, yaw, grasp.approach_height, "place")
        self._follow(self.paths.transit(above(drop, grasp.approach_height), yaw, line_down[0]))
        self._follow(line_down)
        self.open_gripper(grasp.pre_grasp_opening)
        self._follow(line_down[::-1])

    def place_at_xy(self, xy) -> None:
        """Put the held object down on the table with its centre at ``xy`` (world x, y)."""
        if self.holding is None:
            raise InvalidIntentError(
                "place: the gripper holds nothing; allowed: pick(obj) first, then place"
            )
        self.place_at(self.table_drop_point(self.holding, xy))

    def table_drop_point(self, obj: str, xy) -> np.ndarray:
        """Where ``obj``'s centre is let go to come to rest on the table at ``xy``."""
        x, y = (float(v) for v in np.asarray(xy, float)[:2])
        return np.array([x, y, self.rest_height(obj) + _DROP_CLEARANCE])

    def rest_height(self, obj: str) -> float:
        """Height of ``obj``'s reference point (its pose) when it rests on the table."""
        return self.scene.object_size(obj) if self.scene.object_kind(obj) == "block" else 0.0

    def put_first_on_second(self, obj: str, target: str) -> None:
        self.pick(obj)
        self.place(obj, target)

    # ---------------------------------------------------------------- push
    def plan_push(self, obj: str, target_xy) -> PushPlan:
        """Plan (IK only; the arm does not move) a push of ``obj`` to ``target_xy``."""
        return plan_push(self, obj, target_xy)

    def push(self, obj: str, target_xy) -> None:
        """Slide ``obj`` along the table so its centre ends at ``target_xy`` (world x, y).

        Closes the gripper, moves (clear of the table) behind the object, lowers to about its
        mid-height, pushes in a straight line at most ``push_speed`` fast and lifts
        straight up. All IK is planned before the arm moves (see ``pusher.plan_push``)."""
        if self.holding is not None:
            raise InvalidIntentError(
                f"push('{obj}'): the gripper holds '{self.holding}'; allowed: place it first"
            )
        self.execute_push(self.plan_push(obj, target_xy))

    def execute_push(self, plan: PushPlan) -> None:
        """Carry out a push planned by ``plan_push`` from the state it was planned in."""
        self.close_gripper()
        self._follow(self.paths.transit(above(plan.start, plan.lift), plan.yaw, plan.down[0]))
        self._follow(plan.down)
        cap = self.tcp_speed
        self.tcp_speed = self.push_speed if cap is None else min(cap, self.push_speed)
        try:
            self._follow(plan.along)
        finally:
            self.tcp_speed = cap
        self._follow(plan.up)

    # ---------------------------------------------------------------- planning helpers
    def drop_point(self, obj: str, target: str) -> np.ndarray:
        """Where ``obj``'s centre is let go to end up on or in ``target``; in a bowl, clear
        of the blocks already in it (``bowl_spot``)."""
        base = self.scene.object_pose(target).position
        half = self.scene.object_size(obj)
        if self.scene.object_kind(target) == "bowl":
            others = self._in_bowl(obj, target)
            x, y = spot_in_bowl(base, self.scene.object_size(target), half, others)
            return above(np.array([x, y, base[2]]), 0.008 + half + _DROP_CLEARANCE)
        return above(base, self.scene.object_size(target) + half + _DROP_CLEARANCE)

    def _in_bowl(self, obj: str, bowl: str) -> list[np.ndarray]:
        """Positions of the blocks (``obj`` aside) within ``bowl``'s radius."""
        centre, radius = self.scene.object_pose(bowl).position, self.scene.object_size(bowl)
        found = []
        for name in self.scene.object_names():
            if name == obj or self.scene.object_kind(name) != "block":
                continue
            position = self.scene.object_pose(name).position
            if math.hypot(*(position[:2] - centre[:2])) < radius:
                found.append(position)
        return found

    # ---------------------------------------------------------------- execution
    def _follow(self, path: np.ndarray, opening: float | None = None) -> None:
        """Follow the joint ``path``; with ``opening``, the jaw moves there on the way (as fast
        as ``open_gripper`` moves it), and the arm waits at the end until the fingers stop. A pick
        opens while it travels: a jaw opened first kept the arm still for a second."""
        duration = duration_for(path, self.max_speed)
        if self.tcp_speed is not None:
            duration = max(duration, self._tcp_duration(path, self.tcp_speed))
        samples = sample_path(path, duration, self.dt)
        jaw = self._jaw_ramp(opening)
        for i in range(max(len(samples), len(jaw))):
            if i < len(jaw):
                self.gripper = float(jaw[i])
            self._step(samples[min(i, len(samples) - 1)], self.gripper)
        self._hold(path[-1], _SETTLE_TIME)
        if opening is not None:
            self.gripper = opening
            self._hold_until_gripper_settles(path[-1])

    def _jaw_ramp(self, opening: float | None) -> np.ndarray:
        """The gripper commands, one per control period, that take the jaw to ``opening`` in
        ``_GRIPPER_TIME`` (none for None)."""
        if opening is None:
            return np.empty(0)
        return np.linspace(self.gripper, opening, max(1, round(_GRIPPER_TIME / self.dt)))

    def _tcp_duration(self, path: np.ndarray, tcp_speed: float) -> float:
        """Duration at which the tool centre point's peak speed along ``path`` (min-jerk timed,
        as ``sample_path`` follows it) equals ``tcp_speed``."""
        path = np.atleast_2d(np.asarray(path, float))
        length = path_length(path)
        if len(path) < 2 or length[-1] <= 0:
            return 0.0
        count = int(np.clip(np.ceil(length[-1] / _TCP_SAMPLE_STEP), 50, 2000))
        arc = min_jerk_scale(np.linspace(0.0, 1.0, count + 1)) * length[-1]
        joints = np.column_stack([np.interp(arc, length, path[:, j]) for j in range(path.shape[1])])
        points = np.array([self.tool_point(q) for q in joints])
        peak = float(np.max(np.linalg.norm(np.diff(points, axis=0), axis=1))) * count
        return peak / tcp_speed

    def _step(self, q: np.ndarray, gripper: float) -> None:
        """One control period: check the deadline, send the action, let the period pass."""
        self._check_deadline()
        self.robot.send_action(np.append(q, gripper))
        self.robot.sleep(self.dt)

    def _check_deadline(self) -> None:
        if self._deadline is None:
            return
        now = self.now()
        if now < self._deadline:
            return
        self.stop()
        raise MotionTimeExceeded(
            f"motion stopped after {now - self._deadline_set_at:.2f} s; the budget allows "
            f"{self._deadline - self._deadline_set_at:.2f} s; the arm holds where it stopped"
        )

    def hold_position(self) -> np.ndarray:
        """Command the arm to stay at its measured position (the gripper keeps its command);
        lets no time pass. Returns the joints held."""
        self.robot.forget_last_command()  # rate-limit from where the arm is, not the last command
        q = self.joints()
        self.robot.send_action(np.append(q, self.gripper))
        self._target = q
        return q

    def resume_from_measured(self) -> None:
        """After something else moved the arm (a VLA skill), start the next motion from the
        measured state: forget the robot's last command (its rate limit would pull the first
        commands back toward the pose before) and the last arm target (a gripper motion holds
        the arm there), and take the measured opening as the gripper's command (else the next
        motion sends the opening from before, undoing a grasp the skill made). Sends nothing."""
        self.robot.forget_last_command()
        self._target = None
        self.gripper = float(self.robot.get_observation().position[-1])

    def hold_still(self, seconds: float) -> None:
        """Keep commanding the measured position for ``seconds`` (robot time)."""
        self._hold(self.joints(), seconds)

    def stop(self) -> None:
        """Hold the arm at its measured position and wait, briefly, until it is still.
        Ignores the deadline."""
        q = self.hold_position()
        for _ in range(max(1, round(_STOP_TIME_MAX / self.dt))):
            self.robot.send_action(np.append(q, self.gripper))
            self.robot.sleep(self.dt)
            if np.max(np.abs(self.robot.get_observation().velocity[:-1])) < _STOP_SPEED:
                break

    def _move_gripper(self, opening: float) -> None:
        target = self.joints() if self._target is None else self._target
        for g in self._jaw_ramp(opening):
            self._check_deadline()
            self.gripper = float(g)
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
            self._step(q, self.gripper)
