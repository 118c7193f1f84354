"""Build a robot's MotionFilter from its model: joint ranges and the tool point's kinematics.

The model is the tabletop scene with the robot mounted where the simulation mounts it, but no
objects, so tool points are in the same world frame as the zones in config/safety.yaml.
Forward kinematics goes through ``Kinematics.forward`` (one ``mj_kinematics``, about 5 µs on
either arm), cheap enough to check every ``CHECK_STEP`` of every command's path: a streamed
0.5 s MPC chunk costs well under a millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lang2policy.control.gripper_hull import GripperHull
from lang2policy.control.kinematics import Kinematics
from lang2policy.control.trajectory_follower import robot_braking
from lang2policy.robots.sim_robot import limits_for
from lang2policy.safety.config import BoxConfig, RobotSafetyConfig, shifted
from lang2policy.safety.guard import ZoneGuard
from lang2policy.safety.motion_filter import MotionFilter, ToolPoint
from lang2policy.safety.shaper import ShaperLimits
from lang2policy.scene.arm import GRIPPER, arm_layout
from lang2policy.scene.builder import build_scene, compile_scene
from lang2policy.scene.robot_description import load_robot_description


def tool_point_function(kinematics: Kinematics) -> ToolPoint:
    """Tool centre point (between the jaws, where a grasped object sits) of arm joints ``q``:
    the point ``MotionPrimitives.tool_point`` and the reward terms call the tool.

    Reads the site straight from ``kinematics.scratch`` after ``Kinematics.forward`` (which
    runs ``mj_kinematics``), skipping the rotation-matrix round trip through a Pose.
    """
    data, site = kinematics.scratch, kinematics.arm.ee_site_id
    offset = np.asarray(kinematics.center_offset, float)

    def tool_point(q: np.ndarray) -> np.ndarray:
        kinematics.forward(q)
        return data.site_xpos[site] + data.site_xmat[site].reshape(3, 3) @ offset

    return tool_point


@dataclass(frozen=True)
class SafetyModel:
    """What the safety supervisor enforces for one robot: the motion filter (validity, joint
    limits, the tool point's straight path, speed), the shaper's limits and the zone guard."""

    filter: MotionFilter
    shaper: ShaperLimits
    guard: ZoneGuard


def safety_model_for(robot: str, config: RobotSafetyConfig) -> SafetyModel:
    """The filter, shaper limits and zone guard of ``robot`` with ``config``'s limits."""
    description = load_robot_description(robot)
    model = compile_scene(build_scene(description, []))
    arm = arm_layout(model, description)
    limits = limits_for(arm, config.max_joint_speed, control_period=1.0)
    kinematics = Kinematics(model, description, arm)
    tool_point = tool_point_function(kinematics)
    motion_filter = MotionFilter(
        limits, config, tool_point, robot_braking(description, limits.names)
    )
    is_arm = np.array([n != GRIPPER for n in limits.names])
    shaper = ShaperLimits(
        max_speed=np.where(is_arm, config.max_joint_speed / (1.0 + config.servo_overshoot), np.inf),
        max_acceleration=np.where(is_arm, config.max_joint_acceleration, np.inf),
        max_deceleration=np.where(
            is_arm, config.max_joint_deceleration or config.max_joint_acceleration, np.inf
        ),
        lower=motion_filter.lower,
        upper=motion_filter.upper,
        period=config.sample_period,
    )
    hull = GripperHull(Kinematics(model, description, arm))
    margin = config.workspace_margin
    guard = ZoneGuard(
        BoxConfig(shifted(config.workspace.min, margin), shifted(config.workspace.max, -margin)),
        config.keep_out,
        tool_points=lambda rows: np.array([tool_point(q) for q in rows]).reshape(-1, 3),
        geometry=lambda rows, openings: hull.points_at(rows, hull.corners(openings)),
        arm_columns=np.flatnonzero(is_arm),
        gripper_column=limits.names.index(GRIPPER) if GRIPPER in limits.names else None,
        zone_margin=config.zone_margin,
    )
    return SafetyModel(motion_filter, shaper, guard)


def motion_filter_for(robot: str, config: RobotSafetyConfig) -> MotionFilter:
    """The MotionFilter of ``robot`` (config/robots/<robot>.yaml) with ``config``'s limits and
    the robot's braking on a hold (its description's acceleration limit and hold tolerance)."""
    description = load_robot_description(robot)
    model = compile_scene(build_scene(description, []))
    arm = arm_layout(model, description)
    # Only names and ranges are used; the per-period step of limits_for is the robot's business.
    limits = limits_for(arm, config.max_joint_speed, control_period=1.0)
    tool_point = tool_point_function(Kinematics(model, description, arm))
    return MotionFilter(limits, config, tool_point, robot_braking(description, limits.names))
