"""Which topics a recording holds, and their message types (the graph's contract)."""

from __future__ import annotations

import re

from lang2policy.errors import ConfigError
from lang2policy.recording.definitions import split_type

# Every topic of the lang2policy graph with its type (docs: the ROS 2 contract table).
KNOWN_TYPES: dict[str, str] = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/lang2policy/joint_command": "trajectory_msgs/msg/JointTrajectory",
    "/arm_controller/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
    "/lang2policy/objects": "visualization_msgs/msg/MarkerArray",
    "/sim/objects": "visualization_msgs/msg/MarkerArray",
    "/lang2policy/instruction": "std_msgs/msg/String",
    "/lang2policy/correction": "std_msgs/msg/String",
    "/lang2policy/status": "std_msgs/msg/String",
    "/lang2policy/safety": "std_msgs/msg/String",
    "/lang2policy/reward_spec": "std_msgs/msg/String",
    "/clock": "rosgraph_msgs/msg/Clock",
}
# Recorded unless told otherwise: what a person needs to replay and judge an episode.
DEFAULT_TOPICS: tuple[str, ...] = (
    "/joint_states",
    "/lang2policy/joint_command",
    "/arm_controller/joint_trajectory",
    "/lang2policy/objects",
    "/lang2policy/instruction",
    "/lang2policy/correction",
    "/lang2policy/status",
    "/lang2policy/safety",
    "/lang2policy/reward_spec",
)
STATUS_TOPIC = "/lang2policy/status"
INSTRUCTION_TOPIC = "/lang2policy/instruction"
_CAMERA = re.compile(r"^/camera/[A-Za-z0-9_]+/(image_raw|camera_info)$")
_TOPIC = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


def camera_topics(camera: str) -> tuple[str, str]:
    """The image and camera-info topics of a camera (as the sim node publishes them)."""
    return f"/camera/{camera}/image_raw", f"/camera/{camera}/camera_info"


def topic_type(topic: str) -> str:
    """The message type of a known topic (the contract's, or a camera's)."""
    if topic in KNOWN_TYPES:
        return KNOWN_TYPES[topic]
    match = _CAMERA.match(topic)
    if match:
        return {"image_raw": "sensor_msgs/msg/Image", "camera_info": "sensor_msgs/msg/CameraInfo"}[
            match.group(1)
        ]
    raise ConfigError(
        f"no known type for topic {topic!r}: name it as '{topic}=<package>/msg/<Type>'; known "
        f"topics: {sorted(KNOWN_TYPES)} and /camera/<name>/image_raw|camera_info"
    )


def resolve_topics(
    entries: list[str] | tuple[str, ...], cameras: tuple[str, ...] = ()
) -> dict[str, str]:
    """``{topic: type}`` for entries ``"/topic"`` or ``"/topic=pkg/msg/Type"``, plus the image
    and camera-info topics of ``cameras``."""
    found: dict[str, str] = {}
    for entry in [*entries, *(t for c in cameras for t in camera_topics(c))]:
        topic, _, given = entry.strip().partition("=")
        topic = topic.strip()
        if not _TOPIC.match(topic):
            raise ConfigError(f"topic {topic!r} is not an absolute ROS topic name (/a/b)")
        if given:
            package, namespace, name = split_type(given.strip())
            found[topic] = f"{package}/{namespace}/{name}"
        else:
            found[topic] = topic_type(topic)
    if not found:
        raise ConfigError("nothing to record: the topic list is empty")
    return found
