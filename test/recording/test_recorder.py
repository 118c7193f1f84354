"""lang2policy.recording without ROS: message definitions, MCAP layout, episodes, file names.

Messages are CDR-encoded here by mcap-ros2-support's own encoder (built from our definitions),
written with ``McapBag``/``Recorder`` and read back with mcap's reader and mcap-ros2-support's
decoder, as any tool would read them.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap_ros2._dynamic import serialize_dynamic
from mcap_ros2.decoder import DecoderFactory

from lang2policy.errors import ConfigError
from lang2policy.graph import topics
from lang2policy.graph.topics import StatusEvent
from lang2policy.recording import (
    DEFAULT_TOPICS,
    EpisodeTracker,
    McapBag,
    MessageDefinitionError,
    Recorder,
    Start,
    Stop,
    message_definition,
    recording_path,
    resolve_topics,
    slug,
)
from lang2policy.recording.definitions import DELIMITER

STRING = "std_msgs/msg/String"
JOINT_STATE = "sensor_msgs/msg/JointState"


def encode(type_name: str, message: dict) -> bytes:
    """CDR bytes of ``message`` (a dict) built from our definition of ``type_name``."""
    return serialize_dynamic(type_name, message_definition(type_name))[type_name](message)


def status(payload: dict) -> bytes:
    return encode(STRING, {"data": json.dumps(payload)})


def read(path: Path):
    """(header profile, [(topic, schema name, schema encoding, message encoding, decoded)])."""
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        profile = reader.get_header().profile
        rows = [
            (channel.topic, schema.name, schema.encoding, channel.message_encoding, decoded)
            for schema, channel, _, decoded in reader.iter_decoded_messages()
        ]
    return profile, rows


# --------------------------------------------------------------------- definitions
def test_joint_state_definition_is_laid_out_as_rosbag2_does():
    text = message_definition(JOINT_STATE)
    parts = text.split(f"\n{DELIMITER}\n")
    assert "std_msgs/Header header" in parts[0] and "float64[] position" in parts[0]
    assert [p.splitlines()[0] for p in parts[1:]] == [
        "MSG: std_msgs/Header",
        "MSG: builtin_interfaces/Time",
    ]
    assert "int32 sec" in parts[2]


def test_marker_array_definition_holds_every_type_once():
    text = message_definition("visualization_msgs/msg/MarkerArray")
    names = [line[5:] for line in text.splitlines() if line.startswith("MSG: ")]
    assert len(names) == len(set(names))
    assert {
        "visualization_msgs/Marker",
        "geometry_msgs/Pose",
        "std_msgs/ColorRGBA",
        "builtin_interfaces/Duration",
        "geometry_msgs/Point",
    } <= set(names)
    assert text.count(DELIMITER) == len(names)


def test_definition_search_with_package_context_and_nesting(tmp_path):
    """Bare type names belong to the same package; dependencies are expanded depth first."""
    (tmp_path / "share/my_msgs/msg").mkdir(parents=True)
    (tmp_path / "share/my_msgs/msg/Outer.msg").write_text(
        "# comment: Inner is not a field\nInner[] items\nother_msgs/Leaf leaf\nuint8 N=3\n"
    )
    (tmp_path / "share/my_msgs/msg/Inner.msg").write_text("other_msgs/Leaf leaf\nstring name\n")
    (tmp_path / "share/other_msgs/msg").mkdir(parents=True)
    (tmp_path / "share/other_msgs/msg/Leaf.msg").write_text("float64 x\n")
    text = message_definition("my_msgs/msg/Outer", prefixes=[tmp_path])
    assert text == (
        "# comment: Inner is not a field\nInner[] items\nother_msgs/Leaf leaf\nuint8 N=3\n"
        f"\n{DELIMITER}\nMSG: my_msgs/Inner\nother_msgs/Leaf leaf\nstring name\n"
        f"\n{DELIMITER}\nMSG: other_msgs/Leaf\nfloat64 x\n"
    )


def test_unknown_or_malformed_types_say_where_they_were_looked_for(tmp_path):
    with pytest.raises(MessageDefinitionError, match=r"no definition of my_msgs/msg/Nope"):
        message_definition("my_msgs/msg/Nope", prefixes=[tmp_path])
    with pytest.raises(MessageDefinitionError, match="not of the form <package>/msg/<Type>"):
        message_definition("JointState")


# --------------------------------------------------------------------- one file
def test_bag_round_trip_through_standard_readers(tmp_path):
    bag = McapBag(tmp_path / "a.mcap", {"label": "test"})
    assert bag.partial.exists() and not bag.path.exists()
    joints = {
        "header": {"stamp": {"sec": 3, "nanosec": 5}, "frame_id": ""},
        "name": ["a", "b"],
        "position": [0.5, -1.0],
        "velocity": [],
        "effort": [],
    }
    bag.write(topics.JOINT_STATES.name, JOINT_STATE, encode(JOINT_STATE, joints), 1_000)
    bag.write(topics.STATUS.name, STRING, status({"state": "done"}), 2_000)
    bag.write(topics.JOINT_STATES.name, JOINT_STATE, encode(JOINT_STATE, joints), 3_000)
    assert bag.close() == tmp_path / "a.mcap" and not bag.partial.exists()
    profile, rows = read(tmp_path / "a.mcap")
    assert profile == "ros2"
    assert [(t, s, se, me) for t, s, se, me, _ in rows] == [
        (topics.JOINT_STATES.name, JOINT_STATE, "ros2msg", "cdr"),
        (topics.STATUS.name, STRING, "ros2msg", "cdr"),
        (topics.JOINT_STATES.name, JOINT_STATE, "ros2msg", "cdr"),
    ]
    first = rows[0][4]
    assert list(first.name) == ["a", "b"] and list(first.position) == [0.5, -1.0]
    assert first.header.stamp.sec == 3 and json.loads(rows[1][4].data) == {"state": "done"}
    assert bag.counts == {topics.JOINT_STATES.name: 2, topics.STATUS.name: 1}


def test_a_topic_keeps_its_type(tmp_path):
    bag = McapBag(tmp_path / "b.mcap")
    bag.write("/x", STRING, encode(STRING, {"data": "1"}), 1)
    with pytest.raises(ValueError, match="recorded as std_msgs/msg/String"):
        bag.write("/x", JOINT_STATE, b"", 2)
    bag.close()


# --------------------------------------------------------------------- episodes
def received(text):
    return {"state": "received", "instruction": text, "detail": {"route": "code"}}


def test_episode_from_received_to_done_plus_linger():
    tracker = EpisodeTracker(linger=2.0)
    assert tracker.on_status({"state": "done", "instruction": "x"}, 0.0) == []  # none running
    assert tracker.on_status(received("pick"), 1.0) == [Start("pick")]
    assert tracker.on_status({"state": "running", "instruction": "pick"}, 2.0) == []
    assert tracker.on_status({"state": "done", "instruction": "pick"}, 3.0) == []
    assert tracker.poll(4.9) == [] and tracker.active
    assert tracker.poll(5.0) == [Stop("planner done")] and not tracker.active
    assert tracker.poll(9.0) == []


def test_next_instruction_cuts_the_episode_and_a_correction_extends_it():
    tracker = EpisodeTracker(linger=1.0)
    tracker.on_status(received("a"), 0.0)
    assert tracker.on_status(received("b"), 1.0) == [Stop("next instruction"), Start("b")]
    tracker.on_status({"state": "failed", "instruction": "b"}, 2.0)
    assert tracker.on_status({"state": "correction", "instruction": "more left"}, 2.5) == []
    assert tracker.poll(10.0) == [] and tracker.label == "b"  # the correction cancelled the end
    tracker.on_status({"state": "done", "instruction": "more left"}, 11.0)
    assert tracker.poll(12.0) == [Stop("planner done")]
    assert tracker.on_status({"state": "correction", "instruction": "c"}, 13.0) == [Start("c")]
    assert tracker.finish() == [Stop("recorder shutting down")] and tracker.finish() == []


def test_reward_episode_waits_for_the_controller():
    tracker = EpisodeTracker(linger=1.0, controller_wait=5.0)
    controller = {"node": "controller"}
    tracker.on_status(received("lift"), 0.0)
    tracker.on_status({**controller, "state": "success"}, 0.5)  # the previous task's
    done = {"state": "done", "instruction": "lift", "detail": {"outcome": "reward_spec"}}
    tracker.on_status(done, 1.0)
    tracker.on_status({**controller, "state": "success"}, 1.5)  # stale: not taken yet
    assert tracker.poll(3.0) == []
    tracker.on_status({**controller, "state": "accepted"}, 3.0)
    tracker.on_status({**controller, "state": "running"}, 20.0)
    assert tracker.poll(30.0) == []
    tracker.on_status({**controller, "state": "success"}, 31.0)
    assert tracker.poll(32.0) == [Stop("controller success")]


def test_reward_episode_ends_when_no_controller_takes_it():
    tracker = EpisodeTracker(linger=1.0, controller_wait=5.0)
    tracker.on_status(received("lift"), 0.0)
    tracker.on_status({"state": "done", "detail": {"outcome": "reward_spec"}}, 1.0)
    assert tracker.poll(5.9) == []
    assert tracker.poll(7.0) == [Stop("the controller did not take the reward task")]


def test_episodes_follow_lines_that_name_their_node():
    """Lines built as ``StatusEvent``s steer episodes like old lines without a node; a line
    of another node does not."""
    tracker = EpisodeTracker(linger=1.0)
    planner = StatusEvent(topics.PLANNER_NODE, "received", "wave").to_dict()
    assert tracker.on_status(planner, 0.0) == [Start("wave")]
    safety = StatusEvent(topics.SAFETY_NODE, "stopped", detail="stop requested").to_dict()
    assert tracker.on_status(safety, 0.5) == [] and tracker.poll(5.0) == []
    done = StatusEvent(topics.PLANNER_NODE, "done", "wave").to_dict()
    tracker.on_status(done, 6.0)
    assert tracker.poll(7.5) == [Stop("planner done")]


# --------------------------------------------------------------------- recorder
class Clock:
    def __init__(self):
        self.now = datetime(2026, 11, 21, 10, 15, 30)

    def __call__(self):
        self.now += timedelta(seconds=1)
        return self.now


def metadata(path: Path) -> dict[str, dict[str, str]]:
    with open(path, "rb") as stream:
        return {m.name: m.metadata for m in make_reader(stream).iter_metadata()}


def test_episode_mode_writes_a_file_per_instruction_with_a_preroll(tmp_path):
    files = []
    recorder = Recorder(
        tmp_path,
        "episode",
        linger=0.5,
        preroll=0.5,
        now=Clock(),
        on_file=lambda event, path: files.append((event, path.name)),
    )
    joints = encode(STRING, {"data": "joints"})

    def at(topic, seconds):
        return recorder.message(topic, STRING, joints, round(seconds * 1e9))

    def say(payload, seconds):
        recorder.status(payload, seconds)
        recorder.message(topics.STATUS.name, STRING, status(payload), round(seconds * 1e9))

    assert at("/x", 0.1) is False  # before any episode, too early for its pre-roll
    assert at(topics.INSTRUCTION.name, 0.9) is False  # kept: in the pre-roll
    say(received("Put the RED block in the bowl!"), 1.0)
    assert at("/x", 1.5) is True
    say({"state": "done", "instruction": "..."}, 2.0)
    assert at("/x", 2.5) is True  # while lingering
    recorder.poll(2.6)
    assert recorder.current is None
    assert at("/x", 2.7) is False  # between episodes: the next one's pre-roll
    say(received("wave"), 3.0)
    recorder.close()

    first, second = recorder.files
    assert first.name == "20261121-101531_put-the-red-block-in-the-bowl.mcap"
    assert second.name == "20261121-101533_wave.mcap"
    assert [e for e, _ in files] == [
        "recording",
        "wrote 5 messages to",
        "recording",
        "wrote 2 messages to",
    ]
    _, rows = read(first)
    assert [t for t, *_ in rows] == [
        topics.INSTRUCTION.name,
        topics.STATUS.name,
        "/x",
        topics.STATUS.name,
        "/x",
    ]
    assert json.loads(rows[1][4].data)["state"] == "received"
    assert [t for t, *_ in read(second)[1]] == ["/x", topics.STATUS.name]
    assert metadata(first)["lang2policy"]["label"] == "Put the RED block in the bowl!"
    assert metadata(first)["episode_end"]["reason"] == "planner done"
    assert metadata(second)["episode_end"]["reason"] == "recorder shutting down"


def test_the_latest_instruction_is_kept_whatever_its_age(tmp_path):
    recorder = Recorder(
        tmp_path, "episode", preroll=0.5, now=Clock(), keep_latest=[topics.INSTRUCTION.name]
    )
    joints = encode(STRING, {"data": "joints"})

    def at(topic, seconds, data=joints):
        return recorder.message(topic, STRING, data, round(seconds * 1e9))

    at(topics.INSTRUCTION.name, 0.5, encode(STRING, {"data": "old"}))
    at(topics.INSTRUCTION.name, 1.0, encode(STRING, {"data": "wave"}))
    at("/x", 2.0)  # too old for the pre-roll by the time the episode starts
    at("/x", 4.8)
    assert recorder.pending_topics() == [topics.INSTRUCTION.name, "/x"]  # /x at 2.0 is gone
    recorder.status(received("wave"), 5.0)  # 4 s after the instruction: a slow planner
    recorder.message(topics.STATUS.name, STRING, status(received("wave")), round(5e9))
    recorder.close()

    (path,) = recorder.files
    rows = read(path)[1]
    assert [t for t, *_ in rows] == [topics.INSTRUCTION.name, "/x", topics.STATUS.name]
    assert rows[0][4].data == "wave"  # the latest instruction only


def test_session_mode_writes_one_file_from_start_to_close(tmp_path):
    recorder = Recorder(tmp_path / "new", "session", now=Clock())
    assert recorder.current.name == "20261121-101531_session.mcap"
    recorder.status(received("a"), 0.0)  # episodes do not cut a session
    recorder.poll(100.0)
    assert recorder.message("/x", STRING, encode(STRING, {"data": "1"}), 1)
    recorder.close()
    assert [p.name for p in recorder.files] == ["20261121-101531_session.mcap"]
    assert len(read(recorder.files[0])[1]) == 1


def test_bad_recorder_settings(tmp_path):
    with pytest.raises(ConfigError, match=r"mode must be one of \['episode', 'session'\]"):
        Recorder(tmp_path, "always")
    with pytest.raises(ConfigError, match="preroll must be >= 0 seconds"):
        Recorder(tmp_path, preroll=-1)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot create the recording directory"):
        Recorder(tmp_path / "file" / "sub", "session")


# --------------------------------------------------------------------- names and topics
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Put the RED block in the bowl!", "put-the-red-block-in-the-bowl"),
        ("  ", "episode"),
        ("stack " * 20, "stack-stack-stack-stack-stack-stack-stack-stack"),
        ("ünïcode & co", "unicode-co"),
        ("x" * 60, "x" * 48),
        ("pick " + "y" * 50, "pick"),
    ],
)
def test_slug(text, expected):
    assert slug(text) == expected and len(slug(text)) <= 48


def test_recording_path_never_overwrites(tmp_path):
    started = datetime(2026, 1, 2, 3, 4, 5)
    first = recording_path(tmp_path, started, "go")
    assert first == tmp_path / "20260102-030405_go.mcap"
    first.write_text("")
    (tmp_path / "20260102-030405_go-2.mcap.part").write_text("")
    assert recording_path(tmp_path, started, "go").name == "20260102-030405_go-3.mcap"


def test_topics_and_types():
    found = resolve_topics(DEFAULT_TOPICS, ("front",))
    assert found[topics.JOINT_STATES.name] == JOINT_STATE
    assert found[topics.TRAJECTORY.name] == "trajectory_msgs/msg/JointTrajectory"
    assert found["/camera/front/image_raw"] == "sensor_msgs/msg/Image"
    assert found["/camera/front/camera_info"] == "sensor_msgs/msg/CameraInfo"
    assert resolve_topics(["/tf=tf2_msgs/TFMessage"]) == {"/tf": "tf2_msgs/msg/TFMessage"}
    with pytest.raises(ConfigError, match="no known type for topic '/tf'"):
        resolve_topics(["/tf"])
    with pytest.raises(ConfigError, match="is not an absolute ROS topic name"):
        resolve_topics(["joint_states"])
    with pytest.raises(ConfigError, match="nothing to record"):
        resolve_topics([])
