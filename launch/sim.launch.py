"""The lang2policy graph on the MuJoCo simulation: ``ros2 launch lang2policy sim.launch.py``.

Nodes: sim_node, perception_node, safety_node, controller_node, planner_node, and with
``record:=DIR`` recorder_node, with ``terminal:=true`` terminal_node (in ``terminal_prefix``,
default ``xterm -e``: it needs a TTY; or run ``ros2 run lang2policy terminal_node`` in a shell of
its own). Which nodes, their params files (config/nodes/<executable>.yaml) and overrides come
from ``lang2policy.graph``, the same description ``lang2policy sim`` starts from Python; see
``ros2 launch lang2policy sim.launch.py --show-args`` for the arguments.

Example: ``ros2 launch lang2policy sim.launch.py robot:=panda llm:=openai record:=/tmp/rec``
"""

# Import order kept by hand: ruff takes `launch` for this directory, not ROS 2's package.
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lang2policy.graph import LAUNCH_ARGUMENTS, build, options_from_strings

MODE = "sim"


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
