"""What moves an emulated servo chain's joints: the ``ServoPlant`` protocol, and
``KinematicPlant``, joints that go straight to their goal at a bounded speed.

A MuJoCo-backed plant (``lang2policy.robots.so101.mujoco_plant``) implements the same protocol.
"""

from __future__ import annotations

import math
from typing import Protocol


class ServoPlant(Protocol):
    """What moves the joints. Joints are indexed 0..n-1 in chain order (ids can be rewritten)."""

    def add_joint(self, joint: int, position: float) -> None: ...

    def set_goal(self, joint: int, ticks: float, speed: float) -> None:
        """Drive towards ``ticks`` at ``speed`` ticks/s (0: as fast as the joint can)."""

    def set_torque(self, joint: int, on: bool) -> None: ...

    def advance(self, now: float) -> None:
        """Bring the simulation up to time ``now`` (seconds, the emulator's clock)."""

    def position(self, joint: int) -> float: ...

    def velocity(self, joint: int) -> float: ...

    def load(self, joint: int) -> float:
        """Signed fraction of the maximum torque."""


class KinematicPlant:
    """Joints that go straight to their goal at a bounded speed: no inertia, gravity or load.

    A stand-in until the MuJoCo-backed plant exists; with torque off a joint stays where it is.
    """

    def __init__(self, max_speed: float = 3000.0) -> None:
        self.max_speed = max_speed  # ticks/s; an STS3215 at 7.4 V does about 3000
        self._pos: dict[int, float] = {}
        self._goal: dict[int, float] = {}
        self._speed: dict[int, float] = {}
        self._vel: dict[int, float] = {}
        self._torque: dict[int, bool] = {}
        self._time: float | None = None

    def add_joint(self, joint: int, position: float) -> None:
        self._pos[joint] = self._goal[joint] = float(position)
        self._speed[joint], self._vel[joint], self._torque[joint] = 0.0, 0.0, False

    def set_goal(self, joint: int, ticks: float, speed: float) -> None:
        self._goal[joint] = float(ticks)
        self._speed[joint] = float(speed)

    def set_torque(self, joint: int, on: bool) -> None:
        self._torque[joint] = on

    def advance(self, now: float) -> None:
        dt = 0.0 if self._time is None else now - self._time
        self._time = now if self._time is None else max(now, self._time)
        if dt <= 0:
            return
        for joint in self._pos:
            error = self._goal[joint] - self._pos[joint]
            speed = min(self._speed[joint] or self.max_speed, self.max_speed)
            step = min(abs(error), speed * dt) if self._torque[joint] else 0.0
            self._pos[joint] += math.copysign(step, error)
            moving = step < abs(error)  # the velocity now, not the mean over a long step
            self._vel[joint] = math.copysign(speed, error) if moving else 0.0

    def position(self, joint: int) -> float:
        return self._pos[joint]

    def velocity(self, joint: int) -> float:
        return self._vel[joint]

    def load(self, joint: int) -> float:
        return 0.0
