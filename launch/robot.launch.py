"""The lang2policy graph on a real arm: ``ros2 launch lang2policy robot.launch.py``.

The sim graph without the sim node, on wall time, perception from the cameras. The arm is
reached through its ros2_control controllers (``driver:=ros2_control``, the default): the graph
already speaks their topic names (``/joint_states``, ``/arm_controller/joint_trajectory``); give
``trajectory_topic:=/<controller>/joint_trajectory`` or ``joint_states_topic:=...`` when the
arm's differ, and every node is remapped onto them. Start the arm's own bringup (controller
manager, camera drivers) first. ``driver:=so101 port:=/dev/ttyACM0`` drives an SO-101 through
our serial driver instead (see hardware/README.md); ``emulate:=true`` runs it on an emulated
SO-101 (servo bus on a pty, arm and table in MuJoCo, ground-truth perception). Nodes, params
files and overrides come from ``lang2policy.graph.nodes``.

Examples: ``ros2 launch lang2policy robot.launch.py robot:=panda
trajectory_topic:=/joint_trajectory_controller/joint_trajectory llm:=openai``;
``ros2 launch lang2policy robot.launch.py driver:=so101 port:=/dev/ttyACM0``
"""

from lang2policy.ros.launch_description import launch_description


def generate_launch_description():
    return launch_description("robot")
