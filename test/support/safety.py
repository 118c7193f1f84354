"""A two-joint "planar" arm whose tool point is (a, b, 0.1), for the safety tests: every
expected number of the motion filter can be worked out by hand."""

from __future__ import annotations

import dataclasses

import numpy as np

from lang2policy.robots.safety import JointLimits
from lang2policy.safety import BoxConfig, MotionFilter, RobotSafetyConfig

NAMES = ("a", "b", "gripper")


MEASURED = {"a": 0.0, "b": 0.0, "gripper": 1.0}


def planar_config(**changes) -> RobotSafetyConfig:
    config = RobotSafetyConfig(
        max_joint_speed=1.0,
        workspace=BoxConfig((-1.0, -1.0, 0.0), (1.0, 1.0, 1.0)),
        state_timeout=0.2,
        command_timeout=0.25,
        joint_limit_margin=0.1,
        lead_allowance=0.0,
        keep_out={"post": BoxConfig((0.4, -0.1, 0.0), (0.6, 0.1, 0.5))},
    )
    return dataclasses.replace(config, **changes)


def planar_filter(**changes) -> MotionFilter:
    limits = JointLimits(
        names=NAMES,
        lower=np.array([-2.0, -2.0, 0.0]),
        upper=np.array([2.0, 2.0, 1.0]),
        max_step=np.ones(3),
        max_deviation=np.ones(3),
    )
    return MotionFilter(limits, planar_config(**changes), lambda q: np.array([q[0], q[1], 0.1]))
