"""Recording the graph's topics to MCAP files that standard tools read (pure: no ROS import).

``Recorder`` (sessions and episodes) -> ``McapBag`` (one file, laid out as ``ros2 bag`` lays
it out) with complete message definitions from ``message_definition``. The ROS side,
``lang2policy.ros.recorder_node``, only subscribes and hands over the serialized bytes.
"""

from lang2policy.recording.bag import McapBag
from lang2policy.recording.definitions import (
    MessageDefinitionError,
    message_definition,
    share_prefixes,
)
from lang2policy.recording.episodes import EpisodeTracker, Start, Stop
from lang2policy.recording.naming import recording_path, slug
from lang2policy.recording.recorder import MODES, Recorder
from lang2policy.recording.topics import (
    DEFAULT_TOPICS,
    camera_topics,
    resolve_topics,
    topic_type,
)

__all__ = [
    "DEFAULT_TOPICS",
    "MODES",
    "EpisodeTracker",
    "McapBag",
    "MessageDefinitionError",
    "Recorder",
    "Start",
    "Stop",
    "camera_topics",
    "message_definition",
    "recording_path",
    "resolve_topics",
    "share_prefixes",
    "slug",
    "topic_type",
]
