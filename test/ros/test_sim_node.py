"""The MuJoCo sim node keeps the ROS 2 contract (real rclpy, Fast DDS on loopback).

One SimNode and one probe node spin in a MultiThreadedExecutor on a background thread, in a
private rclpy Context on a domain of their own (ROS_DOMAIN_ID from the pid,
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST), so parallel sessions and later tests don't see them.
Also covers the pure parts (message conversion, trajectory following) and the console entry.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco

rclpy = pytest.importorskip("rclpy")

from builtin_interfaces.msg import Duration  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from support.ros import call_trigger, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from lang2policy.control.trajectory_follower import TrajectoryFollower  # noqa: E402
from lang2policy.errors import InvalidCommandError  # noqa: E402
from lang2policy.graph import topics  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + os.getpid() % 200
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
CAMERAS = ("front", "top", "wrist")
WIDTH, HEIGHT = 160, 120  # not the default: checks that the parameters reach the images
CONTROL_RATE = 50.0


def ros_env(domain_id: int = DOMAIN_ID) -> dict[str, str]:
    return {
        "ROS_DOMAIN_ID": str(domain_id),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
    }


def trajectory(names, points) -> JointTrajectory:
    """JointTrajectory from names and (seconds, positions) pairs."""
    msg = JointTrajectory(joint_names=list(names))
    for t, positions in points:
        sec = math.floor(t)
        msg.points.append(
            JointTrajectoryPoint(
                positions=[float(p) for p in positions],
                time_from_start=Duration(sec=sec, nanosec=round((t - sec) * 1e9)),
            )
        )
    return msg


# --------------------------------------------------------------------- pure parts
def test_trajectory_points_accepts_valid_and_empty():
    points = [(0.5, [0.1, 0.5]), (0.5, [0.2, 0.5]), (1.25, [0.3, 0])]
    msg = trajectory(["shoulder_pan", "gripper"], points)
    assert convert.trajectory_points(msg, JOINTS) == [
        (0.5, {"shoulder_pan": 0.1, "gripper": 0.5}),
        (0.5, {"shoulder_pan": 0.2, "gripper": 0.5}),
        (1.25, {"shoulder_pan": 0.3, "gripper": 0.0}),
    ]
    assert convert.trajectory_points(JointTrajectory(), JOINTS) == []


@pytest.mark.parametrize(
    ("names", "points", "reason"),
    [
        (["elbow"], [(1.0, [0.0])], "unknown joints ['elbow']; allowed joint names"),
        (["shoulder_pan"], [(1.0, [float("nan")])], "non-finite positions for ['shoulder_pan']"),
        (["shoulder_pan"], [(1.0, [math.inf])], "non-finite"),
        (["shoulder_pan", "gripper"], [(1.0, [0.1])], "point 0 has 1 positions; it must have one"),
        (["shoulder_pan"], [(1.0, [0.1]), (0.5, [0.2])], "times must be non-decreasing"),
        (["shoulder_pan", "shoulder_pan"], [(1.0, [0.1, 0.1])], "more than once"),
        ([], [(1.0, [])], "no joint_names"),
    ],
)
def test_trajectory_points_rejects_with_reason(names, points, reason):
    with pytest.raises(InvalidCommandError) as info:
        convert.trajectory_points(trajectory(names, points), JOINTS)
    assert reason in str(info.value)


def test_negative_time_from_start_is_rejected():
    msg = trajectory(["shoulder_pan"], [(1.0, [0.1])])
    msg.points[0].time_from_start = Duration(sec=-1, nanosec=0)
    with pytest.raises(InvalidCommandError, match="negative time_from_start"):
        convert.trajectory_points(msg, JOINTS)


def test_message_builders():
    assert convert.time_msg(12.000000001).nanosec == 1 and convert.time_msg(12.5).sec == 12
    assert convert.to_seconds(convert.clock(3.25).clock) == 3.25
    state = convert.joint_state(["a", "b"], [1, 2], [0, 0], stamp=1.5)
    assert (state.name, list(state.position), state.header.stamp.sec) == (["a", "b"], [1.0, 2.0], 1)
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[1, 2] = (1, 2, 3)
    img = convert.image(rgb, 0.0, "cam")
    assert (img.height, img.width, img.step, img.encoding) == (2, 3, 9, "rgb8")
    assert bytes(img.data)[-3:] == b"\x01\x02\x03"
    k = np.array([[100.0, 0, 80], [0, 100.0, 60], [0, 0, 1]])
    info = convert.camera_info(k, 160, 120, "cam")
    assert list(info.k) == k.flatten().tolist() and info.p[3] == 0.0 and info.p[10] == 1.0


def test_follower_interpolates_holds_and_cancels():
    follower = TrajectoryFollower(["a", "b"], np.array([0.0, 1.0]))
    follower.start(10.0, [(1.0, {"a": 1.0}), (3.0, {"a": -1.0})], np.zeros(2))
    assert follower.target(10.5) == pytest.approx([0.5, 1.0])  # from the current target
    assert follower.target(12.0) == pytest.approx([0.0, 1.0])
    assert follower.active(12.0) and not follower.active(13.0)
    assert follower.target(99.0) == pytest.approx([-1.0, 1.0])  # holds the last point
    follower.start(20.0, [(0.0, {"b": 2.0})], np.zeros(2))  # time 0: jump, 'a' holds
    assert follower.target(20.0) == pytest.approx([-1.0, 2.0])
    follower.start(30.0, [], np.array([0.3, 0.4]))  # empty: cancel, hold the measured position
    assert follower.target(31.0) == pytest.approx([0.3, 0.4])


# --------------------------------------------------------------------- the node in a graph
class Probe:
    """A test node that records the latest message (and a count) per topic."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("sim_node_probe", context=context)
        self.lock = threading.Lock()
        self.latest: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        for topic, kind in [(topics.JOINT_STATES.name, JointState), (topics.CLOCK.name, Clock)]:
            self._listen(topic, kind)
        for camera in CAMERAS:
            self._listen(f"/camera/{camera}/image_raw", Image)
            self._listen(f"/camera/{camera}/camera_info", CameraInfo)
        self.command = self.node.create_publisher(JointTrajectory, topics.TRAJECTORY.name, 10)
        self.reset_client = self.node.create_client(Trigger, topics.RESET.name)

    def _listen(self, topic: str, kind) -> None:
        def store(msg, topic=topic):
            with self.lock:
                self.latest[topic] = msg
                self.counts[topic] = self.counts.get(topic, 0) + 1

        self.node.create_subscription(kind, topic, store, 10)

    def count(self, topic: str) -> int:
        with self.lock:
            return self.counts.get(topic, 0)

    def get(self, topic: str):
        with self.lock:
            return self.latest.get(topic)

    def snapshot(self, topic: str) -> tuple[int, object]:
        """(messages received so far, the latest of them), consistent with each other."""
        with self.lock:
            return self.counts.get(topic, 0), self.latest.get(topic)

    def next(self, topic: str, timeout: float = 5.0):
        """The first message on ``topic`` that arrives after this call."""
        start = self.count(topic)
        wait_for(lambda: self.count(topic) > start, timeout, f"a message on {topic}")
        return self.get(topic)

    def positions(self) -> dict[str, float]:
        msg = self.next(topics.JOINT_STATES.name)
        return dict(zip(msg.name, msg.position, strict=True))

    def send(self, msg: JointTrajectory) -> None:
        wait_for(self.command.get_subscription_count, 15.0, "the sim node's subscription")
        self.command.publish(msg)

    def reset(self) -> Trigger.Response:
        return call_trigger(self.reset_client, "reset")


@pytest.fixture(scope="module")
def sim_graph():
    from lang2policy.ros.sim_node import SimNode

    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env().items():
            mp.setenv(key, value)
        context = rclpy.Context()
        rclpy.init(context=context)
        overrides = [
            Parameter("camera_width", value=WIDTH),
            Parameter("camera_height", value=HEIGHT),
            Parameter("control_rate", value=CONTROL_RATE),
        ]
        sim = SimNode(context=context, parameter_overrides=overrides)
        probe = Probe(context)
        with spinning(context, (sim, probe.node)):
            probe.next(topics.JOINT_STATES.name, timeout=10.0)
            yield sim, probe


def test_contract_topics_and_service_types(sim_graph):
    _, probe = sim_graph
    expected = {
        "/clock": "rosgraph_msgs/msg/Clock",
        "/joint_states": "sensor_msgs/msg/JointState",
        "/arm_controller/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
    }
    for camera in CAMERAS:
        expected[f"/camera/{camera}/image_raw"] = "sensor_msgs/msg/Image"
        expected[f"/camera/{camera}/camera_info"] = "sensor_msgs/msg/CameraInfo"

    def graph_has_all():
        found = dict(probe.node.get_topic_names_and_types())
        return all(found.get(t) == [k] for t, k in expected.items()) and found

    found = wait_for(graph_has_all, 5.0, f"topics {expected}")
    assert {t: found[t] for t in expected} == {t: [k] for t, k in expected.items()}
    publishers = {
        t: [i.node_name for i in probe.node.get_publishers_info_by_topic(t)] for t in expected
    }
    for topic in expected:
        if topic != topics.TRAJECTORY.name:
            assert "lang2policy_sim" in publishers[topic], (topic, publishers[topic])
    services = dict(probe.node.get_service_names_and_types())
    assert services.get(topics.RESET.name) == ["std_srvs/srv/Trigger"]


def test_joint_states_names_and_rate(sim_graph):
    sim, probe = sim_graph
    msg = probe.next(topics.JOINT_STATES.name)
    assert tuple(msg.name) == JOINTS == sim.world.arm.action_names
    assert len(msg.position) == len(msg.velocity) == len(JOINTS)
    assert all(math.isfinite(v) for v in msg.position)
    assert 0.0 <= msg.position[-1] <= 1.0  # the gripper is reported as a 0..1 opening

    count0, msg0 = probe.snapshot(topics.JOINT_STATES.name)  # a message arrived above, so not None
    # Wait for a number of messages, not a wall-clock time: a busy machine slows the sim down.
    wait_for(
        lambda: probe.snapshot(topics.JOINT_STATES.name)[0] >= count0 + 50, 30.0, "50 joint_states"
    )
    count1, msg1 = probe.snapshot(topics.JOINT_STATES.name)
    sim_seconds = convert.to_seconds(msg1.header.stamp) - convert.to_seconds(msg0.header.stamp)
    # Per second of sim time the rate is exact by design (and shows that nothing was lost).
    # The wall-clock rate is not checked: tests check behaviour, and CI machines get busy.
    assert count1 - count0 > 10
    assert (count1 - count0) / sim_seconds == pytest.approx(CONTROL_RATE, rel=0.05)


def test_clock_advances_and_stamps_joint_states(sim_graph):
    _, probe = sim_graph
    first = convert.to_seconds(probe.next(topics.CLOCK.name).clock)
    second = wait_for(
        lambda: (t := convert.to_seconds(probe.next(topics.CLOCK.name).clock)) > first + 0.2 and t,
        30.0,
        "the clock to advance 0.2 s",
    )
    assert second > first
    stamp = convert.to_seconds(probe.next(topics.JOINT_STATES.name).header.stamp)
    assert second <= stamp < second + 2.0


def test_camera_image_and_matching_info(sim_graph):
    _, probe = sim_graph
    for camera in CAMERAS:
        image = probe.next(f"/camera/{camera}/image_raw", timeout=10.0)
        info = probe.get(f"/camera/{camera}/camera_info") or probe.next(
            f"/camera/{camera}/camera_info"
        )
        assert (image.width, image.height, image.encoding) == (WIDTH, HEIGHT, "rgb8")
        assert image.step == 3 * WIDTH and len(image.data) == 3 * WIDTH * HEIGHT
        pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(HEIGHT, WIDTH, 3)
        assert pixels.std() > 5.0, f"{camera}: image is (nearly) uniform"
        assert (info.width, info.height) == (WIDTH, HEIGHT)
        assert info.header.frame_id == image.header.frame_id != ""
        k = np.array(info.k).reshape(3, 3)
        # principal point on the ROS/OpenCV convention: pixel centres on whole coordinates
        assert k[0, 2] == (WIDTH - 1) / 2 and k[1, 2] == (HEIGHT - 1) / 2
        assert k[0, 0] > 0 and k[2, 2] == 1


def test_trajectory_moves_shoulder_pan(sim_graph):
    _, probe = sim_graph
    assert probe.reset().success
    before = probe.positions()
    probe.send(trajectory(["shoulder_pan"], [(1.0, [0.4])]))
    wait_for(
        lambda: abs(probe.positions()["shoulder_pan"] - 0.4) < 0.05, 20.0, "shoulder_pan at 0.4"
    )
    time.sleep(0.5)
    after = probe.positions()
    assert after["shoulder_pan"] == pytest.approx(0.4, abs=0.05)
    for name in JOINTS[1:]:  # joints the trajectory does not name hold their targets
        assert after[name] == pytest.approx(before[name], abs=0.05), name


def test_bad_trajectories_are_rejected_and_the_arm_holds(sim_graph):
    sim, probe = sim_graph
    assert probe.reset().success
    time.sleep(0.3)
    before = probe.positions()
    rejected = sim.rejected_trajectories
    probe.send(trajectory(["shoulder_pan"], [(0.5, [float("nan")])]))
    probe.send(trajectory(["shoulder_pan", "no_such_joint"], [(0.5, [0.4, 0.4])]))
    wait_for(lambda: sim.rejected_trajectories == rejected + 2, 15.0, "both rejections")
    time.sleep(0.5)
    after = probe.positions()
    for name in JOINTS:
        assert after[name] == pytest.approx(before[name], abs=0.01), name


def test_empty_trajectory_cancels_and_holds(sim_graph):
    _, probe = sim_graph
    assert probe.reset().success
    probe.send(trajectory(["shoulder_pan"], [(4.0, [0.8])]))
    wait_for(lambda: probe.positions()["shoulder_pan"] > 0.1, 15.0, "shoulder_pan moving")
    probe.send(JointTrajectory())
    time.sleep(0.3)
    stopped = probe.positions()["shoulder_pan"]
    time.sleep(0.7)
    held = probe.positions()["shoulder_pan"]
    assert stopped < 0.5 and held == pytest.approx(stopped, abs=0.02)


def test_reset_service_reports_objects(sim_graph):
    sim, probe = sim_graph
    before = convert.to_seconds(probe.next(topics.CLOCK.name).clock)
    response = probe.reset()
    assert response.success, response.message
    report = json.loads(response.message)
    assert report["seed"] == sim.seed + sim.resets
    assert report["objects"] == sim.objects and report["objects"]
    assert all(isinstance(o, str) and o.endswith(("block", "bowl")) for o in report["objects"])
    after = convert.to_seconds(probe.next(topics.CLOCK.name).clock)
    assert before <= report["sim_time"] <= after  # /clock never jumps back, across resets too


# --------------------------------------------------------------------- console entry
def run_entry(*ros_args: str) -> subprocess.Popen:
    env = dict(os.environ, **ros_env(1 + (DOMAIN_ID % 200)))  # not the in-process graph
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "lang2policy.ros.sim_node", "--ros-args", *ros_args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_main_runs_until_ctrl_c_and_exits_cleanly():
    proc = run_entry("-p", "camera_rate:=0", "-p", "seed:=3")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("objects" in line for line in lines), 30.0, "the node's start log")
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=15)
        reader.join(timeout=5)
    output = "".join(lines)
    assert rc == 0, output
    assert "seed 3" in output and "Traceback" not in output, output


def test_main_rejects_bad_parameters_with_a_reason():
    proc = run_entry("-p", "control_rate:=-5")
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, output
    assert "control_rate" in output and "> 0" in output and "Traceback" not in output, output
