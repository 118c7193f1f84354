"""A node graph as seen from outside: each topic's types, publishers and subscribers (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TopicInfo:
    """One topic as the back-end's own nodes use it (probe endpoints left out)."""

    types: tuple[str, ...]
    publishers: tuple[str, ...] = ()  # node names
    subscribers: tuple[str, ...] = ()

    def role(self) -> str:
        """ "publishes", "subscribes", "both" or "none" (from the back-end's side)."""
        pub, sub = bool(self.publishers), bool(self.subscribers)
        return {(True, False): "publishes", (False, True): "subscribes", (True, True): "both"}.get(
            (pub, sub), "none"
        )


GraphSnapshot = Mapping[str, TopicInfo]
