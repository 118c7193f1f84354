"""One MCAP file of ROS 2 messages, laid out as ``ros2 bag record -s mcap`` lays it out.

Profile ``ros2``; one schema per message type (encoding ``ros2msg``, the complete definition
from ``lang2policy.recording.definitions``); one channel per topic (message encoding ``cdr``);
messages are the serialized CDR bytes exactly as received. Chunks are zstd-compressed, with
CRCs and a summary section, so ``mcap info``, Foxglove, mcap-ros2-support and rosbags read it.

The file is written as ``<name>.mcap.part`` and renamed to ``<name>.mcap`` when closed, so a
``.mcap`` file is always complete.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from mcap.well_known import MessageEncoding, Profile, SchemaEncoding
from mcap.writer import CompressionType, Writer

from lang2policy.recording.definitions import message_definition
from lang2policy.recording.naming import PARTIAL_SUFFIX

LIBRARY = "lang2policy recorder"


class McapBag:
    """Writes serialized ROS 2 messages to ``path`` (``close()`` to finish the file)."""

    def __init__(
        self,
        path: Path,
        metadata: dict[str, str] | None = None,
        definition: Callable[[str], str] = message_definition,
    ) -> None:
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name.removesuffix(".mcap") + PARTIAL_SUFFIX)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._definition = definition
        self._file = open(self.partial, "wb")  # noqa: SIM115 - closed in close()
        self._writer = Writer(self._file, compression=CompressionType.ZSTD)
        self._writer.start(profile=Profile.ROS2, library=LIBRARY)
        if metadata:
            self.add_metadata("lang2policy", metadata)
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, tuple[int, str]] = {}
        self.counts: Counter[str] = Counter()
        self.closed = False

    def write(self, topic: str, type_name: str, data: bytes, log_time_ns: int) -> None:
        """Append one serialized message of ``type_name`` received on ``topic``."""
        channel = self._channel(topic, type_name)
        self._writer.add_message(
            channel_id=channel,
            log_time=log_time_ns,
            publish_time=log_time_ns,
            sequence=self.counts[topic],
            data=bytes(data),
        )
        self.counts[topic] += 1

    def _channel(self, topic: str, type_name: str) -> int:
        if topic in self._channels:
            channel, known = self._channels[topic]
            if known != type_name:
                raise ValueError(f"topic {topic} is recorded as {known}, not {type_name}")
            return channel
        if type_name not in self._schemas:
            definition = self._definition(type_name).encode()
            self._schemas[type_name] = self._writer.register_schema(
                name=type_name, encoding=SchemaEncoding.ROS2, data=definition
            )
        channel = self._writer.register_channel(
            topic=topic,
            message_encoding=MessageEncoding.CDR,
            schema_id=self._schemas[type_name],
            metadata={"offered_qos_profiles": ""},
        )
        self._channels[topic] = (channel, type_name)
        return channel

    def add_metadata(self, name: str, values: dict[str, str]) -> None:
        """A metadata record (``mcap info`` lists them), e.g. why an episode ended."""
        self._writer.add_metadata(name, {k: str(v) for k, v in values.items()})

    def close(self) -> Path:
        """Finish the file (summary, index) and give it its final name; returns that path."""
        if not self.closed:
            self.closed = True
            self._writer.finish()
            self._file.close()
            self.partial.replace(self.path)
        return self.path
