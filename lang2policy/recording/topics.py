"""Which topics a recording holds, and their message types (the graph's contract,
``lang2policy.graph.topics``, and the cameras')."""

from __future__ import annotations

import re

from lang2policy.errors import ConfigError
from lang2policy.graph import topics as contract
from lang2policy.recording.definitions import split_type

# Recorded unless told otherwise: what a person needs to replay and judge an episode.
DEFAULT_TOPICS: tuple[str, ...] = tuple(
    endpoint.name
    for endpoint in (
        contract.JOINT_STATES,
        contract.JOINT_COMMAND,
        contract.TRAJECTORY,
        contract.OBJECTS,
        contract.INSTRUCTION,
        contract.CORRECTION,
        contract.STATUS,
        contract.SAFETY,
        contract.REWARD_SPEC,
    )
)
_CAMERA = re.compile(r"^/camera/[A-Za-z0-9_]+/(image_raw|camera_info)$")
_TOPIC = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


def camera_topics(camera: str) -> tuple[str, str]:
    """The image and camera-info topics of a camera (as the sim node publishes them)."""
    return f"/camera/{camera}/image_raw", f"/camera/{camera}/camera_info"


def topic_type(topic: str) -> str:
    """The message type of a known topic (the contract's, or a camera's)."""
    if topic in contract.TOPIC_TYPES:
        return contract.TOPIC_TYPES[topic]
    match = _CAMERA.match(topic)
    if match:
        return {"image_raw": "sensor_msgs/msg/Image", "camera_info": "sensor_msgs/msg/CameraInfo"}[
            match.group(1)
        ]
    raise ConfigError(
        f"no known type for topic {topic!r}: name it as '{topic}=<package>/msg/<Type>'; known "
        f"topics: {sorted(contract.TOPIC_TYPES)} and /camera/<name>/image_raw|camera_info"
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
