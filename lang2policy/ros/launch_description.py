"""What ``launch/sim.launch.py`` and ``launch/robot.launch.py`` return: the graph of
``lang2policy.graph.nodes`` as launch_ros ``Node`` actions, with one launch argument per option
(the table of ``lang2policy.graph.options``).

Imported only by the launch files (``launch``/``launch_ros`` come with a ROS 2 install, not
from PyPI); the nodes are built when the launch arguments are known (``OpaqueFunction``).
"""

from __future__ import annotations

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lang2policy.graph.nodes import build
from lang2policy.graph.options import LAUNCH_ARGUMENTS, TERMINAL_PREFIX, options_from_strings


def _node(spec, terminal_prefix):
    """A launch_ros Node for one ``lang2policy.graph.NodeSpec``."""
    return Node(
        package="lang2policy",
        executable=spec.executable,
        name=spec.name,
        namespace=spec.namespace or None,  # an arm of a fleet (arms:=arm1,arm2)
        parameters=[str(spec.params_file), dict(spec.overrides)],
        remappings=list(spec.remaps),
        prefix=terminal_prefix if spec.executable == "terminal_node" else None,
        output="screen",
        emulate_tty=True,
        additional_env=dict(spec.env) or None,  # domain_id:=N sets ROS_DOMAIN_ID
    )


def _nodes(context, mode: str):
    """The graph for the arguments given (validated by lang2policy.graph)."""
    values = {
        name: LaunchConfiguration(name).perform(context)
        for name, _, _ in LAUNCH_ARGUMENTS[mode]
        if name != TERMINAL_PREFIX[0]
    }
    prefix = LaunchConfiguration(TERMINAL_PREFIX[0]).perform(context)
    return [_node(spec, prefix) for spec in build(options_from_strings(mode, values))]


def launch_description(mode: str) -> LaunchDescription:
    """The launch description of the ``mode`` graph (``sim`` or ``robot``)."""
    arguments = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, default, description in LAUNCH_ARGUMENTS[mode]
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_nodes, args=[mode])])
