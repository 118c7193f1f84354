"""The host side of the robot API: where validated skill calls are planned and executed.

The sandbox runner asks a ``SkillBackend`` which objects exist, which Cartesian points a call
would move the tool to (before it runs, for the privilege policy), and then executes it.
``SimSkillBackend`` does this over a simulated ``Session``.

Positions are those of the tool centre point: the point between the jaws where a grasped
object's centre sits. ``move_to(p)`` puts it at ``p``, ``get_ee_pos()`` reports it, and every
target is one. Query results are plain JSON data (lists of floats rounded to 0.1 mm).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from lang2policy.control.gripper_hull import GripperHull, box_corners, hull_for
from lang2policy.control.primitives import MotionPrimitives
from lang2policy.control.pusher import PushPlan, nominal_push_points
from lang2policy.errors import (
    InvalidIntentError,
    MotionTimeExceeded,
    UnknownObjectError,
    UnreachableError,
)
from lang2policy.scene.robot_description import RobotDescription
from lang2policy.scene.world import World
from lang2policy.session.protocol import Session
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.geometry import corner_point, object_bbox, sample_segments, table_bounds
from lang2policy.skills.spec import Skill
from lang2policy.skills.vla_call import VLA_SKILL, VLARunner, run_vla, vla_targets

Point = tuple[float, float, float]
_DECIMALS = 4  # query results are rounded to 0.1 mm


class SkillBackend(Protocol):
    def object_names(self) -> list[str]: ...

    def path(self, skill: str, bound: dict) -> tuple[list[Point], list[Point]]:
        """(targets, sweep) of this call, computed deterministically BEFORE it runs, for the
        privilege policy: the points the tool centre point passes through, and further points
        the rest of the gripper passes through (for keep-out zones). Empty for queries,
        the gripper and say."""
        ...

    def execute(
        self, skill: str, bound: dict, time_limit: float | None = None, workspace: Any = None
    ) -> object:
        """Run one validated call; return a JSON-able value. Raises Lang2PolicyError
        subclasses with helpful messages; the arm holds still after any error.
        time_limit: seconds of robot time this motion may take; exceeded -> MotionTimeExceeded.
        workspace: the gate's box (``policy_zones.Box``) a ``vla_skill`` call runs in."""
        ...

    def hold(self) -> None:
        """Command the arm to stay where it is now."""
        ...

    def clock(self) -> float:
        """Robot time in seconds (sim time in simulation)."""
        ...

    def said(self) -> list[str]:
        """Texts passed to say(), oldest first."""
        ...


def _plain(values) -> list:
    """A numpy array (any shape) as nested lists of rounded Python floats."""
    return np.round(np.asarray(values, float), _DECIMALS).tolist()


def _joint_path_points(motion: MotionPrimitives, q_from, q_to, count: int = 40):
    """Tool centre points along a joint-space move."""
    q_from, q_to = np.asarray(q_from, float), np.asarray(q_to, float)
    return [motion.tool_point(q_from + (q_to - q_from) * t) for t in np.linspace(0.0, 1.0, count)]


def _point(values) -> Point:
    x, y, z = (float(v) for v in values)
    return (x, y, z)


def _points(values: np.ndarray) -> list[Point]:
    """Rows of an (n, 3) array as tuples of Python floats (fast for long sweeps)."""
    return [(x, y, z) for x, y, z in np.asarray(values, float).reshape(-1, 3).tolist()]


class SimSkillBackend:
    """Skills over a simulated ``Session`` (world, robot, kinematics, motion primitives)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.world: World = session.world  # the scene model (sim, or the graph's mirror)
        self.description: RobotDescription = session.world.description
        self._said: list[str] = []
        self.vla: VLARunner | None = None  # runs vla_skill calls (the graph's VLA, or a local one)
        self._push_plan: tuple[tuple, PushPlan] | None = None
        self._queries: dict[str, Callable[..., object]] = {
            "get_obj_names": self.object_names,
            "get_obj_pos": self._obj_pos,
            "get_bbox": lambda obj: _plain(object_bbox(self.world, obj)),
            "is_obj_visible": lambda obj: obj in self.object_names(),
            "get_ee_pose": self._ee_pose,
            "get_ee_pos": lambda: _plain(self.motion.tool_point()),
            "get_table_bounds": lambda: _plain(table_bounds(self.description.workspace)),
            "get_corner_pos": lambda corner: _plain(corner_point(self.description, corner)),
        }

    # ------------------------------------------------------------ session parts
    @property
    def motion(self) -> MotionPrimitives:
        """The session's motion primitives (``Session.reset`` makes new ones)."""
        return self.session.primitives

    # ------------------------------------------------------------ SkillBackend
    def object_names(self) -> list[str]:
        return list(self.world.object_names())

    def clock(self) -> float:
        return float(self.session.robot.get_observation().time)

    def background_cpu(self) -> float:
        """CPU seconds the session's own arm has spent in this process so far (an emulated
        arm's threads; 0 for every other session): not the plan's compute."""
        measure = getattr(self.session, "background_cpu", None)
        return float(measure()) if measure is not None else 0.0

    def said(self) -> list[str]:
        return list(self._said)

    def hold(self) -> None:
        """Command the arm to stay at its measured position (the gripper keeps its command)."""
        self.motion.hold_position()

    def path(self, skill: str, bound: dict) -> tuple[list[Point], list[Point]]:
        """(targets, sweep), planned once. Targets: the tool centre point's path, sampled about
        every centimetre along the way the motion will go (not just its end points), so a
        keep-out zone between two allowed points, or a joint-space move that bulges into one,
        is seen by the policy. Sweep: where the gripper's geometry goes along the same path
        (``GripperHull``): corners of boxes around the gripper bodies, placed by forward
        kinematics along joint-space moves (at most 1 cm apart), and for compound motions,
        whose wrist yaw and tilt are only decided while moving, corners of a box around each
        tool point holding the gripper at every orientation the primitives may take there."""
        tool, body = self._paths(skill, bound)
        return [_point(p) for p in tool], _points(body)

    def targets(self, skill: str, bound: dict) -> list[Point]:
        return self.path(skill, bound)[0]

    def sweep(self, skill: str, bound: dict) -> list[Point]:
        return self.path(skill, bound)[1]

    def _paths(self, skill: str, bound: dict) -> tuple[list[np.ndarray], np.ndarray]:
        spec, bound = self._bind(skill, bound)
        none = np.empty((0, 3))
        if spec.category != "motion":
            return [], none
        if skill == VLA_SKILL:  # the learned policy's path is unknown: the objects it acts on
            return vla_targets(self.world, bound), none
        motion = self.motion
        if skill in ("move_to", "go_home"):
            goal = self.world.arm.home
            if skill == "move_to":
                position = np.asarray(bound["position"], float)
                try:
                    goal = motion.plan_move_to(position)
                except UnreachableError:  # the policy judges the point; execute() raises
                    return [position], none
            tool = _joint_path_points(motion, motion.joints(), goal)
            if skill == "move_to":
                tool[-1] = position  # the IK lands within tolerance of what was asked
            return tool, self._joint_sweep(goal)
        waypoints = self._waypoints(skill, bound)
        if not waypoints:
            return [], none  # open_gripper, close_gripper
        tool = sample_segments(self._transit(waypoints))
        return tool, self._compound_sweep(skill, bound, tool)

    def _hull(self) -> GripperHull:
        """The gripper's boxes for this session's kinematics (measured once per kinematics)."""
        return hull_for(self.motion.kin)

    def _joint_sweep(self, goal: np.ndarray) -> np.ndarray:
        """Gripper box corners along a joint-space move from here to ``goal``; the jaw keeps
        its opening (between what it measures now and what it was last commanded)."""
        motion = self.motion
        openings = (self.world.gripper_opening(), motion.gripper)
        corners = self._hull().corners(openings, self._held_size(motion.holding))
        return self._hull().along_joints(motion.joints(), goal, corners)

    def _compound_sweep(self, skill: str, bound: dict, tool: list[np.ndarray]) -> np.ndarray:
        """A box of 8 corners per tool point bounding the gripper along a compound motion. The
        first tool point is where the tool is now: the box holds the gripper as it is, with the
        jaw between its opening now and the one the motion sets before it moves. Around every
        later tool point the box holds the gripper with the jaw anywhere it goes while moving
        (``_moving_jaw``), holding what it holds or picks up, at any yaw, tilted as the
        configured grasp tilts allow."""
        motion, hull = self.motion, self._hull()
        now, moving = self.world.gripper_opening(), self._moving_jaw(skill)
        held_now = self._held_size(motion.holding)
        openings = (now, motion.gripper, *moving)  # from now to what it sets before moving
        start = hull.corners((min(openings), max(openings)), held_now)
        picked = bound.get("obj") if skill in ("pick", "put_first_on_second") else None
        corners = hull.corners(moving, max(held_now, self._held_size(picked)))
        here = hull.at(motion.joints(), start)  # where the gripper is: one world box
        around = hull.around_tool(tool[1:], corners, self.description.grasp.tilts)
        return np.vstack([box_corners(here.min(axis=0), here.max(axis=0)), around])

    def _moving_jaw(self, skill: str) -> tuple[float, float]:
        """The jaw's openings while a compound motion moves (as ``MotionPrimitives`` runs it):
        pick moves the jaw from where it is to the pre-grasp opening on its way to the object
        and closes on it; place moves with the jaw as it is (closed on the object) and opens to
        the pre-grasp opening to let go; push closes the jaw before it moves."""
        if skill == "push":
            return (0.0, 0.0)
        widest = max(
            self.description.grasp.pre_grasp_opening,
            self.world.gripper_opening(),
            self.motion.gripper,
        )
        return (0.0, widest)

    def _held_size(self, obj: str | None) -> float:
        """Half-size of a cube around the tool centre point that holds a block that is or
        will be held, turned any way in the jaws (0 for nothing)."""
        if obj is None or obj not in self.object_names():
            return 0.0
        return float(self.world.object_size(obj)) * math.sqrt(3.0)

    def _waypoints(self, skill: str, bound: dict) -> list[np.ndarray]:
        """The tool's way points for compound motions, in order."""
        up = np.array([0.0, 0.0, self.description.grasp.approach_height])
        if skill == "pick":
            grip = self._grasp_point(bound["obj"])
            return [grip + up, grip, grip + up]
        if skill == "place":
            drop = self._drop_point(self._held(skill, bound), bound["target"])
            return [drop + up, drop, drop + up]
        if skill == "put_first_on_second":
            grip = self._grasp_point(bound["obj"])
            drop = self._drop_point(bound["obj"], bound["target"])
            return [grip + up, grip, grip + up, drop + up, drop, drop + up]
        if skill == "push":
            try:
                points = self._plan_push(bound).points()
            except UnreachableError:  # say where it would go; execute() raises the error
                points = nominal_push_points(self.motion, bound["obj"], bound["target"][:2])
            return [np.asarray(p, float) for p in points]
        return []

    def _transit(self, waypoints: list[np.ndarray]) -> list[np.ndarray]:
        """Prefix the way points with the transit from where the tool is now: up to the first
        way point's height (if higher), then across (as the primitives move)."""
        start = np.asarray(self.motion.tool_point(), float)
        first = waypoints[0]
        height = max(start[2], first[2])
        return [start, np.array([*start[:2], height]), np.array([*first[:2], height]), *waypoints]

    def execute(
        self, skill: str, bound: dict, time_limit: float | None = None, workspace: Any = None
    ) -> object:
        spec, bound = self._bind(skill, bound)
        if spec.category == "query":
            return self._queries[skill](**bound)
        if spec.category == "speech":
            self._said.append(bound["text"])
            return None
        if skill == VLA_SKILL:
            resume = self.motion.resume_from_measured  # the VLA moved the arm and gripper
            return run_vla(self.vla, bound, self.hold, time_limit, workspace, resume)
        motion = self.motion
        motion.tcp_speed = bound.get("speed")
        motion.deadline = None if time_limit is None else self.clock() + float(time_limit)
        try:
            self._move(skill, bound)
        except MotionTimeExceeded:
            raise  # the primitives already stopped the arm where it was
        except BaseException:
            self.hold()
            raise
        finally:
            motion.tcp_speed = None
            motion.deadline = None
        return None

    # ------------------------------------------------------------ motions
    def _move(self, skill: str, bound: dict) -> None:
        motion = self.motion
        if skill == "move_to":
            motion.move_to_position(bound["position"])
        elif skill == "go_home":
            motion.go_home()
        elif skill == "open_gripper":
            motion.open_gripper()
        elif skill == "close_gripper":
            motion.close_gripper()
        elif skill == "pick":
            motion.pick(bound["obj"])
        elif skill == "place":
            self._place(self._held(skill, bound), bound["target"])
        elif skill == "put_first_on_second":
            motion.pick(bound["obj"])
            self._place(bound["obj"], bound["target"])
        elif skill == "push":
            if motion.holding is not None:
                raise InvalidIntentError(
                    f"push(obj={bound['obj']!r}): the gripper holds {motion.holding!r}; "
                    "allowed: place() it first"
                )
            motion.execute_push(self._plan_push(bound))
        else:  # a motion skill in the catalog that this backend does not know
            raise InvalidIntentError(f"{skill}(): not supported by the simulation backend")

    def _place(self, obj: str, target: str | list[float]) -> None:
        if isinstance(target, str):
            self.motion.place(obj, target)
        else:
            self.motion.place_at_xy(target[:2])

    def _plan_push(self, bound: dict) -> PushPlan:
        """The push plan for these arguments from the current state; ``targets`` and
        ``execute`` of the same call share it (planning is deterministic, but not free)."""
        obj = bound["obj"]
        key = (
            obj,
            tuple(bound["target"][:2]),
            tuple(np.round(self.motion.joints(), 6)),
            tuple(np.round(self.world.object_pose(obj).position, 6)),
        )
        if self._push_plan is None or self._push_plan[0] != key:
            self._push_plan = (key, self.motion.plan_push(obj, bound["target"][:2]))
        return self._push_plan[1]

    # ------------------------------------------------------------ queries
    def _obj_pos(self, obj: str) -> list[float]:
        """Centre of the object's bounding box (a block's centre; mid-height of a bowl)."""
        return _plain(object_bbox(self.world, obj).mean(axis=0))

    def _ee_pose(self) -> dict:
        motion = self.motion
        pose = motion.kin.forward(motion.joints())
        return {"position": _plain(motion.tool_point()), "quaternion": _plain(pose.quat)}

    # ------------------------------------------------------------ checks and helpers
    def _bind(self, skill: str, bound: dict) -> tuple[Skill, dict]:
        """Re-validate (cheap, and ``bind`` is idempotent) and check that named objects exist."""
        spec = SKILLS.get(skill)
        if spec is None:
            raise InvalidIntentError(
                f"there is no skill named {skill[:64]!r}; skills: {', '.join(sorted(SKILLS))}"
            )
        bound = spec.bind(bound)
        present = self.object_names()
        for name in spec.object_args(bound):
            if name not in present:
                param = next(p.name for p in spec.params if bound[p.name] == name)
                raise UnknownObjectError(
                    f"{skill}({param}={name!r}): no object named {name!r} on the table; "
                    f"objects present: {present}"
                )
        picks = skill in ("pick", "put_first_on_second")
        if picks and self.world.object_kind(bound["obj"]) != "block":
            raise InvalidIntentError(
                f"{skill}(obj={bound['obj']!r}): only blocks can be picked up; allowed: "
                f"{[n for n in present if self.world.object_kind(n) == 'block']}"
            )
        if skill in ("place", "put_first_on_second") and isinstance(bound["target"], str):
            obj = bound.get("obj") or self.motion.holding
            if bound["target"] == obj:
                raise InvalidIntentError(
                    f"{skill}(target={obj!r}): an object cannot be put on itself; allowed: "
                    "another object, or a point [x, y, z]"
                )
        return spec, bound

    def _held(self, skill: str, bound: dict) -> str:
        held = self.motion.holding
        if held is None:
            raise InvalidIntentError(
                f"{skill}(target={bound['target']!r}): the gripper holds nothing; "
                "allowed: pick(obj) first, then place(target)"
            )
        return held

    def _grasp_point(self, obj: str) -> np.ndarray:
        """Where the tool centre point goes to grasp ``obj`` (as ``pick`` computes it)."""
        center = self.world.object_pose(obj).position
        return center + np.array([0.0, 0.0, self.description.grasp.grasp_offset])

    def _drop_point(self, obj: str, target: str | list[float]) -> np.ndarray:
        """Where ``obj``'s centre is let go on/in ``target`` (an object or a point)."""
        if isinstance(target, str):
            return self.motion.drop_point(obj, target)
        return self.motion.table_drop_point(obj, target)
