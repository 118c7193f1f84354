"""Robots behind one interface: the MuJoCo simulation, a mock, the SO-101 driver and a streamed
arm; each is built directly by the code that runs it (``SimRobot(world)``, ``SO101Robot(...)``)."""

from lang2policy.robots.robot import Observation, Robot
from lang2policy.robots.safety import JointLimits, clamp_action

__all__ = [
    "JointLimits",
    "Observation",
    "Robot",
    "clamp_action",
]
