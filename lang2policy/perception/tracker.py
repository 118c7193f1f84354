"""The object set perception publishes: the latest detections, bridged over short dropouts.

A camera misses objects now and then (the arm passes in front of them, a highlight flashes).
An object keeps its last seen pose until it has been missed in more than ``max_missed``
consecutive frames, then it is dropped; 0 drops it at the first miss.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lang2policy.errors import ConfigError
from lang2policy.perception.records import PerceivedObject


@dataclass(frozen=True)
class Update:
    """What one frame changed: names that appeared and names that were dropped."""

    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.dropped)


@dataclass
class ObjectTracker:
    """The current object set; see the module docstring."""

    max_missed: int = 0
    _objects: dict[str, PerceivedObject] = field(default_factory=dict, init=False, repr=False)
    _missed: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_missed, bool) or not isinstance(self.max_missed, int):
            raise ConfigError(f"max_missed must be an integer >= 0, got {self.max_missed!r}")
        if self.max_missed < 0:
            raise ConfigError(f"max_missed must be >= 0, got {self.max_missed}")

    def update(self, detections: Iterable[PerceivedObject]) -> Update:
        """Take one frame's detections; returns which names appeared and which were dropped."""
        seen = {obj.name: obj for obj in detections}
        added = tuple(sorted(set(seen) - set(self._objects)))
        dropped = []
        for name in sorted(set(self._objects) - set(seen)):
            self._missed[name] += 1
            if self._missed[name] > self.max_missed:
                del self._objects[name], self._missed[name]
                dropped.append(name)
        for name, obj in seen.items():
            self._objects[name], self._missed[name] = obj, 0
        return Update(added, tuple(dropped))

    @property
    def objects(self) -> list[PerceivedObject]:
        """The current set, sorted by name."""
        return [self._objects[name] for name in sorted(self._objects)]

    def missed(self, name: str) -> int:
        """Consecutive frames ``name`` has not been seen in (0 if seen in the last one)."""
        return self._missed.get(name, 0)

    def clear(self) -> None:
        self._objects.clear()
        self._missed.clear()
