"""The lang2policy graph on a real arm: ``ros2 launch lang2policy robot.launch.py``.

The sim graph without the sim node, on wall time, perception from the cameras. The arm is
reached through its ros2_control controllers (``driver:=ros2_control``, the default): the graph
already speaks their topic names (``/joint_states``, ``/arm_controller/joint_trajectory``); give
``trajectory_topic:=/<controller>/joint_trajectory`` or ``joint_states_topic:=...`` when the
arm's differ, and every node is remapped onto them. ``driver:=so101`` (the SO-101 serial driver)
is reserved for issue 7 and refused until then. Start the arm's own bringup (controller manager,
camera drivers) first. Nodes, params files and overrides come from ``lang2policy.graph``.

Example: ``ros2 launch lang2policy robot.launch.py robot:=panda
trajectory_topic:=/joint_trajectory_controller/joint_trajectory llm:=openai``
"""

# Import order kept by hand: ruff takes `launch` for this directory, not ROS 2's package.
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lang2policy.graph import LAUNCH_ARGUMENTS, build, options_from_strings

MODE = "robot"


def _node(spec, terminal_prefix):
    """A launch_ros Node for one ``lang2policy.graph.NodeSpec``."""
    return Node(
        package="lang2policy",
        executable=spec.executable,
        name=spec.name,
        parameters=[str(spec.params_file), dict(spec.overrides)],
        remappings=list(spec.remaps),
        prefix=terminal_prefix if spec.executable == "terminal_node" else None,
        output="screen",
        emulate_tty=True,
    )


def _nodes(context):
    """The graph for the arguments given (validated by lang2policy.graph)."""
    values = {
        name: LaunchConfiguration(name).perform(context)
        for name, _, _ in LAUNCH_ARGUMENTS[MODE]
        if name != "terminal_prefix"
    }
    prefix = LaunchConfiguration("terminal_prefix").perform(context)
    return [_node(spec, prefix) for spec in build(options_from_strings(MODE, values))]


def generate_launch_description():
    arguments = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, default, description in LAUNCH_ARGUMENTS[MODE]
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_nodes)])
