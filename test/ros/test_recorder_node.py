"""The recorder node records a real graph into an MCAP file per episode (real rclpy).

A SimNode (one camera), a RecorderNode in episode mode and a probe node spin in one
MultiThreadedExecutor in a private rclpy Context on a domain of their own. The probe publishes
planner status lines and a trajectory; the file the recorder writes is read back with mcap's
reader and mcap-ros2-support's decoder (decoded ROS messages), as Foxglove or any tool would.
"""

from __future__ import annotations

import json
import os
import time

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco

rclpy = pytest.importorskip("rclpy")

from mcap.reader import make_reader  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from support.ros import spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from lang2policy.errors import ConfigError  # noqa: E402
from lang2policy.graph import topics  # noqa: E402

pytestmark = pytest.mark.ros

DOMAIN_ID = 1 + (os.getpid() + 67) % 200
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
INSTRUCTION = "Wave at the camera!"


@pytest.fixture(scope="module")
def recorder_graph(tmp_path_factory):
    from lang2policy.ros.recorder_node import RecorderNode
    from lang2policy.ros.sim_node import SimNode

    out = tmp_path_factory.mktemp("recordings")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context)
        sim = SimNode(
            context=context,
            parameter_overrides=[
                Parameter("cameras", value=["front"]),
                Parameter("camera_width", value=160),
                Parameter("camera_height", value=120),
            ],
        )
        recorder = RecorderNode(
            context=context,
            parameter_overrides=[
                Parameter("output_dir", value=str(out)),
                Parameter("linger", value=0.5),
                Parameter("cameras", value="front"),
            ],
        )
        probe = rclpy.create_node("recorder_probe", context=context)
        heard = []
        probe.create_subscription(JointState, topics.JOINT_STATES.name, heard.append, 10)
        with spinning(context, (sim, recorder, probe)):
            wait_for(lambda: heard, 10.0, "the sim node's joint states")
            yield context, recorder, probe, out, sim


def read(path):
    """{topic: [(schema name, decoded message)]} in log-time order."""
    found: dict[str, list] = {}
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        for schema, channel, _, decoded in reader.iter_decoded_messages():
            assert (schema.encoding, channel.message_encoding) == ("ros2msg", "cdr")
            found.setdefault(channel.topic, []).append((schema.name, decoded))
    return found


def test_an_episode_is_recorded_from_received_to_done(recorder_graph):
    _, recorder_node, probe, out, sim = recorder_graph
    status = probe.create_publisher(String, topics.STATUS.name, 10)
    instruction = probe.create_publisher(String, topics.INSTRUCTION.name, 10)
    command = probe.create_publisher(JointTrajectory, topics.TRAJECTORY.name, 10)
    wait_for(
        lambda: (
            status.get_subscription_count()
            and instruction.get_subscription_count()
            and command.get_subscription_count() >= 2
        ),
        15.0,
        "the recorder's and the sim node's subscriptions",
    )
    time.sleep(0.5)  # messages before the episode are not recorded
    assert list(out.iterdir()) == []

    def say(state):
        line = {"state": state, "instruction": INSTRUCTION, "detail": ""}
        status.publish(String(data=json.dumps(line)))

    instruction.publish(String(data=INSTRUCTION))  # before the episode, in its pre-roll

    def instruction_waiting() -> bool:  # heard by the recorder (a loaded machine is slow)
        try:
            return topics.INSTRUCTION.name in recorder_node.recorder.pending_topics()
        except RuntimeError:  # appended to while copied: ask again
            return False

    wait_for(instruction_waiting, 10.0, "the instruction in the recorder's pre-roll")
    say("received")
    wait_for(lambda: recorder_node.recorder.current, 5.0, "the episode's file")
    started = sim.now()
    time.sleep(0.5)
    trajectory = JointTrajectory(joint_names=["shoulder_pan"])
    trajectory.points.append(JointTrajectoryPoint(positions=[0.2]))
    command.publish(trajectory)
    time.sleep(0.5)
    # At least 0.5 s of sim time in the episode (5 camera frames at 10 Hz): the in-process sim
    # runs slower than real time while it starts up on a busy machine (2 frames seen in CI).
    wait_for(lambda: sim.now() >= started + 0.5, 30.0, "half a second of sim time")
    say("done")
    wait_for(lambda: recorder_node.recorder.files, 10.0, "the episode's file to be closed")

    (path,) = recorder_node.recorder.files
    assert path.name.endswith("_wave-at-the-camera.mcap")
    assert sorted(p.name for p in out.iterdir()) == [path.name]  # no .part left
    found = read(path)

    assert [m.data for _, m in found[topics.INSTRUCTION.name]] == [INSTRUCTION]
    states = [json.loads(m.data)["state"] for _, m in found[topics.STATUS.name]]
    assert states == ["received", "done"]
    joint_states = found[topics.JOINT_STATES.name]
    assert {name for name, _ in joint_states} == {"sensor_msgs/msg/JointState"}
    # 50 Hz for 1 s pre-roll, 1 s episode and 0.5 s linger of wall time: 125 at real time;
    # the in-process sim (rendering a camera too) runs several times slower than real time on
    # a loaded CI machine (19 seen), hence the wide margin.
    assert 5 <= len(joint_states) <= 200
    assert list(joint_states[-1][1].name) == JOINTS
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in joint_states]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]  # sim time, increasing
    ((kind, sent),) = found[topics.TRAJECTORY.name]
    assert kind == "trajectory_msgs/msg/JointTrajectory"
    assert list(sent.joint_names) == ["shoulder_pan"] and list(sent.points[0].positions) == [0.2]
    images = found["/camera/front/image_raw"]
    assert len(images) >= 3 and images[0][0] == "sensor_msgs/msg/Image"
    image = images[-1][1]
    assert (image.width, image.height, image.encoding, len(image.data)) == (
        160,
        120,
        "rgb8",
        160 * 120 * 3,
    )
    assert found["/camera/front/camera_info"][-1][1].width == 160


def test_bad_parameters_are_refused(recorder_graph):
    from lang2policy.ros.recorder_node import RecorderNode

    context, *_, out, _sim = recorder_graph
    with pytest.raises(ConfigError, match="no known type for topic '/tf'"):
        RecorderNode(
            context=context,
            parameter_overrides=[
                Parameter("output_dir", value=str(out / "bad")),
                Parameter("topics", value=["/tf"]),
            ],
        )
    with pytest.raises(ConfigError, match="mode must be one of"):
        RecorderNode(
            context=context,
            parameter_overrides=[
                Parameter("output_dir", value=str(out / "bad")),
                Parameter("mode", value="always"),
            ],
        )
    with pytest.raises(ConfigError, match="tf2_msgs/msg/TFMessage is not installed"):
        RecorderNode(
            context=context,
            parameter_overrides=[
                Parameter("output_dir", value=str(out / "bad")),
                Parameter("topics", value=["/tf=tf2_msgs/msg/TFMessage"]),
            ],
        )
