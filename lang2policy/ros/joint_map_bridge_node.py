"""The bridge between the graph's joint contract and a ros2_control arm's own joint names.

``lang2policy_joint_map_bridge`` applies a joint map (``hardware/<arm>.yaml``, see
``lang2policy.hardware.joint_map``):

  * ``command_topic`` (default ``/arm_controller/joint_trajectory``, our names; what the
    safety node publishes) -> renamed, reordered, offset, clipped to the map's limits and
    completed with the measured positions of joints it does not name (the controller rejects
    partial goals by default) -> the map's ``trajectory_topic`` (the arm's
    joint_trajectory_controller). The header (stamp: zero = start now) is kept; only positions
    are sent. An empty trajectory (names, no points) is sent as an empty trajectory of the
    controller's joints: the controller stops and holds. A gripper the controller does not own
    (``commanded: false``) is left out.
  * the map's ``joint_states_topic`` (the arm's names, any order, extra joints) -> our names
    and order (the arm joints, then ``gripper``) with the header stamp kept -> ``state_topic``
    (default ``/joint_states``).

A bad message is logged (throttled) and dropped. An unknown or invalid joint map fails at start
with the ConfigError text. The bridge refuses to start when a contract topic equals the arm's
topic of the same direction (it would feed its own output back to itself): for arms whose
controller already uses the contract's names (``/joint_states``, or
``/arm_controller/joint_trajectory`` for the SO-101 under ros2_control), give the bridge other
``command_topic``/``state_topic`` names and remap the graph's nodes onto them.

Parameters (read-only): ``joint_map`` (arm name under hardware/ or a YAML path),
``command_topic``, ``state_topic``.
"""

from __future__ import annotations

from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from lang2policy.errors import ConfigError, InvalidCommandError
from lang2policy.graph.topics import (
    BRIDGED_JOINT_STATES,
    BRIDGED_TRAJECTORY,
    JOINT_STATES,
    TRAJECTORY,
)
from lang2policy.hardware.joint_map import JointMap
from lang2policy.hardware.joint_map_files import available_joint_maps, load_joint_map
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters

_THROTTLE = 2.0  # s between repeated log lines of one kind


class JointMapBridgeNode(ReadOnlyParameters):
    """``lang2policy_joint_map_bridge``: the graph's joint contract <-> one arm's controller."""

    executable = "joint_map_bridge_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_joint_map_bridge", **kwargs)
        ref = self._param("joint_map")
        self.command_topic = self._param("command_topic")
        self.state_topic = self._param("state_topic")
        if not ref:
            raise ConfigError(
                "parameter 'joint_map' is empty; give an arm name "
                f"{available_joint_maps()} or the path of a joint map YAML file"
            )
        self.map: JointMap = load_joint_map(ref)
        self._check_loops()
        self.forwarded = self.rejected = self.clamped = self.bad_states = 0
        self._measured: dict[str, float] = {}

        self._command_pub = self.create_publisher(JointTrajectory, self.map.trajectory_topic, 10)
        self._state_pub = self.create_publisher(JointState, self.state_topic, 10)
        self.create_subscription(JointTrajectory, self.command_topic, self._on_command, 10)
        self.create_subscription(
            JointState, self.map.joint_states_topic, self._on_hardware_state, 10
        )
        self._log_start()

    def _check_loops(self) -> None:
        loops = [
            (param, topic)
            for param, topic, theirs in (
                ("command_topic", self.command_topic, self.map.trajectory_topic),
                ("state_topic", self.state_topic, self.map.joint_states_topic),
            )
            if topic == theirs
        ]
        if loops:
            text = ", ".join(f"{param} {topic}" for param, topic in loops)
            raise ConfigError(
                f"joint map {self.map.source}: the arm uses the bridge's own topics ({text}); "
                "the bridge would read its own output. Give the bridge other topics (e.g. "
                f"command_topic:={BRIDGED_TRAJECTORY.name}, "
                f"state_topic:={BRIDGED_JOINT_STATES.name}) and remap the graph's "
                f"{TRAJECTORY.name} and {JOINT_STATES.name} onto them"
            )

    def _log_start(self) -> None:
        pairs = ", ".join(f"{n}->{self.map.hardware_name(n)}" for n in self.map.names)
        left_out = [n for n in self.map.names if n not in self.map.commanded_names]
        self.get_logger().info(
            f"joint map {self.map.arm} (robot {self.map.robot}): {pairs}; "
            f"{self.command_topic} -> {self.map.trajectory_topic}, "
            f"{self.map.joint_states_topic} -> {self.state_topic}"
            + (f"; not commanded (own driver): {left_out}" if left_out else "")
        )

    # ----------------------------------------------------------------- commands
    def _on_command(self, msg: JointTrajectory) -> None:
        where = f"a trajectory from {self.command_topic}"
        out = self._converted(self.convert_command, msg, "rejected", where)
        if out is not None:
            self._command_pub.publish(out)
            self.forwarded += 1

    def convert_command(self, msg: JointTrajectory) -> JointTrajectory | None:
        """The controller's trajectory for one of ours (None: nothing for the controller)."""
        points = convert.trajectory_points(msg, self.map.names)
        names = list(msg.joint_names)
        if points and not any(n in self.map.commanded_names for n in names):
            return None  # e.g. only a gripper that the arm's own gripper driver moves
        rows = [[named[n] for n in names] for _, named in points]
        hold = {n: v for n, v in self._measured.items() if n not in names}
        result = self.map.to_hardware(names, rows, hold)
        if result.clamped:
            self.clamped += 1
            self.get_logger().warning(
                f"clipped {list(result.clamped)} to the limits of joint map {self.map.arm}",
                throttle_duration_sec=_THROTTLE,
            )
        out = JointTrajectory(header=msg.header, joint_names=list(result.names))
        for row, source in zip(result.positions, msg.points, strict=True):
            out.points.append(
                JointTrajectoryPoint(
                    positions=[float(v) for v in row], time_from_start=source.time_from_start
                )
            )
        return out

    # ----------------------------------------------------------------- states
    def _on_hardware_state(self, msg: JointState) -> None:
        where = f"a joint state from {self.map.joint_states_topic}"
        out = self._converted(self.convert_state, msg, "bad_states", where)
        if out is not None:
            self._state_pub.publish(out)

    def convert_state(self, msg: JointState) -> JointState:
        """The arm's joint state in our names (``ValueError`` for one the map cannot read)."""
        names, positions, velocities = self.map.from_hardware(
            list(msg.name), list(msg.position), list(msg.velocity)
        )
        self._measured = dict(zip(names, (float(v) for v in positions), strict=True))
        out = convert.joint_state(names, positions, velocities)
        out.header = msg.header
        return out

    def _converted(self, conversion, msg, counter: str, where: str):
        """``conversion(msg)``, or None for a message it refuses: counted in ``counter`` and
        logged (throttled), never passed on."""
        try:
            return conversion(msg)
        except (InvalidCommandError, ValueError) as exc:
            setattr(self, counter, getattr(self, counter) + 1)
            self.get_logger().error(f"dropped {where}: {exc}", throttle_duration_sec=_THROTTLE)
            return None


main = entry_point(
    JointMapBridgeNode, "joint_map_bridge_node", "run the bridge until Ctrl-C or shutdown"
)


if __name__ == "__main__":
    raise SystemExit(main())
