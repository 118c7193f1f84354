"""When a camera goes quiet: no image for ``timeout`` seconds makes camera perception blind.

Objects a blind perception publishes are its last view of the table, which may no longer be
true; the planner must not plan on them. ``ImageWatch`` follows image arrivals on a steady
clock and says, on the perception node's status line, ``blind`` with "no image from camera
'top' since 10:41:07 (3.2 s)" when the camera stops (again every ``repeat`` s while it stays
quiet, for listeners that start later), and ``seeing`` once images come back.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from lang2policy.errors import ConfigError

BLIND, SEEING = "blind", "seeing"


@dataclass
class ImageWatch:
    """Image arrivals of camera ``camera``; times in seconds of a steady clock (``now``)."""

    camera: str
    timeout: float
    started: float
    repeat: float = 10.0
    last_image: float | None = None
    last_image_wall: float | None = None  # wall-clock time of the last image, for the line
    blind: bool = False
    _said_at: float = -math.inf

    def __post_init__(self) -> None:
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ConfigError(f"image_timeout must be a finite number of seconds > 0, got "
                              f"{self.timeout!r}")  # fmt: skip

    def image(self, now: float, wall: float | None = None) -> str | None:
        """An image arrived: the ``seeing`` line to say when perception was blind, else None."""
        self.last_image = now
        self.last_image_wall = time.time() if wall is None else wall
        if not self.blind:
            return None
        self.blind = False
        return f"camera '{self.camera}' images again"

    def check(self, now: float) -> str | None:
        """The ``blind`` line to say now (the camera went quiet, or ``repeat`` s passed since
        it was said), else None."""
        since = self.started if self.last_image is None else self.last_image
        quiet = now - since
        if quiet < self.timeout:
            return None
        if self.blind and now - self._said_at < self.repeat:
            return None
        self.blind, self._said_at = True, now
        return self.describe(now)

    def describe(self, now: float) -> str:
        since = self.started if self.last_image is None else self.last_image
        quiet = now - since
        if self.last_image_wall is None:
            return f"no image from camera '{self.camera}' yet ({quiet:.1f} s since start)"
        clock = time.strftime("%H:%M:%S", time.localtime(self.last_image_wall))
        return f"no image from camera '{self.camera}' since {clock} ({quiet:.1f} s)"
