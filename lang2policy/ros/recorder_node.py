"""The recorder as a ROS 2 node: the graph's topics into MCAP files, one per episode.

``lang2policy_recorder`` subscribes to ``topics`` (default: ``lang2policy.recording.
DEFAULT_TOPICS``; an entry is ``/topic`` for a topic of the contract or
``/topic=<pkg>/msg/<Type>``) plus the image and camera-info topics of ``cameras``
(comma-separated names), takes each message serialized (CDR bytes as published, like
``ros2 bag record``) and hands it to ``lang2policy.recording.Recorder``, which writes MCAP files
under ``output_dir``. ``mode`` ``episode`` (default) opens a file when the planner's status says
``received`` (with the ``preroll`` seconds before it, the arm at rest, and the latest
instruction however long before it came) and
closes it ``linger`` seconds after the episode ends (``EpisodeTracker``); ``session`` writes one
file until the node stops. Files are ``<YYYYmmdd-HHMMSS>_<instruction slug>.mcap``; log times
are the wall-clock receive times (as ``ros2 bag record`` without ``--use-sim-time``), and the
messages' header stamps keep the sim time. One arm's recorder in a fleet (namespace ``/arm2``)
subscribes the names relative, so it hears its arm's topics; its files keep the contract's
channel names (``/joint_states``), so every arm's recording reads like any other.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from rclpy.clock import Clock, ClockType
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from std_msgs.msg import String

from lang2policy.errors import ConfigError
from lang2policy.graph.topics import INSTRUCTION, STATUS
from lang2policy.recording import Recorder, resolve_topics
from lang2policy.recording.definitions import split_type
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.wire_json import MessageError, decode_status

QUEUE_DEPTH = 100  # a burst of camera frames or trajectories must not be dropped
POLL_PERIOD = 0.2  # s between checks whether an episode's linger time is over


class RecorderNode(ReadOnlyParameters):
    """``lang2policy_recorder``: subscriptions -> ``Recorder`` (see the module docstring)."""

    executable = "recorder_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_recorder", **kwargs)
        output_dir = self._param("output_dir")
        mode = self._param("mode")
        entries = list(self._param("topics"))
        cameras = self._param("cameras")
        linger = self._param("linger")
        preroll = self._param("preroll")
        names = tuple(c.strip() for c in cameras.split(",") if c.strip())
        self.topics = resolve_topics(entries, names)
        if mode == "episode":  # episodes are cut at status lines: always hear them
            self.topics.setdefault(STATUS.name, STATUS.type)
        self.recorder = Recorder(
            Path(output_dir).expanduser(),
            mode,
            linger,
            preroll,
            on_file=self._on_file,
            keep_latest=[INSTRUCTION.name],  # an episode's file always has its instruction
        )
        qos = QoSProfile(depth=QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        # Subscribed relative, so one arm's recorder (``/arm2``) hears its arm's topics; the
        # file names the channels as given (the contract's names), like any other recording.
        for topic, type_name in self.topics.items():
            self.create_subscription(
                message_class(type_name),
                topic.lstrip("/"),
                lambda data, topic=topic, kind=type_name: self._on_message(topic, kind, data),
                qos,
                raw=True,
            )
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # linger in wall time, sim or not
        self._timer = None  # session mode has no episodes to close: no timer
        if mode == "episode":
            self._timer = self.create_timer(POLL_PERIOD, self._poll, clock=steady)
        self.get_logger().info(
            f"recording {len(self.topics)} topics ({mode} mode) to {self.recorder.output_dir}"
        )

    def _on_message(self, topic: str, type_name: str, data: bytes) -> None:
        if topic == STATUS.name:
            self._on_status(data)
        self.recorder.message(topic, type_name, data, time.time_ns())

    def _on_status(self, data: bytes) -> None:
        """Cut episodes at status lines. A line that cannot be decoded (bounded and total:
        ``decode_status``) is still recorded, only not used for episodes."""
        try:
            payload = status_from_cdr(data)
        except MessageError as exc:
            self.get_logger().warning(f"ignored a message: {exc}", throttle_duration_sec=5.0)
            return
        self.recorder.status(payload, time.monotonic())

    def _poll(self) -> None:
        self.recorder.poll(time.monotonic())

    def _on_file(self, event: str, path: Path) -> None:
        if self.context.ok():
            self.get_logger().info(f"{event} {path}")
        else:  # closing after Ctrl-C: rclpy's logger can no longer reach /rosout
            print(f"[lang2policy_recorder] {event} {path}", file=sys.stderr, flush=True)

    def destroy_node(self) -> None:
        """Finish the open file. Also called for a node whose constructor failed (rclpy
        destroys a context's nodes when it shuts down), hence the getattr."""
        if (timer := getattr(self, "_timer", None)) is not None:
            timer.cancel()
        if (recorder := getattr(self, "recorder", None)) is not None:
            recorder.close()
        super().destroy_node()


def status_from_cdr(data: bytes) -> dict:
    """The status line in a serialized std_msgs/String: a JSON object with a text ``state``;
    ``MessageError`` (with the reason) for anything else."""
    try:
        text = deserialize_message(data, String).data
    except (RuntimeError, ValueError, TypeError) as exc:  # not a String's CDR (RMWError)
        raise MessageError(f"{STATUS.name}: not a std_msgs/String ({exc})") from exc
    return decode_status(text, what=STATUS.name)


def message_class(type_name: str) -> type:
    """The Python class of ``pkg/msg/Type`` (its package must be installed)."""
    package, namespace, name = split_type(type_name)
    try:
        module = importlib.import_module(f"{package}.{namespace}")
        return getattr(module, name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"message type {type_name} is not installed ({exc}); install its ROS package"
        ) from exc


main = entry_point(RecorderNode, "recorder_node", "record until Ctrl-C or ROS shutdown")


if __name__ == "__main__":
    raise SystemExit(main())
