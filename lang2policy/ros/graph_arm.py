"""The planner's hands in the graph: a ``RemoteSession`` wired to ROS topics.

Joint states (``/joint_states``, mapped by name) and object poses (``/lang2policy/objects``)
flow into the session's mirror; the motion primitives' commands leave as one-point
``trajectory_msgs/JointTrajectory`` messages on ``/lang2policy/joint_command`` (the safety
node's input), each reaching its target one control period after arrival — the stream the
primitives produce at the control rate.
"""

from __future__ import annotations

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from lang2policy.graph import topics
from lang2policy.ros import convert
from lang2policy.session.remote import RemoteSession


class GraphArm:
    """Creates the subscriptions/publisher on ``node`` and feeds ``self.session``."""

    def __init__(
        self,
        node: Node,
        robot: str,
        control_period: float,
        stale_after: float,
        command_topic: str = topics.JOINT_COMMAND.relative,
    ) -> None:
        self._node = node
        self._publisher = node.create_publisher(JointTrajectory, command_topic, 10)
        self.session = RemoteSession(robot, self._send, control_period, stale_after)
        self._names = self.session.robot.limits.names
        self._period = control_period
        self.bad_states = 0
        node.create_subscription(JointState, topics.JOINT_STATES.relative, self._on_joint_state, 10)

    def _send(self, action: np.ndarray) -> None:
        self._publisher.publish(convert.trajectory(self._names, [(self._period, action)]))

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            stamp = convert.to_seconds(msg.header.stamp)
            self.session.update_state(msg.name, msg.position, msg.velocity, stamp)
        except (ValueError, TypeError) as exc:
            self.bad_states += 1
            self._node.get_logger().warning(
                f"ignored {topics.JOINT_STATES.name}: {exc}", throttle_duration_sec=5.0
            )

    def update_objects(self, objects: dict) -> None:
        """Object poses by name (``convert.objects_from_markers``) into the mirror."""
        self.session.update_objects(
            {name: (tuple(o.position), tuple(o.quat)) for name, o in objects.items()}
        )
