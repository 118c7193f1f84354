"""The sim node under a realism profile: the seed's look on the world, sensor effects on every
published frame, camera_info with the calibrated intrinsics (not the drawn error), and a bad
profile refused with the key and what is allowed. Real rclpy nodes in one context."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from lang2policy.errors import ConfigError
from lang2policy.perception.scene import sim_intrinsics
from lang2policy.realism import load_realism
from lang2policy.scene.render import CameraRenderer
from lang2policy.scene.world import World

pytestmark = pytest.mark.ros
SIZE = 96


def frames(context, node, seconds: float = 20.0):
    """(first image as an array, first camera_info) of the top camera, spinning ``node``."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import CameraInfo, Image

    got: dict[str, object] = {}
    probe = Node("realism_probe", context=context)
    probe.create_subscription(
        Image, "/camera/top/image_raw", lambda m: got.setdefault("image", m), 2
    )
    probe.create_subscription(
        CameraInfo, "/camera/top/camera_info", lambda m: got.setdefault("info", m), 2
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(probe)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and len(got) < 2:
            executor.spin_once(timeout_sec=0.05)
    finally:
        executor.shutdown()
        probe.destroy_node()
    assert len(got) == 2, f"no image and camera_info in {seconds} s: got {sorted(got)}"
    image = got["image"]
    pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(image.height, image.width, 3)
    return pixels, got["info"]


def test_the_sim_node_shows_the_seeds_look_and_a_calibrated_camera_info():
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter

    from lang2policy.ros.sim_node import SimNode

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("ROS_DOMAIN_ID", "0")))
    try:
        params = [Parameter("seed", value=4), Parameter("realism", value="mild"),
                  Parameter("camera_width", value=SIZE), Parameter("camera_height", value=SIZE),
                  Parameter("cameras", value=["top"])]  # fmt: skip
        sim = SimNode(context=context, parameter_overrides=params)
        try:
            reference = World("so101", realism=load_realism("mild"))
            reference.reset(4)
            top = sim.world.model.camera("top").id
            assert sim.world.look is not None
            np.testing.assert_array_equal(
                sim.world.model.cam_pos[top], reference.model.cam_pos[top]
            )
            pixels, info = frames(context, sim)
            nominal = sim_intrinsics("so101", "top", SIZE, SIZE).k
            np.testing.assert_allclose(np.array(info.k).reshape(3, 3), nominal, atol=1e-9)
            assert sim.world.model.cam_fovy[top] != sim.world.nominal.cam_fovy[top]
            renderer = CameraRenderer(reference.model, SIZE, SIZE)
            clean = renderer.render(reference.data, "top").astype(int)
            renderer.close()
            difference = pixels.astype(int) - clean
            assert 0.5 < difference.std() < 25  # the sensor's noise and blur, not another scene
        finally:
            sim.destroy_node()
        with pytest.raises(ConfigError, match="allowed: off, mild, hard or the path"):
            SimNode(context=context, parameter_overrides=[Parameter("realism", value="sunny")])
    finally:
        rclpy.shutdown(context=context)
