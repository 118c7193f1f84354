"""The ROS tests' background spinner survives the test thread destroying entities.

rclpy's executor raises ``InvalidHandle`` when a subscription is destroyed from another
thread while it builds its wait set; a spinner that died of it froze the graph of a whole test
module (sim time stopped; CI failed on test_ros_sim_cameras).
"""

from __future__ import annotations

import os
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")

from std_msgs.msg import Int32  # noqa: E402
from support.ros import ros_env, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 71) % 200


def test_the_spinner_survives_subscriptions_destroyed_from_the_test_thread(monkeypatch):
    for key, value in ros_env(DOMAIN_ID).items():
        monkeypatch.setenv(key, value)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("spinning_probe", context=context)
    publisher = node.create_publisher(Int32, "/spinning_probe", 10)
    node.create_timer(0.002, lambda: publisher.publish(Int32(data=1)))
    heard = []
    lock = threading.Lock()

    def on_message(_msg) -> None:
        with lock:
            heard.append(1)

    def count() -> int:
        with lock:
            return len(heard)

    with spinning(context, (node,)):
        for _ in range(200):  # without the guard the spinner dies within a few dozen
            subscription = node.create_subscription(Int32, "/spinning_probe", lambda m: None, 10)
            time.sleep(0.001)  # let the spinner take it into a wait set
            node.destroy_subscription(subscription)
        node.create_subscription(Int32, "/spinning_probe", on_message, 10)
        wait_for(lambda: count() >= 20, 30.0, "messages after the churn (the spinner is alive)")
