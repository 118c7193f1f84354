"""Event counters that the bus and the emulator keep, for tests and logs."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Counters:
    """A dataclass of integer counters (the subclass declares them), readable as a dict."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
