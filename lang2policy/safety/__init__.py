"""The safety layer's pure core: motion filter, watchdog, stop latch and their state machine.

No ROS here: ``lang2policy.ros.safety_node`` is the thin shell that feeds these with messages.
"""

from lang2policy.safety.config import (
    BoxConfig,
    RobotSafetyConfig,
    default_config_path,
    load_safety_config,
)
from lang2policy.safety.motion_filter import (
    CHECK_STEP,
    FilterResult,
    MotionFilter,
    ToolPoint,
    Violation,
)
from lang2policy.safety.robot_model import (
    SafetyModel,
    motion_filter_for,
    safety_model_for,
    tool_point_function,
)
from lang2policy.safety.stop_latch import StopLatch
from lang2policy.safety.supervisor import HOLDING, OK, STOPPED, Decision, SafetySupervisor
from lang2policy.safety.trajectory import Trajectory
from lang2policy.safety.watchdog import Verdict, Watchdog
from lang2policy.safety.zones import Zones

__all__ = [
    "CHECK_STEP",
    "HOLDING",
    "OK",
    "STOPPED",
    "BoxConfig",
    "Decision",
    "FilterResult",
    "MotionFilter",
    "RobotSafetyConfig",
    "SafetyModel",
    "SafetySupervisor",
    "StopLatch",
    "ToolPoint",
    "Trajectory",
    "Verdict",
    "Violation",
    "Watchdog",
    "Zones",
    "default_config_path",
    "load_safety_config",
    "motion_filter_for",
    "safety_model_for",
    "tool_point_function",
]
