"""The physical SO-101 as a ROS 2 robot: the same topics as the sim node, over the servo bus.

Publishes ``/joint_states`` (the five arm joints in rad with the simulation's conventions, and
the normalised ``gripper``; stamped with this node's clock) at ``control_rate`` and follows
``/arm_controller/joint_trajectory`` exactly as the sim node does (``TrajectoryFollower``: a new
trajectory replaces the running one, a stamped one starts at its stamp; an empty one is a stop:
each moving joint brakes from its measured state at the description's
``max_joint_acceleration`` to rest, joints at rest and the gripper keep their command, so a
held block is not dropped; ``CommandDeadline``: a stamped trajectory older than
``command_deadline`` on arrival brakes the arm instead of running, and a stamped stream silent
for ``stream_timeout`` while the arm moves brakes it: the safety node is gone). Every tick the
follower's target goes to the servos through ``SO101Robot`` (calibration, the shared safety
clamp) and the state is read back.

Safe by default: torque goes on only after the goal registers hold the present position; a bus
error in a tick makes the arm hold its last read position, and ``max_bus_errors`` consecutive
failures turn the torque off and end the node with the reason; shutting down (Ctrl-C) turns
the torque off. A stop request on the safety node reaches this node as an empty trajectory: the
arm holds, torque on (an unpowered arm would fall).

Parameters: ``port`` (required, e.g. /dev/ttyACM0, or the emulator's pty), ``calibration``
(YAML; "" = hardware/so101/calibration.yaml; or LeRobot's calibration JSON with
``lerobot_calibration_pose:=true``, its calibration pose taken as the model's zero),
``control_rate`` (Hz, 30 by default: the serial
bus carries a sync read and a sync write per tick), ``bus_timeout`` (s per reply; raise it for
a USB adapter with a 16 ms latency timer), ``max_bus_errors``, ``port_wait`` (s to wait for
the port to appear: a USB adapter just plugged in, or an emulator started beside the driver).
"""

from __future__ import annotations

import os
import time

from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from lang2policy.control.trajectory_follower import TrajectoryFollower, robot_braking
from lang2policy.errors import ConfigError, InvalidCommandError, Lang2PolicyError
from lang2policy.graph.topics import JOINT_STATES, TRAJECTORY
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.bus_errors import FeetechError
from lang2policy.robots.so101.backend import SO101Robot
from lang2policy.robots.so101.lerobot_calibration import load_calibration
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters, command_deadline
from lang2policy.scene.robot_description import load_robot_description


def wait_for_port(port: str, seconds: float, poll: float = 0.1) -> None:
    """Return once ``port`` exists, waiting up to ``seconds`` (the bus then says what is wrong
    with a port that never came)."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(port) and time.monotonic() < deadline:
        time.sleep(poll)


class SO101DriverNode(ReadOnlyParameters):
    """``lang2policy_so101``: ``SO101Robot`` behind the sim node's topic contract."""

    executable = "so101_driver_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_so101", **kwargs)
        port = self._param("port")
        if not port:
            raise ConfigError(
                "parameter 'port' is required: the SO-101's serial port, e.g. "
                "--ros-args -p port:=/dev/ttyACM0 (or the servo emulator's pty)"
            )
        path = self._param("calibration")
        lerobot_pose = self._param("lerobot_calibration_pose")
        rate = self._param("control_rate")
        self.max_bus_errors = int(self._param("max_bus_errors"))
        timeout = self._param("bus_timeout")
        port_wait = self._param("port_wait")
        wait_for_port(port, port_wait)
        self._period = 1.0 / rate
        calibration = load_calibration(path or None, lerobot_pose is True)
        bus = FeetechBus(port, timeout=timeout)
        self.robot = SO101Robot(port, calibration, control_period=self._period, bus=bus)
        self.robot.connect()  # checks every servo answers; goal = present, then torque on
        self.bus_errors = 0
        self.failure: str | None = None  # why the node gave up (torque is off then)
        # Stamped trajectories start at their stamp (as on the sim node): a late delivery runs
        # at its planned pace from its planned state, never compressed, never queued.
        self.follower = TrajectoryFollower(self.robot.limits.names, self._position())
        self.deadline = command_deadline(self)
        self._braking = robot_braking(load_robot_description("so101"), self.robot.limits.names)
        self._joint_pub = self.create_publisher(JointState, JOINT_STATES.relative, 10)
        self.create_subscription(JointTrajectory, TRAJECTORY.relative, self._on_trajectory, 10)
        self._timer = self.create_timer(
            self._period, self._tick, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        self.get_logger().info(
            f"SO-101 on {port}: servos {list(self.robot.servo_ids)} answer, torque on; joints "
            f"{list(self.robot.limits.names)}; {rate:g} Hz; following {TRAJECTORY.name}"
        )

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def _position(self):
        return self.robot.get_observation().position

    def _tick(self) -> None:
        lost = self.deadline.lost_stream(self.now(), self.follower.active(self.now()))
        if lost:
            self.get_logger().warning(lost)
            self._brake()
        try:
            self.robot.send_action(self.follower.target(self.now()))
            obs = self.robot.get_observation()
        except FeetechError as exc:
            self._bus_error(exc)
            return
        self.bus_errors = 0
        stamp = self.get_clock().now().nanoseconds * 1e-9
        self._joint_pub.publish(convert.joint_state(obs.names, obs.position, obs.velocity, stamp))

    def _bus_error(self, exc: FeetechError) -> None:
        """Count it (the backend already held the arm); give up after too many in a row."""
        self.bus_errors += 1
        self.get_logger().error(
            f"servo bus error {self.bus_errors}/{self.max_bus_errors}: {exc}",
            throttle_duration_sec=1.0,
        )
        if self.bus_errors >= self.max_bus_errors:
            self.failure = f"{self.bus_errors} bus errors in a row, last: {exc}"
            self._timer.cancel()
            self._torque_off()
            self.get_logger().fatal(f"{self.failure}; torque is off, the driver stops")
            raise Lang2PolicyError(self.failure)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            points = convert.trajectory_points(msg, self.robot.limits.names)
        except InvalidCommandError as exc:
            self.get_logger().error(f"rejected {TRAJECTORY.name}: {exc}; the arm keeps its command")
            return
        if points:
            stamp_now = self.get_clock().now().nanoseconds * 1e-9
            stamp = convert.to_seconds(msg.header.stamp)
            arrival = self.deadline.arrive(self.now(), stamp, stamp_now)
            if not arrival.stale:
                self.follower.start(
                    self.now(), points, self.follower.target(self.now()), arrival.start_time
                )
                return
            self.get_logger().warning(arrival.stale, throttle_duration_sec=1.0)
        self._brake()

    def _brake(self) -> None:
        """Come to rest: the answer to a stop, a stale command and a lost stream."""
        try:
            observation = self.robot.get_observation()
        except FeetechError as exc:
            self._bus_error(exc)
            return
        current = observation.position
        if self.follower.stop(self.now(), current, self._braking, observation.velocity).any():
            # A stop brakes each moving joint from its measured state to rest (not back to the
            # lagging measured position); where a target jumped there, rate-limit from there.
            self.robot.forget_last_command()

    def _torque_off(self) -> None:
        try:
            self.robot.disconnect()
        except FeetechError as exc:
            self.get_logger().error(f"could not turn the torque off: {exc}")

    def destroy_node(self) -> None:
        self._timer.cancel()
        self._torque_off()
        super().destroy_node()


main = entry_point(
    SO101DriverNode, "so101_driver_node", "drive the SO-101 until Ctrl-C or shutdown"
)


if __name__ == "__main__":
    raise SystemExit(main())
