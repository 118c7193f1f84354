"""The perception node: publishes the objects on the table on ``/lang2policy/objects``.

Parameter ``source`` picks where they come from:

- ``ground_truth``: the simulator's poses (``ground_truth_topic``, default ``/sim/objects``),
  checked and passed on.
- ``camera``: colour segmentation of ``/camera/<camera>/image_raw`` (rgb8, bgr8, rgba8 or
  bgra8) with its ``camera_info``, the robot's pixels masked out using ``/joint_states``
  (``lang2policy.perception``). The camera's pose in the world is read from the simulation
  model of ``robot`` (``camera_pose: sim``, fixed cameras only) or from a calibration file
  (``camera_pose: hardware/camera_top.yaml``; format in ``perception.camera_pose``), so the
  same node runs on the real camera.

Output: the complete object set as a visualization_msgs/MarkerArray (``convert.object_markers``),
stamped with the time of the input it came from; on every input (``publish_rate: 0``) or at a
fixed rate. An object the camera stops seeing stays for ``max_missed`` frames, then is dropped.
Logs the object set at start and whenever it changes.

A camera that stops publishing for ``image_timeout`` s (default 2; steady clock) makes the node
say so on ``/lang2policy/status``: ``{"node": "perception", "state": "blind", "detail": "no
image from camera 'top' since 10:41:07 (3.2 s)"}`` (``perception.image_watch``), which the
planner refuses new plans with; ``seeing`` when images come back.
"""

from __future__ import annotations

import json
import time
from collections import deque

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.clock import Clock, ClockType
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray

from lang2policy.errors import ConfigError
from lang2policy.graph.topics import (
    JOINT_STATES,
    OBJECTS,
    PERCEPTION_NODE,
    SIM_SCENE,
    STATUS,
    StatusEvent,
    camera_topics,
)
from lang2policy.perception import (
    CameraPerception,
    ObjectTracker,
    PerceivedObject,
    Update,
    decode_image,
    geometry_for_robot,
    intrinsics_from_camera_info,
    load_camera_pose,
    load_palette,
    scene_palette,
    sim_camera_pose,
    validate_objects,
)
from lang2policy.perception.bowl_wall import UNCLEAR, UnclearNotice
from lang2policy.perception.image_watch import BLIND, SEEING, ImageWatch
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.ros.qos import LATCHED

SOURCES = ("ground_truth", "camera")
_KINDS = {Marker.CUBE: "block", Marker.CYLINDER: "bowl"}
_LATEST = QoSProfile(depth=1, reliability=qos_profile_sensor_data.reliability)


class PerceptionNode(ReadOnlyParameters):
    """``lang2policy_perception``: see the module docstring."""

    executable = "perception_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_perception", **kwargs)
        self.source = self._param("source")
        if self.source not in SOURCES:
            raise ConfigError(f"parameter 'source' must be one of {SOURCES}, got {self.source!r}")
        self.robot = self._param("robot")
        self.frame_id = self._param("frame_id")
        rate = self._param("publish_rate")
        self.tracker = ObjectTracker(0)  # ground truth is complete: what it omits is gone
        self.camera: CameraPerception | None = None
        self.unclear_notice = UnclearNotice()
        self._stamp = 0.0
        self._warned: set[str] = set()
        self.frames = 0  # inputs processed (images or ground-truth messages)
        self.frame_seconds: deque[float] = deque(maxlen=1000)  # camera time per image (s)
        self._pub = self.create_publisher(MarkerArray, OBJECTS.relative, 10)
        if self.source == "camera":
            self._start_camera()
        else:
            self._start_ground_truth()
        self._timer = None
        if rate > 0:
            self._timer = self.create_timer(
                1.0 / rate, self._publish, clock=Clock(clock_type=ClockType.STEADY_TIME)
            )
        self.get_logger().info(
            f"{self.describe()}; publishing {OBJECTS.name} "
            f"{f'at {rate:g} Hz' if rate > 0 else 'on every input'}"
        )

    # ----------------------------------------------------------------- ground truth
    def _start_ground_truth(self) -> None:
        self.ground_truth_topic = self._param("ground_truth_topic")
        self.create_subscription(MarkerArray, self.ground_truth_topic, self._on_markers, 10)

    def _on_markers(self, msg: MarkerArray) -> None:
        try:
            objects = validate_objects(records_from_markers(msg))
        except ConfigError as exc:
            self._error(f"ignored a bad message on {self.ground_truth_topic}: {exc}")
            return
        stamp = next((convert.to_seconds(m.header.stamp) for m in msg.markers), self._stamp)
        self._take(self.tracker.update(objects), stamp)

    # ----------------------------------------------------------------- camera
    def _start_camera(self) -> None:
        self.camera_name = self._param("camera")
        pose_source = self._param("camera_pose")
        palette_file = self._param("palette_file")
        use_mask = self._param("robot_mask")
        dilate = self._param("mask_dilate_px")
        max_missed = self._param("max_missed")
        confirm = self._param("confirm_frames")
        table_z = self._param("table_z")
        if pose_source == "sim":
            pose = sim_camera_pose(self.robot, self.camera_name)
        else:
            pose = load_camera_pose(pose_source, self.camera_name)
        palette = load_palette(palette_file) if palette_file else scene_palette(self.robot)
        self.camera = CameraPerception(
            self.robot,
            pose,
            palette,
            geometry_for_robot(self.robot, float(table_z)),
            robot_mask=bool(use_mask),
            dilate_px=int(dilate),
            max_missed=int(max_missed),
            confirm=int(confirm),
        )
        self.tracker = self.camera.tracker
        self.pose_source = pose_source
        image_topic, info_topic = camera_topics(self.camera_name)
        self.create_subscription(Image, image_topic, self._on_image, _LATEST)
        self.create_subscription(CameraInfo, info_topic, self._on_info, _LATEST)
        if use_mask:
            self.create_subscription(JointState, JOINT_STATES.relative, self._on_joints, 10)
        self._scene_since = -1.0  # images stamped up to this show a scene the sim replaced
        self.create_subscription(TimeMsg, SIM_SCENE.relative, self._on_scene, LATCHED)
        self._watch_images()

    def _watch_images(self) -> None:
        """Say ``blind`` on the status topic when no image came for ``image_timeout`` s."""
        timeout = self._param("image_timeout")
        self.image_watch = ImageWatch(self.camera_name, float(timeout), time.monotonic())
        self._status = self.create_publisher(String, STATUS.relative, 10)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._watch_timer = self.create_timer(
            min(0.5, timeout / 2), self._check_images, clock=steady
        )

    def _check_images(self) -> None:
        line = self.image_watch.check(time.monotonic())
        if line is not None:
            self.get_logger().warning(f"{line}: the planner will not plan on an old view")
            self._say(BLIND, line)

    def _say(self, state: str, detail: str) -> None:
        event = StatusEvent(PERCEPTION_NODE, state, "", detail)
        self._status.publish(String(data=json.dumps(event.to_dict())))

    def _on_scene(self, msg: TimeMsg) -> None:
        """A simulator's new scene from sim time ``msg`` on: forget the objects kept while
        hidden (they were teleported away; a real table never jumps, and on a robot nothing
        publishes this) and drop the images taken before it."""
        since = convert.to_seconds(msg)
        if since > self._scene_since >= 0.0:
            if self.camera is not None:
                self.camera.reset()  # and the block in the jaws
            else:
                self.tracker.clear()
            self.get_logger().info(f"new scene from {since:.2f} s: the table was reset")
        self._scene_since = max(self._scene_since, since)

    def _on_info(self, msg: CameraInfo) -> None:
        try:
            intrinsics = intrinsics_from_camera_info(
                list(msg.k), msg.width, msg.height, list(msg.d), msg.distortion_model
            )
        except ConfigError as exc:
            self._error(f"ignored camera_info of '{self.camera_name}': {exc}")
            return
        if self.camera.set_intrinsics(intrinsics):
            self.get_logger().info(
                f"camera '{self.camera_name}': {msg.width}x{msg.height}, "
                f"fx {intrinsics.k[0, 0]:.1f} px"
            )

    def _on_joints(self, msg: JointState) -> None:
        joints = dict(zip(msg.name, msg.position, strict=False))
        self.camera.set_joints(joints, convert.to_seconds(msg.header.stamp))

    def _on_image(self, msg: Image) -> None:
        back = self.image_watch.image(time.monotonic())
        if back is not None:
            self.get_logger().info(back)
            self._say(SEEING, back)
        missing = self.camera.waiting_for()
        if missing:
            self._warn_once(missing, f"camera '{self.camera_name}': waiting for {missing}")
            return
        try:
            stamp = convert.to_seconds(msg.header.stamp)
            if stamp <= self._scene_since:
                return  # the frame taken at the reset instant still shows the old scene
            rgb = decode_image(msg.data, msg.width, msg.height, msg.step, msg.encoding)
            update = self.camera.process(rgb, stamp)
        except ConfigError as exc:
            self._error(f"skipped an image of camera '{self.camera_name}': {exc}")
            return
        self.frame_seconds.append(self.camera.seconds)
        self._say_unclear()
        self._take(update, stamp)

    def _say_unclear(self) -> None:
        """Say where a bowl is seen but not named (``bowl_wall``), once per change."""
        line = self.unclear_notice.update(self.camera.detector.unclear)
        if line is not None:
            self.get_logger().warning(line)
            self._say(UNCLEAR, line)

    # ----------------------------------------------------------------- output
    def _take(self, update: Update, stamp: float) -> None:
        self.frames += 1
        self._stamp = stamp
        if update.changed or self.frames == 1:
            self._log_change(update)
        if self._timer is None:
            self._publish()

    def _publish(self) -> None:
        if self.frames == 0:
            return  # nothing observed yet: an empty set would claim the table is empty
        poses = [convert.ObjectPose(*obj) for obj in self.tracker.objects]
        self._pub.publish(convert.object_markers(poses, self._stamp, self.frame_id))

    def _log_change(self, update: Update) -> None:
        found = {o.name: [round(v, 3) for v in o.position] for o in self.tracker.objects}
        change = f"added {list(update.added)}" if update.added else ""
        if update.dropped:
            change += f"{'; ' if change else ''}dropped {list(update.dropped)}"
        timing = ""
        if self.frame_seconds:
            timing = f" ({1000 * self.frame_seconds[-1]:.1f} ms for this image)"
        self.get_logger().info(f"objects: {change or 'none'}; now {found}{timing}")

    def describe(self) -> str:
        if self.source == "ground_truth":
            return f"ground truth from {self.ground_truth_topic}"
        mask = "robot masked" if self.camera.mask else "no robot mask"
        pose = self.camera.pose
        return (
            f"camera '{self.camera_name}' of {self.robot} (pose from {self.pose_source}: "
            f"position {[round(float(v), 3) for v in pose.position]}), {mask}, objects unseen "
            f"for more than {self.camera.tracker.max_missed} images dropped"
        )

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(message)

    def _error(self, message: str) -> None:
        self.get_logger().error(message, throttle_duration_sec=5.0)

    def destroy_node(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        super().destroy_node()


def records_from_markers(msg: MarkerArray) -> list[PerceivedObject]:
    """Object records from a MarkerArray in the format of ``convert.object_markers``.

    ADD markers are objects (name in ``text``, else ``ns/id``; kind from the marker type, size
    from its scale); DELETE/DELETEALL markers are skipped. An all-zero quaternion is identity,
    as RViz takes it. The records are not validated here: ``validate_objects`` does that.
    """
    records = []
    for marker in msg.markers:
        if marker.action != Marker.ADD:
            continue
        p, q, c = marker.pose.position, marker.pose.orientation, marker.color
        quat = (q.w, q.x, q.y, q.z) if any((q.w, q.x, q.y, q.z)) else (1.0, 0.0, 0.0, 0.0)
        records.append(
            PerceivedObject(
                marker.text.strip() or f"{marker.ns}/{marker.id}",
                (p.x, p.y, p.z),
                quat,
                _KINDS.get(marker.type, ""),
                marker.scale.x / 2.0,
                (c.r, c.g, c.b, c.a),
            )
        )
    return records


main = entry_point(
    PerceptionNode, "perception_node", "run the perception node until Ctrl-C or shutdown"
)


if __name__ == "__main__":
    raise SystemExit(main())
