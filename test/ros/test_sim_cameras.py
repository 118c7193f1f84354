"""The sim node renders a camera only while someone subscribes to its image (issue 16: "idle
means idle"), and then at ``camera_rate`` of sim time, never faster.

A real SimNode (two cameras, small images) and a probe node spin in a private rclpy context on
a domain of their own; the node's ``rendered_frames`` counts the images it rendered.
"""

from __future__ import annotations

import os
import threading

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from support.ros import ros_env, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 113) % 200
CAMERAS = ["top", "front"]
CAMERA_RATE = 10.0  # Hz of sim time


class Probe:
    """Counts joint states (and their sim time) and whatever camera messages it subscribes to."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("camera_probe", context=context)
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.sim_time = 0.0
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 10)

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            self.sim_time = convert.to_seconds(msg.header.stamp)

    def listen(self, topic: str, kind):
        def count(_msg, topic=topic) -> None:
            with self.lock:
                self.counts[topic] = self.counts.get(topic, 0) + 1

        return self.node.create_subscription(kind, topic, count, 10)

    def count(self, topic: str) -> int:
        with self.lock:
            return self.counts.get(topic, 0)

    def now(self) -> float:
        with self.lock:
            return self.sim_time

    def wait_sim(self, seconds: float, timeout: float = 60.0) -> float:
        """Wait for ``seconds`` of sim time to pass; the sim time reached."""
        target = self.now() + seconds
        wait_for(lambda: self.now() >= target, timeout, f"sim time {target:.2f}")
        return self.now()


@pytest.fixture(scope="module")
def sim_node():
    from lang2policy.ros.sim_node import SimNode

    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env(DOMAIN_ID).items():
            mp.setenv(key, value)
        context = rclpy.Context()
        rclpy.init(context=context)
        overrides = [
            Parameter("cameras", value=CAMERAS),
            Parameter("camera_rate", value=CAMERA_RATE),
            Parameter("camera_width", value=64),
            Parameter("camera_height", value=48),
        ]
        node = SimNode(context=context, parameter_overrides=overrides)
        probe = Probe(context)
        with spinning(context, (node, probe.node)):
            wait_for(lambda: probe.now() > 0.0, 30.0, "joint states")
            yield node, probe


def _image_subscribers(node, camera: str) -> int:
    return node._camera._pubs[camera][0].get_subscription_count()


def test_nothing_is_rendered_or_published_while_nobody_subscribes(sim_node):
    node, probe = sim_node
    probe.wait_sim(1.0)  # ten frame times of sim time
    assert node.rendered_frames == dict.fromkeys(CAMERAS, 0)
    published = {t for t, _ in probe.node.get_topic_names_and_types()}
    assert "/camera/top/image_raw" in published  # advertised all the same


def test_a_subscriber_gets_images_at_the_camera_rate_and_only_its_camera_renders(sim_node):
    node, probe = sim_node
    topic = "/camera/top/image_raw"
    subscription = probe.listen(topic, Image)
    try:
        wait_for(lambda: probe.count(topic) >= 3, 60.0, f"images on {topic}")
        start, rendered = probe.now(), node.rendered_frames["top"]
        probe.wait_sim(2.0)
        frames = node.rendered_frames["top"] - rendered
        dropped = node._camera.dropped
        assert frames > 0
        # Frame times are camera_rate per second of sim time: never more frames than those.
        assert frames + dropped <= CAMERA_RATE * (probe.now() - start) + 2
        assert node.rendered_frames["front"] == 0  # nobody asked for the front camera
    finally:
        probe.node.destroy_subscription(subscription)
    # Nobody listens again: rendering stops (a frame in flight may still be finished).
    wait_for(lambda: _image_subscribers(node, "top") == 0, 30.0, "the subscription to go")
    probe.wait_sim(0.3)
    stopped = node.rendered_frames["top"]
    probe.wait_sim(1.0)
    assert node.rendered_frames["top"] == stopped


def test_camera_info_alone_is_published_without_rendering(sim_node):
    node, probe = sim_node
    topic = "/camera/front/camera_info"
    before = dict(node.rendered_frames)
    subscription = probe.listen(topic, CameraInfo)
    try:
        wait_for(lambda: probe.count(topic) >= 3, 60.0, f"messages on {topic}")
    finally:
        probe.node.destroy_subscription(subscription)
    assert node.rendered_frames == before  # camera_info needs no image
