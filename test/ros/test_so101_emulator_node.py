"""The driver node against the emulated SO-101 node (MuJoCo-backed servos on a pty), both as
processes on a private ROS graph: normal motion through a faulty bus (dropped and corrupted
replies, latency: retried), and a servo that never answers (the driver refuses to start and
names it, in bounded time)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support.ros import ros_env, spinning
from support.waiting import wait_for

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.robots.so101.calibration import JOINTS  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 187) % 200


def node(module: str, *params: str) -> subprocess.Popen:
    env = dict(os.environ, MUJOCO_GL="egl") | ros_env(DOMAIN_ID)
    arguments = [item for p in params for item in ("-p", p)]
    return subprocess.Popen(
        [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(process: subprocess.Popen) -> str:
    """Ctrl-C, then kill; its output ("" when it was read already: stopping twice, as an
    assertion's message and a ``finally`` do, must not leave the other node running)."""
    if process.poll() is None:
        process.send_signal(2)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
    if process.stdout is None or process.stdout.closed:
        return ""
    return process.communicate()[0]


def emulator(link: Path, *faults: str) -> subprocess.Popen:
    return node("so101_emulator_node", f"link:={link}", "objects_rate:=2.0", *faults)


def driver(link: Path) -> subprocess.Popen:
    return node("so101_driver_node", f"port:={link}", "port_wait:=30.0", "bus_timeout:=0.1")


def test_motion_through_dropped_corrupted_and_late_replies(tmp_path, monkeypatch):
    for key, value in ros_env(DOMAIN_ID).items():
        monkeypatch.setenv(key, value)
    link = tmp_path / "so101"
    faults = ("drop_rate:=0.05", "corrupt_rate:=0.05", "latency:=0.002")
    arm, bus = emulator(link, *faults), driver(link)
    context = rclpy.Context()
    rclpy.init(context=context)
    states: list[dict[str, float]] = []
    lock = threading.Lock()

    def on_state(msg: JointState) -> None:
        with lock:
            states.append(dict(zip(msg.name, msg.position, strict=True)))

    try:
        probe = rclpy.create_node("emulated_so101_probe", context=context)
        probe.create_subscription(JointState, topics.JOINT_STATES.name, on_state, 50)
        commands = probe.create_publisher(JointTrajectory, topics.TRAJECTORY.name, 10)
        with spinning(context, [probe]):
            wait_for(lambda: states or bus.poll() is not None, 60, "joint states from the driver")
            assert bus.poll() is None, stop(bus)
            with lock:
                start = dict(states[-1])
            target = {**start, "shoulder_pan": start["shoulder_pan"] + 0.3, "gripper": 0.3}
            target["elbow_flex"] = start["elbow_flex"] - 0.2
            wait_for(commands.get_subscription_count, 10, "the driver's subscription")
            commands.publish(convert.trajectory(JOINTS, [(1.5, [target[n] for n in JOINTS])]))

            def reached() -> bool:
                with lock:
                    now = states[-1]
                return all(abs(now[n] - target[n]) < 0.05 for n in JOINTS)

            wait_for(reached, 20, "the arm at the target through the faulty bus")
            time.sleep(1.0)
            assert bus.poll() is None  # retries absorbed the faults: still running
            assert reached()
    finally:
        rclpy.try_shutdown(context=context)
        driver_log, arm_log = stop(bus), stop(arm)
        print(f"driver:\n{driver_log}\nemulator:\n{arm_log}")  # shown when the test fails
    assert "torque off" in driver_log.lower() or "SO-101" in driver_log, driver_log
    assert "faults" in arm_log, arm_log


def test_a_servo_that_never_answers_stops_the_driver_naming_it(tmp_path):
    link = tmp_path / "so101"
    arm = emulator(link, "silent:=3")
    try:
        bus = driver(link)
        started = time.monotonic()
        code = bus.wait(timeout=60)
        took = time.monotonic() - started
        log = stop(bus)
    finally:
        stop(arm)
    assert code == 1, log
    assert "servo(s) 3 (elbow_flex) did not answer" in log, log
    assert "power supply" in log  # what to check
    assert took < 45  # bounded: the port wait, then 3 PING tries per servo


def test_the_emulated_table_has_a_top_camera_that_camera_perception_reads(tmp_path, monkeypatch):
    """The emulator renders the scene's cameras like the sim node (realism's light and camera
    error included): camera perception finds the emulated table's objects where its ground
    truth says they are. Without it a graph on the emulated arm with camera perception stayed
    blind ("no image from camera 'top' yet")."""
    from sensor_msgs.msg import Image
    from visualization_msgs.msg import MarkerArray

    from lang2policy.perception.camera_pose import sim_camera_pose
    from lang2policy.perception.pipeline import CameraPerception
    from lang2policy.perception.scene import scene_palette, sim_intrinsics
    from lang2policy.scene.robot_description import load_robot_description

    for key, value in ros_env(DOMAIN_ID).items():
        monkeypatch.setenv(key, value)
    arm = emulator(tmp_path / "so101", "seed:=3", "realism:=mild")
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        probe = rclpy.create_node("camera_probe", context=context)
        images, truth = [], {}
        probe.create_subscription(Image, "/camera/top/image_raw", images.append, 5)
        probe.create_subscription(
            MarkerArray,
            topics.SIM_OBJECTS.name,
            lambda m: truth.update({k.text: k.pose.position for k in m.markers if k.text}),
            5,
        )
        with spinning(context, [probe], threads=2):
            wait_for(lambda: len(images) >= 4 and truth, 90, "top camera images and truth")
            image = images[-1]
            rgb = np.frombuffer(bytes(image.data), np.uint8).reshape(image.height, -1, 3)
            objects = dict(truth)
    finally:
        rclpy.try_shutdown(context=context)
        log = stop(arm)
    perception = CameraPerception(
        "so101", sim_camera_pose("so101", "top"), palette=scene_palette("so101"), confirm=1
    )
    perception.set_intrinsics(sim_intrinsics("so101", "top", image.width, image.height))
    perception.set_joints({**load_robot_description("so101").home, "gripper": 1.0})  # at rest
    perception.process(rgb, 0.0)
    seen = {o.name: o.position for o in perception.objects}
    assert sorted(seen) == sorted(objects), (seen, objects, log)
    for name, position in seen.items():
        true = np.array([objects[name].x, objects[name].y])
        assert np.linalg.norm(np.asarray(position)[:2] - true) < 0.02, (name, position, true)
