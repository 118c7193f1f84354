"""The host side of the robot API: where validated skill calls are planned and executed.

The sandbox runner asks a ``SkillBackend`` which objects exist, which Cartesian points a call
would move the tool to (before it runs, for the privilege policy), and then executes it.
``SimSkillBackend`` does this over a simulated ``Session``.

Positions are those of the tool centre point: the point between the jaws where a grasped
object's centre sits. ``move_to(p)`` puts it at ``p``, ``get_ee_pos()`` reports it, and every
target is one. Query results are plain JSON data (lists of floats rounded to 0.1 mm).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Protocol

import numpy as np

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
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.geometry import corner_point, object_bbox, table_bounds
from lang2policy.skills.spec import Skill
from lang2policy.tasks import Session

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

    def execute(self, skill: str, bound: dict, time_limit: float | None = None) -> object:
        """Run one validated call; return a JSON-able value. Raises Lang2PolicyError
        subclasses with helpful messages; the arm holds still after any error.
        time_limit: seconds of robot time this motion may take; exceeded -> MotionTimeExceeded.
        """
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


def _sample_segments(points: list[np.ndarray], step: float = 0.01) -> list[np.ndarray]:
    """Points along the polyline through ``points``, at most ``step`` apart."""
    samples = [np.asarray(points[0], float)]
    for a, b in itertools.pairwise(points):
        count = max(1, int(np.ceil(np.linalg.norm(b - a) / step)))
        samples.extend(a + (b - a) * t for t in np.linspace(0.0, 1.0, count + 1)[1:])
    return samples


def _joint_path_points(motion: MotionPrimitives, q_from, q_to, count: int = 40):
    """(tool centre points, ee-site points) along a joint-space move: what the gripper
    actually sweeps through."""
    q_from, q_to = np.asarray(q_from, float), np.asarray(q_to, float)
    tool, site = [], []
    for t in np.linspace(0.0, 1.0, count):
        q = q_from + (q_to - q_from) * t
        tool.append(motion.tool_point(q))
        site.append(motion.kin.forward(q).position)
    return tool, site


def _ring(radius: float) -> list[np.ndarray]:
    """Horizontal offsets bounding where the ee site can be around the tool centre point."""
    angles = np.linspace(0.0, 2.0 * np.pi, 8, endpoint=False)
    return [radius * np.array([np.cos(a), np.sin(a), 0.0]) for a in angles]


def _point(values) -> Point:
    x, y, z = (float(v) for v in values)
    return (x, y, z)


class SimSkillBackend:
    """Skills over a simulated ``Session`` (world, robot, kinematics, motion primitives)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._said: list[str] = []
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
    def world(self) -> World:
        return self.session.world

    @property
    def motion(self) -> MotionPrimitives:
        """The session's motion primitives (``Session.reset`` makes new ones)."""
        return self.session.primitives

    @property
    def description(self) -> RobotDescription:
        return self.session.world.description

    # ------------------------------------------------------------ SkillBackend
    def object_names(self) -> list[str]:
        return list(self.world.object_names())

    def clock(self) -> float:
        return float(self.session.robot.get_observation().time)

    def said(self) -> list[str]:
        return list(self._said)

    def hold(self) -> None:
        """Command the arm to stay at its measured position (the gripper keeps its command)."""
        self.motion.hold_position()

    def path(self, skill: str, bound: dict) -> tuple[list[Point], list[Point]]:
        """(targets, sweep), planned once. Targets: the tool centre point's path, sampled about
        every centimetre along the way the motion will go (not just its end points), so a
        keep-out zone between two allowed points, or a joint-space move that bulges into one,
        is seen by the policy. Sweep: where the rest of the gripper goes along the same path:
        the ee site on the fixed jaw, exactly (forward kinematics) for joint-space moves, and
        bounded by a ring at the site's distance around each tool point for compound motions,
        whose wrist yaw is only decided while moving."""
        tool, body = self._paths(skill, bound)
        return [_point(p) for p in tool], [_point(p) for p in body]

    def targets(self, skill: str, bound: dict) -> list[Point]:
        return self.path(skill, bound)[0]

    def sweep(self, skill: str, bound: dict) -> list[Point]:
        return self.path(skill, bound)[1]

    def _paths(self, skill: str, bound: dict) -> tuple[list[np.ndarray], list[np.ndarray]]:
        spec, bound = self._bind(skill, bound)
        if spec.category != "motion":
            return [], []
        motion = self.motion
        if skill in ("move_to", "go_home"):
            if skill == "go_home":
                goal = self.world.arm.home
            else:
                position = np.asarray(bound["position"], float)
                try:
                    goal = motion.plan_move_to(position)
                except UnreachableError:  # the policy judges the point; execute() raises
                    return [position], []
                tool, site = _joint_path_points(motion, motion.joints(), goal)
                tool[-1] = position  # the IK lands within tolerance of what was asked
                return tool, site
            return _joint_path_points(motion, motion.joints(), goal)
        waypoints = self._waypoints(skill, bound)
        if not waypoints:
            return [], []  # open_gripper, close_gripper
        reach = float(np.linalg.norm(motion.kin.center_offset))
        tool = _sample_segments(self._transit(waypoints))
        return tool, [p + offset for p in tool for offset in _ring(reach)]

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

    def execute(self, skill: str, bound: dict, time_limit: float | None = None) -> object:
        spec, bound = self._bind(skill, bound)
        if spec.category == "query":
            return self._queries[skill](**bound)
        if spec.category == "speech":
            self._said.append(bound["text"])
            return None
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
