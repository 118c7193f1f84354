"""Recording sessions and episodes: which file each received message goes to.

``Recorder`` is fed serialized messages and decoded status lines with explicit times and opens
and closes ``McapBag`` files: mode ``session`` writes one file from start to ``close()``; mode
``episode`` writes one file per instruction, as ``EpisodeTracker`` decides. Between episodes
the last ``preroll`` seconds of messages are kept, so an episode's file starts with what led to
it (the instruction itself arrives just before the planner's ``received``); older ones are
dropped, except the latest message of each ``keep_latest`` topic (the instruction: on a loaded
machine the planner's ``received`` may come more than ``preroll`` seconds after it). Files are
named ``<start time>_<slug of the instruction>.mcap``; each carries metadata ``lang2policy``
(mode, label, start) and, for episodes, ``episode_end`` (why it ended).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.recording.bag import McapBag
from lang2policy.recording.definitions import message_definition
from lang2policy.recording.episodes import EpisodeTracker, Start, Stop
from lang2policy.recording.naming import recording_path

MODES = ("episode", "session")
Message = tuple[str, str, bytes, int]  # (topic, type name, CDR bytes, log time in ns)
_log = logging.getLogger(__name__)


class Recorder:
    """Routes messages into MCAP files under ``output_dir`` (see the module docstring)."""

    def __init__(
        self,
        output_dir: Path,
        mode: str = "episode",
        linger: float = 3.0,
        preroll: float = 1.0,
        now: Callable[[], datetime] = datetime.now,
        definition: Callable[[str], str] = message_definition,
        on_file: Callable[[str, Path], None] | None = None,
        keep_latest: Collection[str] = (),
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"recording mode must be one of {list(MODES)}, got {mode!r}")
        if not preroll >= 0:
            raise ConfigError(f"preroll must be >= 0 seconds, got {preroll!r}")
        self.output_dir = Path(output_dir)
        self.mode = mode
        self.tracker = EpisodeTracker(linger=linger)
        self.files: list[Path] = []  # finished files, oldest first
        self._preroll_ns = round(preroll * 1e9)
        self._waiting: deque[Message] = deque()  # between episodes
        self._keep_latest = frozenset(keep_latest)
        self._kept: dict[str, Message] = {}  # the latest of each keep_latest topic, any age
        self._now, self._definition = now, definition
        self._on_file = on_file or (lambda event, path: _log.info("%s %s", event, path))
        self._bag: McapBag | None = None
        self._check_output_dir()
        if mode == "session":
            self._open("session")

    @property
    def current(self) -> Path | None:
        """The file being written (its final name), if any."""
        return self._bag.path if self._bag is not None else None

    def pending_topics(self) -> list[str]:
        """Topics of the messages kept for the next episode's file (oldest first)."""
        pending = sorted([*list(self._waiting), *list(self._kept.values())], key=lambda m: m[3])
        return [topic for topic, *_ in pending]

    def message(self, topic: str, type_name: str, data: bytes, log_time_ns: int) -> bool:
        """Write a message to the open file; False between episodes (kept for the pre-roll)."""
        if self._bag is None:
            if topic in self._keep_latest:
                self._kept[topic] = (topic, type_name, data, log_time_ns)
            else:
                self._waiting.append((topic, type_name, data, log_time_ns))
            self._forget_before(log_time_ns - self._preroll_ns)
            return False
        if self._waiting or self._kept:  # a new episode: first what led to it
            self._forget_before(log_time_ns - self._preroll_ns)
            self._write_waiting()
        self._bag.write(topic, type_name, data, log_time_ns)
        return True

    def status(self, payload: dict, now: float) -> None:
        """A decoded ``/lang2policy/status`` line (call before ``message`` for the same line,
        so the line that starts an episode is in its file)."""
        if self.mode == "episode":
            self._apply(self.tracker.on_status(payload, now))

    def poll(self, now: float) -> None:
        """Close an episode whose linger time is over (call regularly)."""
        if self.mode == "episode":
            self._apply(self.tracker.poll(now))

    def close(self) -> None:
        """Finish the open file, if any."""
        self._apply(self.tracker.finish())
        self._close(None)

    def _apply(self, events: list[Start | Stop]) -> None:
        for event in events:
            if isinstance(event, Start):
                self._close("next instruction")
                self._open(event.label)
            else:
                self._close(event.reason)

    def _open(self, label: str) -> None:
        started = self._now()
        path = recording_path(self.output_dir, started, label)
        metadata = {"mode": self.mode, "label": label, "started": started.isoformat()}
        self._bag = McapBag(path, metadata, definition=self._definition)
        self._on_file("recording", path)

    def _forget_before(self, log_time_ns: int) -> None:
        while self._waiting and self._waiting[0][3] < log_time_ns:
            self._waiting.popleft()

    def _write_waiting(self) -> None:
        waiting = sorted([*self._waiting, *self._kept.values()], key=lambda m: m[3])
        self._waiting.clear()
        self._kept.clear()
        for message in waiting:
            self._bag.write(*message)

    def _close(self, reason: str | None) -> None:
        if self._bag is None:
            return
        self._write_waiting()  # an episode that got no message of its own
        bag, self._bag = self._bag, None
        if reason is not None:
            bag.add_metadata("episode_end", {"reason": reason, "ended": self._now().isoformat()})
        self.files.append(bag.close())
        self._on_file(f"wrote {sum(bag.counts.values())} messages to", bag.path)

    def _check_output_dir(self) -> None:
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the recording directory {self.output_dir}: {exc}"
            ) from exc
        if not self.output_dir.is_dir():
            raise ConfigError(f"recording directory {self.output_dir} is not a directory")
