"""The lang2policy graph on the MuJoCo simulation: ``ros2 launch lang2policy sim.launch.py``.

Nodes: sim_node, perception_node, safety_node, controller_node, planner_node, and with
``vla:=true`` vla_node (skills on ``/lang2policy/skill``; ``vla_backend:=local``), with
``record:=DIR`` recorder_node, with ``terminal:=true`` terminal_node (in ``terminal_prefix``,
default ``xterm -e``: it needs a TTY; or run ``ros2 run lang2policy terminal_node`` in a shell of
its own). Which nodes, their params files (config/nodes/<executable>.yaml) and overrides come
from ``lang2policy.graph.nodes``, the same description ``lang2policy sim`` starts from Python; see
``ros2 launch lang2policy sim.launch.py --show-args`` for the arguments.

Example: ``ros2 launch lang2policy sim.launch.py robot:=panda llm:=openai record:=/tmp/rec``
"""

from lang2policy.ros.launch_description import launch_description


def generate_launch_description():
    return launch_description("sim")
