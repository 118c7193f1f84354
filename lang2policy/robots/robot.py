"""The robot interface every backend implements (simulation, mock, hardware drivers).

Features are readable before ``connect()``; ``send_action`` returns the action actually sent,
after the shared safety clamp, so a caller sees any clipping.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import NotConnectedError
from lang2policy.robots.safety import JointLimits, clamp_action


@dataclass(frozen=True)
class Observation:
    """What a robot reports: action-space positions (arm rad + gripper 0..1) and velocities."""

    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    time: float

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, (float(v) for v in self.position), strict=True))


class Robot(abc.ABC):
    """A position-controlled arm with a normalised gripper (0 closed, 1 open)."""

    name: str = "robot"

    def __init__(self, limits: JointLimits) -> None:
        self.limits = limits
        self._connected = False
        self.last_clipped: tuple[str, ...] = ()
        self._last_command: np.ndarray | None = None

    @property
    def action_features(self) -> dict[str, tuple[float, float]]:
        """Action names with their (lower, upper) limits; available before connecting."""
        return {
            n: (float(lo), float(hi))
            for n, lo, hi in zip(
                self.limits.names, self.limits.lower, self.limits.upper, strict=True
            )
        }

    @property
    def observation_features(self) -> dict[str, str]:
        return {n: "position, velocity" for n in self.limits.names}

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        self._connect()
        self._connected = True

    def disconnect(self) -> None:
        if self._connected:
            self._disconnect()
        self._connected = False
        self._last_command = None

    @property
    def last_command(self) -> np.ndarray | None:
        """The last action sent (after clamping), None before the first or after a forget."""
        return None if self._last_command is None else self._last_command.copy()

    def forget_last_command(self) -> None:
        """Rate-limit the next command from the measured position (after a reset or a stop)."""
        self._last_command = None

    def get_observation(self) -> Observation:
        self._require_connected()
        return self._read()

    def send_action(self, action: Mapping[str, float] | np.ndarray) -> dict[str, float]:
        """Clamp and send a position action; returns what was actually sent."""
        self._require_connected()
        current = self._read().position
        result = clamp_action(action, current, self.limits, self._last_command)
        self.last_clipped = result.clipped
        self._write(result.action)
        self._last_command = result.action
        return dict(zip(self.limits.names, (float(v) for v in result.action), strict=True))

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass for the robot (wall time here; simulated time in simulation)."""
        time.sleep(seconds)

    def _require_connected(self) -> None:
        if not self._connected:
            raise NotConnectedError(f"{self.name}: call connect() first")

    @abc.abstractmethod
    def _connect(self) -> None: ...

    @abc.abstractmethod
    def _disconnect(self) -> None: ...

    @abc.abstractmethod
    def _read(self) -> Observation: ...

    @abc.abstractmethod
    def _write(self, action: np.ndarray) -> None: ...
