"""What one episode's MCAP recording holds, read into time series (``read_recording``).

A recording of ``--record-mode episode`` (``lang2policy.recording.Recorder``) is one file per
instruction: ``/joint_states``, each recorded camera's ``/camera/<name>/image_raw``, the
commands (``/arm_controller/joint_trajectory``, what the safety node sent the arm, and
``/lang2policy/joint_command``, what the planner or controller asked for), the status lines,
the instruction, and metadata (``lang2policy``: label, start; ``episode_end``: why it ended).

Messages keep their log time (wall-clock receive time, as ``ros2 bag record``); stamped
messages also carry their header stamp (the simulation's clock). Missing topics are an error
that names them and lists what the file has.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcap.exceptions import McapError
from mcap.records import Channel, Message, Metadata, Schema

from lang2policy.errors import Lang2PolicyError
from lang2policy.graph import topics as contract
from lang2policy.recording.topics import camera_topics
from lang2policy.vla.dataset import cdr
from lang2policy.vla.dataset.mcap_records import read_records
from lang2policy.wire_json import MessageError, decode_status

# The command the arm was sent, in order of preference (see ``resample.commanded_actions``).
COMMAND_TOPICS = (contract.TRAJECTORY.name, contract.JOINT_COMMAND.name)


@dataclass
class Recording:
    """The decoded messages of one MCAP file; times are log times in seconds."""

    path: Path
    topics: dict[str, str]  # every topic in the file -> its message type
    joint_states: list[tuple[float, cdr.JointStateMsg]] = field(default_factory=list)
    images: dict[str, list[tuple[float, cdr.ImageMsg]]] = field(default_factory=dict)
    commands: list[tuple[float, cdr.TrajectoryMsg]] = field(default_factory=list)
    command_topic: str = ""
    statuses: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    instructions: list[tuple[float, str]] = field(default_factory=list)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)


def read_recording(path: Path, cameras: tuple[str, ...]) -> Recording:
    """Read ``path``, keeping the topics an episode needs for ``cameras``; every size the file
    declares is checked against ``loader_limits`` first (``mcap_records``)."""
    path = Path(path)
    if not path.is_file():
        raise Lang2PolicyError(f"no recording at {path}: not a file")
    try:
        return _read(path, cameras)
    except (McapError, OSError, ValueError, EOFError) as exc:
        raise Lang2PolicyError(f"{path} is not a readable MCAP recording: {exc}") from exc
    except cdr.CdrError as exc:
        raise Lang2PolicyError(f"{path}: a message could not be decoded: {exc}") from exc


def _read(path: Path, cameras: tuple[str, ...]) -> Recording:
    """One pass over the file: messages of the topics an episode may need are decoded as
    they come (the commands once it is known which topic holds them), then put in log-time
    order, as ``mcap``'s reader gives them."""
    recording = Recording(path, {})
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    wanted = _wanted(cameras)
    commands: dict[str, list[tuple[Schema | None, Message]]] = {t: [] for t in COMMAND_TOPICS}
    for record in read_records(path):
        if isinstance(record, Schema):
            schemas[record.id] = record
        elif isinstance(record, Channel):
            channels[record.id] = record
        elif isinstance(record, Metadata):
            recording.metadata[record.name] = dict(record.metadata)
        elif record.channel_id not in channels:
            raise McapError(f"a message on channel {record.channel_id}, which has no record")
        else:
            channel = channels[record.channel_id]
            schema = schemas.get(channel.schema_id)
            if channel.topic in commands:
                commands[channel.topic].append((schema, record))
            elif channel.topic in wanted:
                _add(recording, wanted[channel.topic], schema, channel.topic, record)
    recording.topics = {
        c.topic: schemas[c.schema_id].name if c.schema_id in schemas else ""
        for c in channels.values()
    }
    _check_topics(recording, cameras)
    for schema, message in commands[recording.command_topic]:
        _add(recording, "command", schema, recording.command_topic, message)
    _in_log_time_order(recording)
    return recording


def _in_log_time_order(recording: Recording) -> None:
    for series in (
        recording.joint_states,
        recording.commands,
        recording.statuses,
        recording.instructions,
        *recording.images.values(),
    ):
        series.sort(key=lambda item: item[0])  # stable: file order among equal times


def _check_topics(recording: Recording, cameras: tuple[str, ...]) -> None:
    needed = [contract.JOINT_STATES.name, *(camera_topics(c)[0] for c in cameras)]
    missing = [topic for topic in needed if topic not in recording.topics]
    if not any(topic in recording.topics for topic in COMMAND_TOPICS):
        missing.append(" or ".join(COMMAND_TOPICS))
    if missing:
        raise Lang2PolicyError(
            f"{recording.path.name} lacks {missing} (record the cameras with the recorder's "
            f"cameras parameter); it has {sorted(recording.topics)}"
        )
    recording.command_topic = next(t for t in COMMAND_TOPICS if t in recording.topics)


def _wanted(cameras: tuple[str, ...]) -> dict[str, str]:
    """``{topic: what it is}`` for the topics read besides the commands: joints,
    camera:<name>, status, instruction."""
    wanted = {
        contract.JOINT_STATES.name: "joints",
        contract.STATUS.name: "status",
        contract.INSTRUCTION.name: "instruction",
    }
    wanted.update({camera_topics(camera)[0]: f"camera:{camera}" for camera in cameras})
    return wanted


_TYPES = {
    "joints": contract.JOINT_STATES.type,
    "command": contract.TRAJECTORY.type,
    "status": contract.STATUS.type,
    "instruction": contract.INSTRUCTION.type,
    "camera": "sensor_msgs/msg/Image",
}


def _add(recording: Recording, kind: str, schema, topic: str, message) -> None:
    expected = _TYPES[kind.partition(":")[0]]
    if schema is not None and schema.name != expected:
        raise Lang2PolicyError(
            f"{recording.path.name}: {topic} holds {schema.name}, expected {expected}"
        )
    time, data = message.log_time * 1e-9, message.data
    if kind == "joints":
        recording.joint_states.append((time, cdr.decode_joint_state(data)))
    elif kind == "command":
        recording.commands.append((time, cdr.decode_trajectory(data)))
    elif kind == "instruction":
        recording.instructions.append((time, cdr.decode_string(data)))
    elif kind == "status":
        # A malformed status line says nothing about the episode.
        with contextlib.suppress(MessageError):
            recording.statuses.append((time, decode_status(cdr.decode_string(data))))
    else:
        camera = kind.partition(":")[2]
        recording.images.setdefault(camera, []).append((time, cdr.decode_image(data)))
