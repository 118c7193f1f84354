"""Robots behind one interface: the MuJoCo simulation, a mock, and (later) hardware drivers."""

from lang2policy.robots.registry import available_backends, make_robot
from lang2policy.robots.robot import Observation, Robot
from lang2policy.robots.safety import JointLimits, clamp_action

__all__ = [
    "JointLimits",
    "Observation",
    "Robot",
    "available_backends",
    "clamp_action",
    "make_robot",
]
