"""Hardware data as code: joint maps of ros2_control arms (``hardware/<arm>.yaml``).

Pure: no ROS import. The nodes that use it live in ``lang2policy.ros``.
"""

from lang2policy.hardware.joint_map import (
    GRIPPER,
    HardwareTrajectory,
    JointMap,
    MappedGripper,
    MappedJoint,
)
from lang2policy.hardware.joint_map_files import (
    available_joint_maps,
    check_against_description,
    load_joint_map,
)

__all__ = [
    "GRIPPER",
    "HardwareTrajectory",
    "JointMap",
    "MappedGripper",
    "MappedJoint",
    "available_joint_maps",
    "check_against_description",
    "load_joint_map",
]
