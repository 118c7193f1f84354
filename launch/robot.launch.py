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

from lang2policy.ros.launch_description import launch_description


def generate_launch_description():
    return launch_description("robot")
