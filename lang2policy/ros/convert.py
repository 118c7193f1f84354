"""Pure conversions between core values and standard ROS 2 messages (no node, no I/O).

Times are float seconds of the sim clock on the core side and builtin_interfaces/Time on the
ROS side. Incoming commands are validated here: a bad message raises InvalidCommandError saying
what was wrong and what is allowed, and nothing is half-applied.

Objects travel on ``/lang2policy/objects`` as a visualization_msgs/MarkerArray (viewable in
RViz): each message is the complete current set, a DELETEALL marker first, then one ADD marker
per object with the object's scene name in ``text``, its pose in ``pose`` (world frame, metres),
its shape in ``type``/``scale`` and its colour. Markers carry no velocity (readers assume zero).
"""

from __future__ import annotations

import array
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from builtin_interfaces.msg import Duration, Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from lang2policy.errors import InvalidCommandError
from lang2policy.mpc.model import ObjectState

_NS = 1_000_000_000
OBJECTS_NS = "lang2policy/objects"
_SHAPES = {"block": Marker.CUBE, "bowl": Marker.CYLINDER}


class ObjectPose(NamedTuple):
    """What ``object_markers`` needs to know of one object."""

    name: str
    position: Sequence[float]
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0)  # w, x, y, z (MuJoCo order)
    kind: str = ""  # "block" | "bowl" | anything else (drawn as a sphere)
    size: float = 0.0125  # half-size of a block, radius of a bowl (m)
    rgba: Sequence[float] = (0.6, 0.6, 0.6, 1.0)


def time_msg(seconds: float) -> Time:
    """builtin_interfaces/Time for ``seconds`` (>= 0), rounded to the nanosecond."""
    ns = round(seconds * _NS)
    return Time(sec=ns // _NS, nanosec=ns % _NS)


def to_seconds(stamp: Time | Duration) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def clock(seconds: float) -> Clock:
    return Clock(clock=time_msg(seconds))


def joint_state(
    names: Sequence[str],
    positions: Sequence[float],
    velocities: Sequence[float] | None = None,
    stamp: float = 0.0,
) -> JointState:
    """sensor_msgs/JointState; velocities (if given) in the same order as ``names``."""
    msg = JointState()
    msg.header.stamp = time_msg(stamp)
    msg.name = list(names)
    msg.position = [float(v) for v in positions]
    if velocities is not None:
        msg.velocity = [float(v) for v in velocities]
    if len(msg.position) != len(msg.name) or (msg.velocity and len(msg.velocity) != len(msg.name)):
        raise ValueError(
            f"JointState needs one position (and velocity) per name: {len(msg.name)} names, "
            f"{len(msg.position)} positions, {len(msg.velocity)} velocities"
        )
    return msg


def trajectory_points(
    msg: JointTrajectory, known_names: Sequence[str]
) -> list[tuple[float, dict[str, float]]]:
    """Validated (time_from_start seconds, {joint: position}) points of a JointTrajectory.

    Rules: joint names must be known and unique; every point has exactly one position per
    name; positions are finite; time_from_start is >= 0 and non-decreasing. A trajectory with
    no points is valid and returns [] (it means: stop and hold). Velocities, accelerations and
    efforts are ignored (positions are interpolated linearly).
    """
    names = list(msg.joint_names)
    points = list(msg.points)
    if not points:
        return []
    if not names:
        raise InvalidCommandError(
            f"trajectory has {len(points)} points but no joint_names; name a subset of "
            f"{list(known_names)}"
        )
    unknown = [n for n in names if n not in known_names]
    if unknown:
        raise InvalidCommandError(
            f"trajectory names unknown joints {unknown}; allowed joint names: {list(known_names)}"
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidCommandError(f"trajectory names joints more than once: {duplicates}")
    result: list[tuple[float, dict[str, float]]] = []
    previous = 0.0
    for index, point in enumerate(points):
        positions = list(point.positions)
        if len(positions) != len(names):
            raise InvalidCommandError(
                f"trajectory point {index} has {len(positions)} positions; it must have one per "
                f"joint name ({len(names)}: {names})"
            )
        bad = [n for n, v in zip(names, positions, strict=True) if not math.isfinite(v)]
        if bad:
            raise InvalidCommandError(
                f"trajectory point {index} has non-finite positions for {bad}; "
                "positions must be finite numbers (rad, gripper 0..1)"
            )
        t = to_seconds(point.time_from_start)
        if t < 0.0:
            raise InvalidCommandError(
                f"trajectory point {index} has negative time_from_start {t:.3f} s; times must "
                "be >= 0 and non-decreasing"
            )
        if t < previous:
            raise InvalidCommandError(
                f"trajectory point {index} has time_from_start {t:.3f} s before the previous "
                f"point's {previous:.3f} s; times must be non-decreasing"
            )
        previous = t
        result.append((t, dict(zip(names, (float(v) for v in positions), strict=True))))
    return result


def image(rgb: np.ndarray, stamp: float, frame_id: str) -> Image:
    """sensor_msgs/Image (encoding rgb8) from an (height, width, 3) uint8 array."""
    rgb = np.ascontiguousarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an (H, W, 3) uint8 RGB array, got {rgb.dtype} {rgb.shape}")
    msg = Image()
    msg.header.stamp = time_msg(stamp)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(rgb.shape[0]), int(rgb.shape[1])
    msg.encoding = "rgb8"
    msg.is_bigendian = 0
    msg.step = msg.width * 3
    msg.data = array.array("B", rgb.tobytes())  # array.array skips the per-byte field check
    return msg


def camera_info(
    k: np.ndarray, width: int, height: int, frame_id: str, stamp: float = 0.0
) -> CameraInfo:
    """sensor_msgs/CameraInfo of an undistorted pinhole camera with intrinsics ``k`` (3x3)."""
    k = np.asarray(k, dtype=float)
    if k.shape != (3, 3):
        raise ValueError(f"K must be 3x3, got shape {k.shape}")
    msg = CameraInfo()
    msg.header.stamp = time_msg(stamp)
    msg.header.frame_id = frame_id
    msg.width, msg.height = int(width), int(height)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = k.flatten().tolist()
    msg.r = np.eye(3).flatten().tolist()
    msg.p = np.hstack([k, np.zeros((3, 1))]).flatten().tolist()
    return msg


def trajectory(
    names: Sequence[str],
    points: Sequence[tuple[float, Sequence[float]]],
    stamp: float | None = None,
) -> JointTrajectory:
    """trajectory_msgs/JointTrajectory from joint names and (time_from_start s, positions).

    ``stamp`` (s, the robot's clock): when the trajectory starts, as joint_trajectory_controller
    reads the header stamp (the safety node stamps what it forwards; robot nodes refuse it once
    older than their ``command_deadline``). None or 0: the receiver starts it on arrival.
    """
    msg = JointTrajectory(joint_names=list(names))
    if stamp:
        msg.header.stamp = time_msg(stamp)
    for t, positions in points:
        ns = round(t * _NS)
        values = [float(v) for v in positions]
        if len(values) != len(msg.joint_names) or not all(map(math.isfinite, values)):
            raise ValueError(
                f"a trajectory point needs {len(msg.joint_names)} finite positions, got {values}"
            )
        msg.points.append(
            JointTrajectoryPoint(
                positions=values, time_from_start=Duration(sec=ns // _NS, nanosec=ns % _NS)
            )
        )
    return msg


def object_markers(
    objects: Sequence[ObjectPose], stamp: float, frame_id: str = "world"
) -> MarkerArray:
    """The complete object set as a MarkerArray: DELETEALL, then one ADD marker per object."""
    clear = Marker(ns=OBJECTS_NS, action=Marker.DELETEALL)
    clear.header.stamp, clear.header.frame_id = time_msg(stamp), frame_id
    markers = [clear]
    for index, obj in enumerate(objects):
        marker = Marker(ns=OBJECTS_NS, id=index, action=Marker.ADD, text=obj.name)
        marker.header = clear.header
        marker.type = _SHAPES.get(obj.kind, Marker.SPHERE)
        p, q = marker.pose.position, marker.pose.orientation
        p.x, p.y, p.z = (float(v) for v in obj.position)
        q.w, q.x, q.y, q.z = (float(v) for v in obj.quat)
        diameter = 2.0 * obj.size
        height = obj.size if obj.kind == "bowl" else diameter
        marker.scale.x, marker.scale.y, marker.scale.z = diameter, diameter, height
        c = marker.color
        c.r, c.g, c.b, c.a = (float(v) for v in obj.rgba)
        markers.append(marker)
    return MarkerArray(markers=markers)


def objects_from_markers(msg: MarkerArray) -> dict[str, ObjectState]:
    """Object poses by name from ``/lang2policy/objects`` (see the module docstring).

    ADD/MODIFY markers are objects (name in ``text``, else ``ns``/``id``); DELETE and DELETEALL
    markers are skipped. An all-zero quaternion means identity (RViz does the same). Raises
    ValueError for a duplicate name or a non-finite pose; nothing is half-read.
    """
    objects: dict[str, ObjectState] = {}
    for marker in msg.markers:
        if marker.action != Marker.ADD:
            continue
        name = marker.text.strip() or f"{marker.ns}/{marker.id}"
        if name in objects:
            raise ValueError(f"object '{name}' appears twice in one MarkerArray")
        p, q = marker.pose.position, marker.pose.orientation
        position, quat = (p.x, p.y, p.z), (q.w, q.x, q.y, q.z)
        if not all(map(math.isfinite, position + quat)):
            raise ValueError(f"object '{name}' has a non-finite pose {position} {quat}")
        if not any(quat):
            quat = (1.0, 0.0, 0.0, 0.0)
        objects[name] = ObjectState(position, quat)
    return objects
