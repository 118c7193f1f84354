"""The object set perception publishes: the latest detections, bridged over what the camera
cannot see.

A camera misses objects now and then: the arm passes in front of them, a highlight flashes,
a block put in a bowl hides part of it. An object that is not detected is kept at its last
seen pose while it is ``hidden`` (the caller says so: on a camera, when the robot covers
enough of where it was); otherwise it is dropped once it has been missed in more than
``max_missed`` consecutive frames (0: at the first miss), that is, once the view has shown
the table where it was. A name seen for the first time joins the set only after ``confirm``
consecutive frames (1: at once): a glint of the arm's paint that looks like a block for a
frame or two never becomes an object. The first frame after a start or ``clear`` is taken as
it is (the scene as first seen).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lang2policy.errors import ConfigError
from lang2policy.perception.records import PerceivedObject

Hidden = Callable[[PerceivedObject], bool]


@dataclass(frozen=True)
class Update:
    """What one frame changed: names that appeared and names that were dropped."""

    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.dropped)


def _count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


@dataclass
class ObjectTracker:
    """The current object set; see the module docstring."""

    max_missed: int = 0
    confirm: int = 1
    _objects: dict[str, PerceivedObject] = field(default_factory=dict, init=False, repr=False)
    _missed: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _pending: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _started: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        _count("max_missed", self.max_missed, 0)
        _count("confirm", self.confirm, 1)

    def update(self, detections: Iterable[PerceivedObject], hidden: Hidden | None = None) -> Update:
        """Take one frame's detections; ``hidden(obj)``: whether the camera could not see
        ``obj`` where it was (kept then, however long). Returns which names appeared and which
        were dropped."""
        seen = {obj.name: obj for obj in detections}
        dropped = self._miss(set(self._objects) - set(seen), hidden)
        added = []
        for name, obj in sorted(seen.items()):
            known = name in self._objects
            if known or self._confirmed(name):
                if not known:
                    added.append(name)
                self._objects[name], self._missed[name] = obj, 0
        for name in set(self._pending) - set(seen):
            del self._pending[name]  # a new name must be seen in consecutive frames
        self._started = True
        return Update(tuple(added), tuple(dropped))

    def _miss(self, names: set[str], hidden: Hidden | None) -> list[str]:
        dropped = []
        for name in sorted(names):
            if hidden is not None and hidden(self._objects[name]):
                continue  # out of view behind the arm: not a miss
            self._missed[name] += 1
            if self._missed[name] > self.max_missed:
                del self._objects[name], self._missed[name]
                dropped.append(name)
        return dropped

    def _confirmed(self, name: str) -> bool:
        if not self._started:
            return True
        self._pending[name] = self._pending.get(name, 0) + 1
        if self._pending[name] < self.confirm:
            return False
        del self._pending[name]
        return True

    @property
    def objects(self) -> list[PerceivedObject]:
        """The current set, sorted by name."""
        return [self._objects[name] for name in sorted(self._objects)]

    def place(self, obj: PerceivedObject) -> None:
        """Move the kept ``obj.name`` to ``obj``'s pose (known from elsewhere: the block in
        the jaws moves with them); nothing for a name not in the set."""
        if obj.name in self._objects:
            self._objects[obj.name], self._missed[obj.name] = obj, 0

    def missed(self, name: str) -> int:
        """Consecutive frames ``name`` has not been seen in (0 if seen in the last one)."""
        return self._missed.get(name, 0)

    def clear(self) -> None:
        self._objects.clear()
        self._missed.clear()
        self._pending.clear()
        self._started = False
