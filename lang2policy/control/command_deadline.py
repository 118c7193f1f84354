"""A robot node's guard against stale motion: no command older than a deadline, no run-on.

The safety node stamps each trajectory it forwards with robot time and, while one runs,
re-sends its remainder every ``heartbeat_period`` (0.1 s). A robot node (the sim node, the
SO-101 driver) passes every trajectory it receives through ``CommandDeadline``:

* a trajectory whose stamp is older than ``deadline`` (0.3 s) when it arrives is *stale*: it is
  not executed, the arm brakes to rest instead (a command that waited in a queue, a loaded
  machine or a network for that long no longer describes what should happen now);
* a stamped trajectory starts at its stamp (joint_trajectory_controller's reading of the
  header), so one delivered late runs at its planned pace from its planned state;
* while a trajectory moves the arm, a silence longer than ``stream_timeout`` (0.25 s) means the
  commander (the safety node) is gone: the arm brakes to rest and holds.

Unstamped trajectories (a stamp of zero: a plain client, a test) start on arrival, are never
stale and run to their end, as joint_trajectory_controller treats them: only a stamped stream
promises heartbeats, so only its silence means its commander is gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lang2policy.errors import ConfigError

DEFAULT_DEADLINE = 0.3  # s from the safety node's stamp to the robot's arrival, at most
DEFAULT_STREAM_TIMEOUT = 0.25  # s of silence while a trajectory runs before the arm brakes


@dataclass(frozen=True)
class Arrival:
    """What to do with a trajectory that arrived: start it at ``start_time`` (the follower's
    clock; None: on arrival), or brake because it is stale (``stale`` says why)."""

    start_time: float | None = None
    stale: str = ""


class CommandDeadline:
    """Deadline and stream-timeout rules of one robot node, on the node's clock."""

    def __init__(
        self, deadline: float = DEFAULT_DEADLINE, stream_timeout: float = DEFAULT_STREAM_TIMEOUT
    ) -> None:
        for name, value in (("command_deadline", deadline), ("stream_timeout", stream_timeout)):
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        self.deadline = deadline
        self.stream_timeout = stream_timeout
        self.stale = 0  # trajectories refused as stale
        self.lost = 0  # times the stream stopped while the arm moved
        self._last_arrival: float | None = None

    def arrive(self, now: float, stamp: float, stamp_now: float | None = None) -> Arrival:
        """A trajectory stamped ``stamp`` arrived at ``now`` (the follower's clock).
        ``stamp_now``: the current time on the stamp's clock, if that is not the follower's
        (a driver that follows on a steady clock but stamps with ROS time)."""
        if stamp <= 0.0:
            self._last_arrival = None
            return Arrival()
        self._last_arrival = now
        age = (now if stamp_now is None else stamp_now) - stamp
        if age > self.deadline:
            self.stale += 1
            return Arrival(
                stale=f"a trajectory stamped {age:.3f} s ago arrived (command_deadline "
                f"{self.deadline:g} s): not executed, the arm brakes to rest"
            )
        return Arrival(start_time=now - max(age, 0.0))

    def lost_stream(self, now: float, moving: bool) -> str:
        """Why the arm must brake now (the stream stopped while it moves), else ""."""
        if not moving or self._last_arrival is None:
            return ""
        silent = now - self._last_arrival
        if silent <= self.stream_timeout:
            return ""
        self.lost += 1
        self._last_arrival = None  # once per silence
        return (
            f"no trajectory for {silent:.3f} s while the arm moves (stream_timeout "
            f"{self.stream_timeout:g} s): the commander is gone, the arm brakes to rest"
        )
