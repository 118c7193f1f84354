"""A joint trajectory as the safety layer sees it: joint names and timed position points.

Positions are in the order of ``names`` (arm joints in rad, ``gripper`` as a 0..1 opening);
times are seconds from the trajectory's start (its arrival at the robot). A trajectory with no
points means "stop and hold where you are", as for ros2_control's joint_trajectory_controller.
The type holds whatever it was given: ``MotionFilter`` validates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Point = tuple[float, tuple[float, ...]]


@dataclass(frozen=True)
class Trajectory:
    names: tuple[str, ...]
    points: tuple[Point, ...] = ()

    @classmethod
    def of(cls, names: Sequence[str], points: Sequence[tuple[float, Sequence[float]]]):
        """From names and (time_from_start, positions) pairs (the wire layout)."""
        return cls(tuple(names), tuple((t, tuple(values)) for t, values in points))

    @classmethod
    def from_named(cls, names: Sequence[str], points: Sequence[tuple[float, Mapping]]):
        """From (time_from_start, {joint: position}) points, positions in ``names`` order."""
        return cls.of(names, [(t, [named[n] for n in names]) for t, named in points])

    @classmethod
    def hold(cls, names: Sequence[str]) -> Trajectory:
        """The "stop and hold at the measured position" command: names, no points."""
        return cls(tuple(names))

    @property
    def is_hold(self) -> bool:
        return not self.points

    @property
    def duration(self) -> float:
        """Time of the last point (0 for a hold)."""
        return float(self.points[-1][0]) if self.points else 0.0
