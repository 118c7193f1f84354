"""Robot backends picked by name: ``make_robot("sim", robot="so101")``."""

from __future__ import annotations

from lang2policy.errors import ConfigError
from lang2policy.robots.robot import Robot

_BACKENDS = ("sim", "mock")


def available_backends() -> list[str]:
    return list(_BACKENDS)


def make_robot(backend: str, robot: str = "so101", layout: str = "cap_tabletop") -> Robot:
    """Build a robot backend; heavy imports happen only for the backend chosen."""
    if backend == "sim":
        from lang2policy.robots.sim_robot import SimRobot
        from lang2policy.scene.world import World

        return SimRobot(World(robot, layout))
    if backend == "mock":
        from lang2policy.robots.mock_robot import MockRobot
        from lang2policy.scene.robot_description import load_robot_description

        return MockRobot(load_robot_description(robot))
    raise ConfigError(f"unknown robot backend '{backend}'; available: {list(_BACKENDS)}")
