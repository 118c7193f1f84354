"""The MuJoCo simulation as a ROS 2 robot: the same topics a hardware driver offers.

Publishes ``/clock``, ``/joint_states`` (arm joints + normalised ``gripper``), the objects on the
table as ground truth on ``/sim/objects`` (parameter ``objects_topic``; visualization_msgs/
MarkerArray, the format of ``convert.object_markers``; at the control tick after an object
moved, else every ``OBJECTS_KEEPALIVE`` s of sim time; the perception node
turns it, or the camera images, into ``/lang2policy/objects``) and, per camera,
``/camera/<name>/image_raw`` + ``/camera/<name>/camera_info``; follows
``/arm_controller/joint_trajectory``; serves ``~/reset`` (std_srvs/Trigger; the answer is JSON
``{"seed", "objects", "sim_time"}``: messages stamped after ``sim_time`` show the new scene).
A steady-clock
timer advances physics by one control period of sim time per tick (the timer period is that
divided by ``real_time_factor``). Sim time on ``/clock`` never jumps back, across resets too.

Trajectories are followed as joint_trajectory_controller does (``TrajectoryFollower``): a new
one replaces the running one; a stamped one (the safety node stamps what it forwards with the
joint states' sim time) starts at its stamp from where the target was then, so one delivered
late runs at its planned pace, never compressed and never queued. ``CommandDeadline`` guards
against stale motion: a stamped trajectory older than ``command_deadline`` (0.3 s of sim time)
on arrival is not executed and the arm brakes to rest; a stamped stream that falls silent for
``stream_timeout`` (0.25 s) while the arm moves means the safety node is gone: the arm brakes
to rest and holds.

Cameras render in a thread of their own (a GL context belongs to the thread that created it,
and rendering must not stall the control loop); when rendering falls behind, frames are dropped.
A camera is rendered only while its ``image_raw`` topic has subscribers (checked at every frame
time, ``camera_rate`` of sim time), and its ``camera_info`` published only while that topic has
some: with ground-truth perception nobody listens, and the idle node costs only its physics and
its 50 Hz state messages (issue 16). ``rendered_frames`` counts the images rendered per camera.

The scene is the ``layout`` with ``objects`` placed by ``seed`` (``World.reset``), under the
``realism`` profile (off | mild | hard | a YAML file: each reset draws its look) and, with
``appearance`` (JSON of ``vla.sim.scenes.Appearance.to_dict``), a VLA episode's look: lights,
colours, front camera. With the seed, objects and look of an evaluation episode
(``vla.eval.rollout.evaluation_specs``) the node shows exactly that episode's scene.
"""

from __future__ import annotations

import copy
import json

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from rclpy.clock import Clock, ClockType
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.control.trajectory_follower import TrajectoryFollower, robot_braking
from lang2policy.errors import ConfigError, InvalidCommandError, Lang2PolicyError
from lang2policy.graph.topics import CLOCK, JOINT_STATES, SIM_SCENE, TRAJECTORY
from lang2policy.robots.sim_robot import SimRobot
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters, command_deadline
from lang2policy.ros.qos import LATCHED
from lang2policy.ros.sim_cameras import SimCameras
from lang2policy.scene.objects import COLORS
from lang2policy.scene.world import World
from lang2policy.vla.sim.scenes import Appearance

OBJECTS_KEEPALIVE = 0.5  # s of sim time between object messages while nothing moves
OBJECTS_MOVED = 1e-5  # m (and quaternion units): a smaller change of a pose is no motion
IDLE_OBJECT_TICKS = 5  # while the arm follows nothing, objects are checked every 5th tick


def world_object_poses(world: World) -> list[convert.ObjectPose]:
    """Ground-truth poses of the objects present in ``world``, for ``convert.object_markers``."""
    poses = []
    for name in world.present:
        pose, spec = world.object_pose(name), world.handle(name).spec
        colour = (*COLORS[spec.color], 1.0)
        size = world.object_size(name)
        poses.append(convert.ObjectPose(name, pose.position, pose.quat, spec.kind, size, colour))
    return poses


class SimNode(ReadOnlyParameters):
    """``lang2policy_sim``: World + SimRobot behind the ros2_control-style topic contract."""

    executable = "sim_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_sim", **kwargs)
        robot = self._param("robot")
        layout = self._param("layout")
        named = self._param("objects")
        self.named_objects = [o.strip() for o in named.split(",") if o.strip()] or None
        self.seed = int(self._param("seed"))
        self.control_rate = self._param("control_rate")
        self.camera_rate = self._param("camera_rate")
        width = int(self._param("camera_width"))
        height = int(self._param("camera_height"))
        rtf = self._param("real_time_factor")
        objects_topic = self._param("objects_topic")

        realism = self._realism()
        cameras = self._set_up_world(robot, layout, realism, width, height)
        self.resets = self.rejected_trajectories = 0
        self._period = 1.0 / self.control_rate
        self._clock_offset = 0.0  # keeps /clock monotonic across world resets
        self._objects_sent = None  # (names, poses, stamp) of the last objects message
        self._sent_target: np.ndarray | None = None  # the last target sent whole
        self._ticks = 0
        self.robot = SimRobot(self.world, control_period=self._period)
        self.robot.connect()
        self.follower = TrajectoryFollower(self.robot.limits.names, self._position())
        self.deadline = command_deadline(self)

        self._clock_pub = self.create_publisher(ClockMsg, CLOCK.relative, 10)
        self._joint_pub = self.create_publisher(JointState, JOINT_STATES.relative, 10)
        self._objects_pub = self.create_publisher(MarkerArray, objects_topic, 10)
        self.create_subscription(JointTrajectory, TRAJECTORY.relative, self._on_trajectory, 10)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._scene_pub = self.create_publisher(TimeMsg, SIM_SCENE.relative, LATCHED)
        self._scene_pub.publish(convert.time_msg(self.now()))
        self._camera = None
        if self.camera_rate > 0 and cameras:
            self._camera = SimCameras(self, cameras, width, height)
        self._next_frame = self.now()
        # Wall-clock timer (steady): the node must not wait on the /clock it publishes itself.
        self._timer = self.create_timer(
            self._period / rtf, self._tick, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        self.get_logger().info(
            f"{robot} on '{layout}' seed {self.seed}: objects {self.objects}; joints "
            f"{list(self.robot.limits.names)}; {self.control_rate:g} Hz control, cameras "
            f"{cameras if self._camera else 'off'} at {self.camera_rate:g} Hz; RTF {rtf:g}; "
            f"realism {realism.name}"
        )

    def _set_up_world(self, robot: str, layout: str, realism, width: int, height: int):
        """The world on its first layout (with a VLA episode's ``appearance``); returns the
        cameras to publish."""
        self.world = World(robot=robot, layout=layout, realism=realism)
        scene_cameras = [self.world.model.camera(i).name for i in range(self.world.model.ncam)]
        cameras = list(self._param("cameras", scene_cameras))
        self._check_cameras(cameras, scene_cameras, width, height)
        self.objects = self.world.reset(self.seed, self.named_objects)
        look = self._param("appearance")
        if look:
            self._apply_look(look)
        return cameras

    def _apply_look(self, text: str) -> None:
        """A VLA evaluation episode's look (lights, colours, front camera; kept across
        resets), so that with its ``seed`` and ``objects`` the node shows that episode's scene
        exactly (``lang2policy bench vla --graph``)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"parameter 'appearance' is not JSON ({exc}): {text[:80]!r}") from exc
        try:
            Appearance.from_dict(data, self.world).apply(self.world)
        except ConfigError as exc:
            raise ConfigError(f"parameter 'appearance': {exc}") from exc

    def _check_cameras(self, cameras, scene_cameras, width, height) -> None:
        unknown = [c for c in cameras if c not in scene_cameras]
        if unknown:
            raise ConfigError(
                f"parameter 'cameras': unknown {unknown}; the scene has {scene_cameras}"
            )
        vis = self.world.model.vis.global_
        if width > vis.offwidth or height > vis.offheight:
            raise ConfigError(
                f"camera size {width}x{height} exceeds the scene's offscreen buffer "
                f"{vis.offwidth}x{vis.offheight} (<visual><global offwidth/offheight>)"
            )

    # ----------------------------------------------------------------- control loop
    def now(self) -> float:
        """Sim time as published on /clock (seconds)."""
        return self._clock_offset + self.world.time

    def _position(self):
        return self.robot.get_observation().position

    def _tick(self) -> None:
        lost = self.deadline.lost_stream(self.now(), self.follower.active(self.now()))
        if lost:
            self.get_logger().warning(lost)
            self._brake()
        self._send_target(self.follower.target(self.now()))
        self.world.step_seconds(self._period)
        obs = self.robot.get_observation()
        stamp = self.now()
        self._clock_pub.publish(convert.clock(stamp))
        self._joint_pub.publish(convert.joint_state(obs.names, obs.position, obs.velocity, stamp))
        self._ticks += 1
        if self._ticks % IDLE_OBJECT_TICKS == 0 or self.follower.active(stamp):
            self._publish_objects(stamp)
        if self._camera is not None and stamp + 1e-9 >= self._next_frame:
            self._next_frame = max(self._next_frame + 1.0 / self.camera_rate, stamp)
            self._submit_frame(stamp)

    def _send_target(self, target: np.ndarray) -> None:
        """Send the follower's target, unless it is the one last sent whole (idle cost)."""
        sent = self._sent_target
        if sent is not None and not self.robot.last_clipped and np.array_equal(sent, target):
            return
        self.robot.send_action(target)
        self._sent_target = np.array(target, dtype=float)

    def _publish_objects(self, stamp: float) -> None:
        """The object poses, when one moved or ``OBJECTS_KEEPALIVE`` s after the last message:
        objects at rest (most of the time) are not sent 50 times a second through perception
        to every node (issue 16)."""
        poses = self.object_poses()
        names = tuple(p.name for p in poses)
        values = np.array([v for p in poses for v in (*p.position, *p.quat)], dtype=float)
        sent = self._objects_sent
        if (
            sent is not None
            and sent[0] == names
            and stamp < sent[2] + OBJECTS_KEEPALIVE
            and np.allclose(sent[1], values, rtol=0.0, atol=OBJECTS_MOVED)
        ):
            return
        self._objects_pub.publish(convert.object_markers(poses, stamp))
        self._objects_sent = (names, values, stamp)

    def _submit_frame(self, stamp: float) -> None:
        """Hand the cameras someone listens to a frame; nothing (no MjData copy) when nobody."""
        self._camera.offer(lambda: copy.copy(self.world.data), stamp)

    @property
    def rendered_frames(self) -> dict[str, int]:
        """Images rendered so far, per camera (none while nobody subscribes to them)."""
        return {} if self._camera is None else dict(self._camera.rendered)

    def object_poses(self) -> list[convert.ObjectPose]:
        """Ground-truth poses of the objects on the table (what perception would report)."""
        return world_object_poses(self.world)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            points = convert.trajectory_points(msg, self.robot.limits.names)
        except InvalidCommandError as exc:
            self.rejected_trajectories += 1
            self.get_logger().error(
                f"rejected {TRAJECTORY.name}: {exc}; the arm keeps its current command"
            )
            return
        if not points:
            self._brake()
            return
        arrival = self.deadline.arrive(self.now(), convert.to_seconds(msg.header.stamp))
        if arrival.stale:
            self.get_logger().warning(arrival.stale, throttle_duration_sec=1.0)
            self._brake()
            return
        self.follower.start(self.now(), points, self._position(), arrival.start_time)

    def _brake(self) -> None:
        """Come to rest: the answer to a stop, a stale command and a lost stream."""
        current = self._position()
        # A stop (or any hold): each moving joint brakes from its measured state to rest
        # within its acceleration limit, not back to the lagging measured position, which the
        # arm would run past and come back to; joints at rest hold their targets, the gripper
        # its command (holding its measured opening would drop a held block). Where a target
        # jumped to the measured state, the rate limit starts from there.
        braking = robot_braking(self.world.description, self.robot.limits.names)
        velocity = self.robot.get_observation().velocity
        if self.follower.stop(self.now(), current, braking, velocity).any():
            self.robot.forget_last_command()
        self._sent_target = None

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response):
        self.resets += 1
        seed = self.seed + self.resets
        before = self.now()
        try:
            self.objects = self.world.reset(seed, self.named_objects)
        except Lang2PolicyError as exc:
            response.success, response.message = False, f"reset with seed {seed} failed: {exc}"
            return response
        self._clock_offset = before - self.world.time
        self._objects_sent = None  # the new scene goes out at the next tick
        self._next_frame = self.now()
        self.robot.forget_last_command()
        self._sent_target = None  # the reset scene's actuators need the target again
        self.follower.hold(self._position())
        self._scene_pub.publish(convert.time_msg(before))  # sim time goes on from ``before``
        response.success = True
        response.message = json.dumps({"seed": seed, "objects": self.objects, "sim_time": before})
        self.get_logger().info(f"reset with seed {seed}: objects {self.objects}")
        return response

    def destroy_node(self) -> None:
        self._timer.cancel()
        if self._camera is not None:
            self._camera.close()
        self.robot.disconnect()
        super().destroy_node()


main = entry_point(SimNode, "sim_node", "run the simulation node until Ctrl-C or ROS shutdown")


if __name__ == "__main__":
    raise SystemExit(main())
