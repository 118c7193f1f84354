"""A mock robot that mirrors commands into states (like ros2_control's GenericSystem).

It reads joint names and limits from the same robot model as the simulation, so every script
runs against it unchanged; it has no physics and no objects.
"""

from __future__ import annotations

import time

import numpy as np

from lang2policy.robots.robot import Observation, Robot
from lang2policy.robots.sim_robot import limits_for
from lang2policy.scene.arm import arm_layout
from lang2policy.scene.builder import compile_scene, load_robot_spec
from lang2policy.scene.robot_description import RobotDescription


class MockRobot(Robot):
    name = "mock"

    def __init__(self, description: RobotDescription, control_period: float = 0.02) -> None:
        model = compile_scene(load_robot_spec(description))
        self.arm = arm_layout(model, description)
        super().__init__(limits_for(self.arm, description.max_joint_speed, control_period))
        self._position = np.append(self.arm.home, 1.0)
        self._velocity = np.zeros_like(self._position)
        self._clock = 0.0
        self._last_write = time.monotonic()

    def _connect(self) -> None:
        self._last_write = time.monotonic()

    def _disconnect(self) -> None:
        self._velocity[:] = 0.0

    def _read(self) -> Observation:
        return Observation(
            self.limits.names, self._position.copy(), self._velocity.copy(), self._clock
        )

    def _write(self, action: np.ndarray) -> None:
        now = time.monotonic()
        elapsed = max(now - self._last_write, 1e-6)
        self._velocity = (action - self._position) / elapsed
        self._position = action.copy()
        self._last_write = now

    def sleep(self, seconds: float) -> None:
        self._clock += seconds
