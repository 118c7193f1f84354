"""Teleoperation for demonstrations (issue 18, item 6): a leader SO-101 read over a read-only
Feetech bus, or the keyboard in simulation, as follower joint targets; the stream's hold logic
and episode marks. Pure: no ROS import (the node is ``lang2policy.ros.teleop_node``).
"""

from lang2policy.teleop.keyboard import HELP, KeyboardTeleop, KeyDecoder, KeyResult
from lang2policy.teleop.leader import LeaderArm, LeaderFault, LeaderReading, leader_target
from lang2policy.teleop.read_only_bus import (
    ReadOnlyBus,
    ReadOnlySerial,
    WriteRefused,
    check_read_only,
    read_only_bus,
)
from lang2policy.teleop.stream import (
    Episode,
    Source,
    StreamStep,
    TargetStream,
    check_task,
    parse_source,
)
from lang2policy.teleop.tool_steps import IkToolStepper, ToolStep

__all__ = [
    "HELP",
    "Episode",
    "IkToolStepper",
    "KeyDecoder",
    "KeyResult",
    "KeyboardTeleop",
    "LeaderArm",
    "LeaderFault",
    "LeaderReading",
    "ReadOnlyBus",
    "ReadOnlySerial",
    "Source",
    "StreamStep",
    "TargetStream",
    "ToolStep",
    "WriteRefused",
    "check_read_only",
    "check_task",
    "leader_target",
    "parse_source",
    "read_only_bus",
]
