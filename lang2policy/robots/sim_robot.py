"""The MuJoCo simulation backend: a Robot whose joints are a World's arm.

In lock-step use (benchmarks, tests) ``sleep`` advances simulated time; a ROS node instead
steps the world from its own timer and only reads and writes through this class.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lang2policy.robots.robot import Observation, Robot
from lang2policy.robots.safety import JointLimits
from lang2policy.scene.arm import ArmLayout
from lang2policy.scene.world import World

# How far (rad) a command may lead the measured joint position.
MAX_TRACKING_DEVIATION = 0.3


def limits_for(arm: ArmLayout, max_joint_speed: float, control_period: float) -> JointLimits:
    """Action limits from the model: joint ranges, gripper 0..1, step = speed x period."""
    step = max_joint_speed * control_period
    return JointLimits(
        names=arm.action_names,
        lower=np.append(arm.lower, 0.0),
        upper=np.append(arm.upper, 1.0),
        max_step=np.append(np.full(arm.dof, step), 1.0),
        max_deviation=np.append(np.full(arm.dof, MAX_TRACKING_DEVIATION), 1.0),
    )


class SimRobot(Robot):
    name = "sim"

    def __init__(self, world: World, control_period: float = 0.02) -> None:
        self.world = world
        self.control_period = control_period
        # Called after every sleep(), e.g. to capture video frames in simulated time.
        self.observers: list[Callable[[], None]] = []
        super().__init__(limits_for(world.arm, world.description.max_joint_speed, control_period))

    def _connect(self) -> None:
        pass

    def _disconnect(self) -> None:
        self.world.set_arm_targets(self.world.arm_qpos(), self.world.gripper_opening())

    def _read(self) -> Observation:
        w = self.world
        position = np.append(w.arm_qpos(), w.gripper_opening())
        velocity = np.append(w.arm_qvel(), 0.0)
        return Observation(self.limits.names, position, velocity, w.time)

    def _write(self, action: np.ndarray) -> None:
        self.world.set_arm_targets(action[:-1], float(action[-1]))

    def sleep(self, seconds: float) -> None:
        self.world.step_seconds(seconds)
        for observer in self.observers:
            observer()
