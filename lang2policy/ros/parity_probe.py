"""The probe node of ``lang2policy bench parity``: listens to a robot back-end, sends the script.

``ParityProbe(domain_id)`` joins the back-end's private ROS graph (localhost discovery), records
every ``/joint_states`` (stamp, receive time, names, positions, velocities), the ``/sim/objects``
stamps and the latest ``/clock``, publishes trajectories on ``/arm_controller/joint_trajectory``
and lists the topics the back-end's own nodes publish and subscribe. The comparison itself is
pure (``lang2policy.bench.parity_analysis``); this module is its ROS side.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.graph.snapshot import TopicInfo
from lang2policy.graph.topics import CLOCK, JOINT_STATES, SIM_OBJECTS, TRAJECTORY
from lang2policy.ros import convert

PROBE = "parity_probe"


@contextlib.contextmanager
def _localhost_discovery() -> Iterator[None]:
    """Discovery on localhost only for the probe's context (read when it is created)."""
    key = "ROS_AUTOMATIC_DISCOVERY_RANGE"
    before = os.environ.get(key)
    os.environ[key] = "LOCALHOST"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


@dataclass
class Samples:
    """What the probe heard (appended from the executor thread)."""

    joint: list[tuple[float, float, list[str], list[float], list[float]]] = field(
        default_factory=list
    )  # (stamp, received, names, positions, velocities)
    objects: list[tuple[float, float]] = field(default_factory=list)  # (stamp, received)
    clock: float | None = None  # the last /clock (sim time), if any
    lock: threading.Lock = field(default_factory=threading.Lock)


class ParityProbe:
    """A node in the back-end's graph: listens, publishes the script, lists the graph."""

    def __init__(self, domain_id: int) -> None:
        self.samples = Samples()
        self.context = rclpy.Context()
        with _localhost_discovery():
            rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(PROBE, context=self.context)
        self.node.create_subscription(JointState, JOINT_STATES.name, self._on_joints, 100)
        self.node.create_subscription(MarkerArray, SIM_OBJECTS.name, self._on_objects, 10)
        self.node.create_subscription(Clock, CLOCK.name, self._on_clock, 10)
        self.publisher = self.node.create_publisher(JointTrajectory, TRAJECTORY.name, 10)
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def _on_joints(self, msg: JointState) -> None:
        row = (
            convert.to_seconds(msg.header.stamp),
            time.monotonic(),
            list(msg.name),
            list(msg.position),
            list(msg.velocity),
        )
        with self.samples.lock:
            self.samples.joint.append(row)

    def _on_objects(self, msg: MarkerArray) -> None:
        stamp = convert.to_seconds(msg.markers[0].header.stamp) if msg.markers else 0.0
        with self.samples.lock:
            self.samples.objects.append((stamp, time.monotonic()))

    def _on_clock(self, msg: Clock) -> None:
        self.samples.clock = convert.to_seconds(msg.clock)

    def now(self) -> float:
        """The back-end's stamp clock now: the last /clock if it publishes one, else the ROS
        system clock (what the driver stamps /joint_states with)."""
        if self.samples.clock is not None:
            return self.samples.clock
        return self.node.get_clock().now().nanoseconds * 1e-9

    def send(self, names: list[str], points: list[tuple[float, list[float]]]) -> float:
        """Publish a JointTrajectory (stamp zero: start now; no points: hold); returns
        ``now()`` at publishing."""
        msg = convert.trajectory(names, points)
        sent = self.now()
        self.publisher.publish(msg)
        return sent

    def graph(self) -> dict[str, TopicInfo]:
        """Topics the back-end's nodes (not the probe) publish or subscribe, with types."""
        snapshot = {}
        for topic, _types in self.node.get_topic_names_and_types():
            pubs = [
                i for i in self.node.get_publishers_info_by_topic(topic) if i.node_name != PROBE
            ]
            subs = [
                i for i in self.node.get_subscriptions_info_by_topic(topic) if i.node_name != PROBE
            ]
            if not pubs and not subs:
                continue
            snapshot[topic] = TopicInfo(
                types=tuple(sorted({i.topic_type for i in pubs + subs})),
                publishers=tuple(sorted({i.node_name for i in pubs})),
                subscribers=tuple(sorted({i.node_name for i in subs})),
            )
        return snapshot

    def nodes(self) -> list[str]:
        return sorted(n for n in self.node.get_node_names() if n != PROBE)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
