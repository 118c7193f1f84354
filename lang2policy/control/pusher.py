"""Pushing objects along the table: the gripper face that pushes, and the push plan.

A closed gripper is not centred on the tool centre point (on the SO-101 the moving jaw closes
onto the fixed jaw, about 2 cm to one side), so a push that aims the tool centre point at the
object misses it or catches it off-centre. ``pusher_face`` reads the gripper's collision
geometry at a joint configuration and says how far ahead of the tool centre point, and how far
to the side, the face that leads in a given direction lies; ``plan_push`` lines that face up
with the object.

Measured in simulation (6 cm pushes toward the workspace centre, 20 seeded layouts): SO-101
median 2.0 mm, worst 6.5 mm (3 of 20 out of reach for an upright gripper); Panda median 1.7 mm,
worst 12.5 mm.

After the push the tool lifts straight up. It used to back off 1 cm first, but a block jammed
under the SO-101's jaw (whose body overhangs the pad) was dragged back with it. Of the 250
push demonstrations of ``lang2policy record demos --task-family pick_place,push,lift
--episodes 250 --seed 0`` (7 cm pushes), 225 succeeded with the back-off and 240 lifting
straight up; most of the rest are far pushes toward the top where the block jams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import mujoco
import numpy as np

from lang2policy.control.kinematics import Kinematics
from lang2policy.control.scene_query import SceneQuery, require_object
from lang2policy.control.tool_paths import ToolPaths, above
from lang2policy.errors import UnreachableError

PUSH_CLEARANCE = 0.025  # gap between the tool and the object before a push starts
_PUSH_TABLE_GAP = 0.003  # least gap (metres) between the pushing gripper and the table
# The tool rises this much per metre pushed (at most a quarter of the object's height): the
# pad then slides up the object's face instead of down it, which would press the object into
# the table, jam it and bend the compliant arm.
_PUSH_RISE = 0.1
_PUSH_FOLLOW_THROUGH = 0.004  # push this far past the target: the object lags the tool a little
PUSH_SPEED = 0.05  # default top speed (m/s) of the tool while it pushes
_PUSH_TURNS = (0.0, math.pi, math.pi / 2, -math.pi / 2)  # gripper yaws tried, from the heading
# Only an upright gripper (tilt 0) pushes: a tilted one leads with a slanted face that rides
# up over the object (measured on the SO-101: 3 cm misses at a 0.3 rad tilt).
_FACE_DEPTH = 0.004  # vertices this close (metres) behind the foremost one belong to the face


@dataclass(frozen=True)
class PusherFace:
    """The leading face of the closed gripper, relative to the tool centre point (metres)."""

    front: float  # how far ahead of the tool centre point, along the push direction
    lateral: float  # centre of the face across the push direction (+ = to the left of it)
    width: float  # extent of the face across the push direction
    depth: float  # how far the gripper's lowest point lies below the tool centre point


@dataclass(frozen=True)
class PushPlan:
    """A planned push: where the tool centre point starts and ends the push (world frame), the
    lift height, the gripper yaw, the joint paths (down to the start, along the push, up from
    its end) and the gripper face that pushes."""

    obj: str
    start: np.ndarray
    end: np.ndarray
    lift: float
    yaw: float
    down: np.ndarray
    along: np.ndarray
    up: np.ndarray
    face: PusherFace

    def points(self) -> list[np.ndarray]:
        """Every point the tool centre point is moved to, in order (after the transit)."""
        return [
            above(self.start, self.lift),
            self.start,
            self.end,
            above(self.end, self.lift),
        ]


class PushContext(Protocol):
    """What planning a push needs (the motion primitives provide it): the arm's kinematics, the
    objects, the tool path planner and the joints now."""

    kin: Kinematics
    scene: SceneQuery
    paths: ToolPaths

    def joints(self) -> np.ndarray: ...


def gripper_geoms(kin: Kinematics) -> list[int]:
    """Collision geoms of the body holding the ee site and of every body below it."""
    model = kin.model
    root = int(model.site_bodyid[kin.arm.ee_site_id])
    geoms = []
    for geom in range(model.ngeom):
        body = int(model.geom_bodyid[geom])
        while body not in (root, 0):
            body = int(model.body_parentid[body])
        if body == root and (model.geom_contype[geom] or model.geom_conaffinity[geom]):
            geoms.append(geom)
    return geoms


def _local_points(model: mujoco.MjModel, geom: int) -> np.ndarray:
    """Points (geom frame) whose convex hull covers the geom: mesh vertices or box corners."""
    if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH:
        mesh = model.geom_dataid[geom]
        start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
        return np.asarray(model.mesh_vert[start : start + count], float)
    center, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
    signs = np.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], float)
    return center + signs * half


def pusher_face(
    kin: Kinematics,
    geoms: list[int],
    q: np.ndarray,
    direction: np.ndarray,
    top: float,
) -> PusherFace | None:
    """The face of the closed gripper that leads in ``direction`` (a horizontal unit vector)
    at arm joints ``q``, counting only gripper parts below ``top`` (the pushed object's top).

    None when no part of the gripper is that low."""
    model, data = kin.model, kin.scratch
    data.qpos[kin.arm.qpos_adr] = q
    data.qpos[kin.arm.gripper_qpos_adr] = kin.arm.gripper_closed
    mujoco.mj_kinematics(model, data)
    site = kin.arm.ee_site_id
    tool = data.site_xpos[site] + data.site_xmat[site].reshape(3, 3) @ kin.center_offset
    points = [
        data.geom_xpos[g] + _local_points(model, g) @ data.geom_xmat[g].reshape(3, 3).T
        for g in geoms
    ]
    cloud = np.vstack(points) if points else np.zeros((0, 3))
    depth = float(tool[2] - cloud[:, 2].min()) if len(cloud) else 0.0
    cloud = cloud[cloud[:, 2] <= top]
    if len(cloud) == 0:
        return None
    along_axis = np.asarray(direction, float)[:2]
    side_axis = np.array([-along_axis[1], along_axis[0]])
    relative = cloud[:, :2] - tool[:2]
    along, side = relative @ along_axis, relative @ side_axis
    front = float(along.max())
    face = side[along >= front - _FACE_DEPTH]
    lateral, width = float(face.min() + face.max()) / 2, float(face.max() - face.min())
    return PusherFace(front, lateral, width, depth)


def face_centre(
    kin: Kinematics, geoms: list[int], q: np.ndarray, direction: np.ndarray, top: float
) -> np.ndarray:
    """Where the closed gripper's face leading in ``direction`` is centred at arm joints
    ``q`` (world x, y; z: the tool centre point's height): what lines up with a pushed object,
    wherever the gripper's turn puts it beside the tool centre point."""
    face = pusher_face(kin, geoms, q, direction, top)
    data, site = kin.scratch, kin.arm.ee_site_id
    tool = data.site_xpos[site] + data.site_xmat[site].reshape(3, 3) @ kin.center_offset
    if face is None:
        return tool.copy()
    along = np.asarray(direction, float)[:2]
    side = np.array([-along[1], along[0]])
    return np.array([*(tool[:2] + along * face.front + side * face.lateral), tool[2]])


def push_height(motion: PushContext, obj: str) -> float:
    """Tool centre point height for pushing ``obj``: its mid-height (``plan_push`` raises it
    where the closed gripper would otherwise touch the table)."""
    return object_top(motion, obj) / 2


def object_top(motion: PushContext, obj: str) -> float:
    """Height of the top of ``obj`` resting on the table."""
    sizes = motion.kin.description.objects
    return 2 * sizes.block_half if motion.scene.object_kind(obj) == "block" else sizes.bowl_height


def nominal_push_points(motion: PushContext, obj: str, target_xy) -> list[np.ndarray]:
    """Where a push of ``obj`` to ``target_xy`` would move the tool, from geometry alone (no
    IK, so also for pushes out of reach): the points of ``PushPlan.points`` for a pusher face
    centred on the tool centre point. A real plan's points lie within a few cm of these."""
    require_object(motion.scene, obj)
    center = motion.scene.object_pose(obj).position
    goal = np.asarray(target_xy, float)[:2]
    direction = _unit(goal - center[:2], fallback=center[:2])
    half, height = motion.scene.object_size(obj), push_height(motion, obj)
    start = np.array([*(center[:2] - direction * (half + PUSH_CLEARANCE)), height])
    end = np.array([*(goal - direction * half), height])
    lift = motion.kin.description.grasp.approach_height
    return [above(start, lift), start, end, above(end, lift)]


def _unit(vector: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1, or ``fallback`` scaled so when ``vector`` is ~0."""
    if np.linalg.norm(vector) < 1e-6:
        vector = fallback
    return vector / max(float(np.linalg.norm(vector)), 1e-9)


def plan_push(motion: PushContext, obj: str, target_xy) -> PushPlan:
    """Plan (IK only, the arm does not move) a straight push of ``obj`` along the table
    so that its centre ends at ``target_xy`` (world x, y).

    The closed gripper's leading face is turned parallel to the block face that most nearly
    faces the push direction and centred on it, so the block moves with the gripper instead
    of turning. The tool goes down behind the object, pushes in a straight line and lifts
    straight up. Tries the upright gripper turned four ways, taking the first whose face is at least
    half as wide as the object (else the widest). Raises ``UnreachableError`` if none works."""
    require_object(motion.scene, obj)
    pose = motion.scene.object_pose(obj)
    goal = np.asarray(target_xy, float)[:2]
    # nothing to push (goal = centre): approach from the base side
    direction = _unit(goal - pose.position[:2], fallback=pose.position[:2])
    heading = math.atan2(direction[1], direction[0])
    if motion.scene.object_kind(obj) == "block":  # face the block face nearest the heading
        heading += (pose.yaw() - heading + math.pi / 4) % (math.pi / 2) - math.pi / 4
    best, error = None, None
    for turn in _PUSH_TURNS:
        try:
            plan = _plan_one(motion, obj, goal, direction, heading, heading + turn)
        except UnreachableError as exc:
            error = exc
            continue
        if plan is None:
            continue
        if plan.face.width >= motion.scene.object_size(obj):
            return plan
        if best is None or plan.face.width > best.face.width:
            best = plan
    if best is None:
        raise UnreachableError(str(error) if error else f"push('{obj}'): no way to push it found")
    return best


def _plan_one(motion, obj, goal, direction, heading, yaw) -> PushPlan | None:
    """The push with the gripper at ``yaw``, its leading face square to ``heading``."""
    what = f"push('{obj}')"
    center = motion.scene.object_pose(obj).position
    normal = np.array([math.cos(heading), math.sin(heading)])
    side = np.array([-normal[1], normal[0]])
    half, top = motion.scene.object_size(obj), object_top(motion, obj)
    geoms = gripper_geoms(motion.kin)
    probe = np.array([*(center[:2] - direction * (half + 0.03)), push_height(motion, obj)])
    face = pusher_face(
        motion.kin, geoms, motion.paths.solve(probe, yaw, 0.0, motion.joints(), what), normal, top
    )
    if face is not None and face.depth + _PUSH_TABLE_GAP > probe[2]:
        probe[2] = face.depth + _PUSH_TABLE_GAP  # the fingertips would scrape the table
        q_probe = motion.paths.solve(probe, yaw, 0.0, motion.joints(), what)
        face = pusher_face(motion.kin, geoms, q_probe, normal, top)
    if face is None:
        return None
    height, lift = probe[2], motion.kin.description.grasp.approach_height
    # the tool centre point relative to the object's centre when the face touches it
    touch = -normal * (half + face.front) - side * face.lateral
    start = np.array([*(center[:2] + touch - direction * PUSH_CLEARANCE), height])
    rise = min(_PUSH_RISE * float(np.linalg.norm(goal - center[:2])), top / 4)
    end = np.array([*(goal + touch + direction * _PUSH_FOLLOW_THROUGH), height + rise])
    q_above = motion.paths.solve(above(start, lift), yaw, 0.0, motion.joints(), what)
    down = motion.paths.line(above(start, lift), start, yaw, 0.0, q_above)
    along = motion.paths.line(start, end, yaw, 0.0, down[-1])
    up = motion.paths.line(end, above(end, lift), yaw, 0.0, along[-1])
    return PushPlan(obj, start, end, lift, yaw, down, along, up, face)
