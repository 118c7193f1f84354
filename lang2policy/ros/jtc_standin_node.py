"""A simulated stand-in for ros2_control's joint_trajectory_controller, topic interface only.

``lang2policy_jtc_standin`` plays a ros2_control arm for tests and dry runs: it takes the
hardware joint names, limits and home pose from a joint map (``hardware/<arm>.yaml``), follows
``JointTrajectory`` messages on the map's ``trajectory_topic`` and publishes ``JointState``
(position and velocity, stamped with its clock) on the map's ``joint_states_topic`` at
``rate`` Hz, like the joint_state_broadcaster: the controller's joints, the gripper joint and
the map's extra joints (fingers), which hold still unless the controller owns them. Tracking
is perfect (like ros2_control's mock_components): the state is the interpolated command.

Semantics mimicked from joint_trajectory_controller (topic interface):
  * names may be in any order and a subset of the controller's joints; joints not named hold
    (as with ``allow_partial_joints_goal: true``); unknown names, wrong sizes, non-finite or
    decreasing times reject the whole trajectory;
  * a position outside the joint limits rejects the whole trajectory (logged), as the
    controller does with its joint limits;
  * header.stamp zero = start now; otherwise the trajectory starts at that time (a future
    start interpolates from the current state to the first point, reached at stamp +
    time_from_start; points already in the past are skipped, and a trajectory that ended
    before now is ignored);
  * a new trajectory replaces the running one, from the current position (linear
    interpolation of positions: velocities in the message are not used);
  * an empty trajectory (names, no points) stops and holds the current position.

Parameters (read-only): ``joint_map`` (arm name or YAML path), ``rate`` (Hz, default 100).
"""

from __future__ import annotations

import numpy as np
from rclpy.time import Time
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from lang2policy.control.trajectory_follower import TrajectoryFollower
from lang2policy.errors import ConfigError, InvalidCommandError
from lang2policy.hardware.joint_map import JointMap
from lang2policy.hardware.joint_map_files import available_joint_maps, load_joint_map
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters

_THROTTLE = 2.0  # s between repeated log lines of one kind


class JtcStandinNode(ReadOnlyParameters):
    """``lang2policy_jtc_standin``: a ros2_control arm's trajectory topics, simulated."""

    executable = "jtc_standin_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_jtc_standin", **kwargs)
        ref = self._param("joint_map")
        rate = self._param("rate")
        if not ref:
            raise ConfigError(
                "parameter 'joint_map' is empty; give an arm name "
                f"{available_joint_maps()} or the path of a joint map YAML file"
            )
        self.map: JointMap = load_joint_map(ref)
        self.limits = self.map.hardware_limits()  # the joints the controller owns
        home = self.map.hardware_home()  # every joint the arm publishes
        self.names = tuple(home)
        self.follower = TrajectoryFollower(self.names, np.array(list(home.values())))
        self.accepted = self.rejected = 0
        self._last: tuple[float, np.ndarray] | None = None  # (time, position) of the last tick

        self._state_pub = self.create_publisher(JointState, self.map.joint_states_topic, 10)
        self.create_subscription(
            JointTrajectory, self.map.trajectory_topic, self._on_trajectory, 10
        )
        self._timer = self.create_timer(1.0 / rate, self._tick)
        self.get_logger().info(
            f"stand-in for {self.map.arm}'s trajectory controller: joints {list(self.limits)} "
            f"on {self.map.trajectory_topic}; states of {list(self.names)} on "
            f"{self.map.joint_states_topic} at {rate:g} Hz"
        )

    def now(self) -> float:
        """The node clock in seconds (the clock its states are stamped with)."""
        return self.get_clock().now().nanoseconds * 1e-9

    # ----------------------------------------------------------------- trajectories
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        now = self.now()
        try:
            points = self._validated(msg, now)
        except InvalidCommandError as exc:
            self.rejected += 1
            self.get_logger().error(
                f"rejected trajectory on {self.map.trajectory_topic}: {exc}; "
                "keeping the current goal",
                throttle_duration_sec=_THROTTLE,
            )
            return
        self.accepted += 1
        self.follower.start(now, points, self.follower.target(now))

    def _validated(self, msg: JointTrajectory, now: float):
        """(time from now, {joint: position}) points, or InvalidCommandError."""
        points = convert.trajectory_points(msg, tuple(self.limits))
        for index, (_, named) in enumerate(points):
            outside = {
                n: v for n, v in named.items() if not self.limits[n][0] <= v <= self.limits[n][1]
            }
            if outside:
                bounds = {n: self.limits[n] for n in outside}
                raise InvalidCommandError(
                    f"point {index} is outside the joint limits: {outside} (limits {bounds})"
                )
        stamp = Time.from_msg(msg.header.stamp).nanoseconds * 1e-9
        if not points or stamp == 0.0:
            return points
        shift = stamp - now
        shifted = [(t + shift, named) for t, named in points if t + shift > 0.0]
        if not shifted:
            raise InvalidCommandError(
                f"the trajectory ended {-(points[-1][0] + shift):.3f} s ago (header.stamp is "
                "in the past); ignored"
            )
        return shifted

    # ----------------------------------------------------------------- state
    def _tick(self) -> None:
        now = self.now()
        position = self.follower.target(now)
        velocity = np.zeros_like(position)
        if self._last is not None and now > self._last[0]:
            velocity = (position - self._last[1]) / (now - self._last[0])
        self._last = (now, position)
        self._state_pub.publish(convert.joint_state(self.names, position, velocity, now))

    def destroy_node(self) -> None:
        self._timer.cancel()
        super().destroy_node()


main = entry_point(JtcStandinNode, "jtc_standin_node", "run the stand-in until Ctrl-C or shutdown")


if __name__ == "__main__":
    raise SystemExit(main())
