"""Perception: the objects on the table, from simulator ground truth or from a camera image.

Pure core (no ROS): ``lang2policy.ros.perception_node`` wraps it as a node. The camera path
segments the image by colour (``palette``, ``segmentation``), ignores the robot's own pixels
(``robot_mask``), fits each blob's block or bowl shape on the table plane (``detector``,
``silhouette``) through a calibrated pinhole camera (``camera``, ``camera_pose``), and bridges
short dropouts (``tracker``). The ground-truth path only validates (``records``).
"""

from lang2policy.perception.camera import (
    CameraPose,
    Intrinsics,
    PinholeCamera,
    intrinsics_from_camera_info,
)
from lang2policy.perception.camera_pose import load_camera_pose, save_camera_pose, sim_camera_pose
from lang2policy.perception.detector import Detector, DetectorSettings, ObjectGeometry
from lang2policy.perception.image import ENCODINGS, check_rgb, decode_image
from lang2policy.perception.palette import (
    ColorClass,
    Palette,
    Tolerances,
    load_palette,
    palette_from_colors,
)
from lang2policy.perception.pipeline import CameraPerception
from lang2policy.perception.records import KINDS, PerceivedObject, validate_objects, yaw_quat
from lang2policy.perception.robot_mask import RobotMask
from lang2policy.perception.scene import geometry_for_robot, scene_palette, sim_intrinsics
from lang2policy.perception.tracker import ObjectTracker, Update

__all__ = [
    "ENCODINGS",
    "KINDS",
    "CameraPerception",
    "CameraPose",
    "ColorClass",
    "Detector",
    "DetectorSettings",
    "Intrinsics",
    "ObjectGeometry",
    "ObjectTracker",
    "Palette",
    "PerceivedObject",
    "PinholeCamera",
    "RobotMask",
    "Tolerances",
    "Update",
    "check_rgb",
    "decode_image",
    "geometry_for_robot",
    "intrinsics_from_camera_info",
    "load_camera_pose",
    "load_palette",
    "palette_from_colors",
    "save_camera_pose",
    "scene_palette",
    "sim_camera_pose",
    "sim_intrinsics",
    "validate_objects",
    "yaw_quat",
]
