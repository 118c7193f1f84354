"""The joint-map bridge driving the joint_trajectory_controller stand-in (real rclpy, loopback).

The stand-in plays a Franka FR3 under franka_ros2 (hardware/panda.yaml: fr3_joint1..7 on
/fr3_arm_controller/joint_trajectory, hardware states with fingers on /joint_states); the
bridge turns the graph's contract (our panda_joint names) into that and back. Because the arm
itself publishes /joint_states, the bridge publishes our names on /lang2policy/joint_states
(its ``state_topic``), as the graph does when it runs with a joint map. All nodes run in one
process on a private Context and domain.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from support.ros import spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from lang2policy.errors import ConfigError  # noqa: E402
from lang2policy.graph import topics  # noqa: E402
from lang2policy.hardware import GRIPPER, load_joint_map  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(60)]

DOMAIN_ID = 1 + (os.getpid() + 161) % 200
PANDA = tuple(f"panda_joint{i}" for i in range(1, 8))
HOME = dict(zip(PANDA, (0.0, -0.34, 0.0, -2.25, 0.0, 0.34, 0.0), strict=True))
TIMEOUT = 15.0  # generous: CI is a loaded 2-core machine


class Probe:
    """Publishes contract and hardware trajectories; records both joint-state topics."""

    def __init__(self, context, joint_map) -> None:
        self.node = rclpy.create_node("joint_map_probe", context=context)
        self.lock = threading.Lock()
        self.ours: list[dict[str, float]] = []
        self.hardware: list[dict[str, float]] = []
        self.node.create_subscription(
            JointState, topics.BRIDGED_JOINT_STATES.name, self._on_ours, 50
        )
        self.node.create_subscription(
            JointState, joint_map.joint_states_topic, self._on_hardware, 50
        )
        self.contract = self.node.create_publisher(JointTrajectory, topics.TRAJECTORY.name, 10)
        self.direct = self.node.create_publisher(JointTrajectory, joint_map.trajectory_topic, 10)

    def _on_ours(self, msg: JointState) -> None:
        with self.lock:
            self.ours.append(dict(zip(msg.name, msg.position, strict=True)))

    def _on_hardware(self, msg: JointState) -> None:
        with self.lock:
            self.hardware.append(dict(zip(msg.name, msg.position, strict=True)))

    def latest(self) -> dict[str, float]:
        with self.lock:
            return dict(self.ours[-1]) if self.ours else {}

    def latest_hardware(self) -> dict[str, float]:
        with self.lock:
            return dict(self.hardware[-1]) if self.hardware else {}

    def send(self, names, points, publisher=None) -> None:
        publisher = publisher or self.contract
        wait_for(publisher.get_subscription_count, TIMEOUT, "a subscriber of the trajectory")
        publisher.publish(convert.trajectory(names, points))

    def reaches(self, target: dict[str, float], what: str, tol: float = 1e-3) -> dict:
        def close():
            state = self.latest()
            return state if all(abs(state[n] - v) < tol for n, v in target.items()) else None

        return wait_for(close, TIMEOUT, what)


def _params(**values) -> list[Parameter]:
    return [Parameter(name, value=value) for name, value in values.items()]


@pytest.fixture()
def ros_context():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context)
        yield context
        rclpy.try_shutdown(context=context)


@pytest.fixture()
def bridge(ros_context):
    from lang2policy.ros.joint_map_bridge_node import JointMapBridgeNode
    from lang2policy.ros.jtc_standin_node import JtcStandinNode

    joint_map = load_joint_map("panda")
    standin = JtcStandinNode(
        context=ros_context, parameter_overrides=_params(joint_map="panda", rate=50.0)
    )
    bridge = JointMapBridgeNode(
        context=ros_context,
        parameter_overrides=_params(
            joint_map="panda", state_topic=topics.BRIDGED_JOINT_STATES.name
        ),
    )
    probe = Probe(ros_context, joint_map)
    with spinning(ros_context, (standin, bridge, probe.node)):
        wait_for(probe.latest, TIMEOUT, "joint states in our names from the bridge")
        yield standin, bridge, probe


def test_states_arrive_in_our_names_and_order(bridge):
    _, _, probe = bridge
    state = probe.latest()
    assert tuple(state) == (*PANDA, GRIPPER)  # the description's order, fingers dropped
    assert state == pytest.approx({**HOME, GRIPPER: 0.0})
    hardware = probe.latest_hardware()
    assert hardware["fr3_joint6"] == pytest.approx(1.91) and "fr3_finger_joint2" in hardware


def test_a_scrambled_contract_trajectory_reaches_its_targets(bridge):
    standin, _, probe = bridge
    target = {**HOME, "panda_joint1": 0.3, "panda_joint6": 0.6, "panda_joint7": -0.5}
    names = [*reversed(PANDA), GRIPPER]  # scrambled, and a gripper Franka's JTC does not own
    probe.send(names, [(0.3, [target[n] for n in reversed(PANDA)] + [1.0])])
    probe.reaches(target, "the contract targets on our joint states")
    hardware = probe.latest_hardware()
    assert hardware["fr3_joint6"] == pytest.approx(0.6 + 1.57, abs=1e-3)
    assert hardware["fr3_joint7"] == pytest.approx(-0.5 + 0.7854, abs=1e-3)
    assert standin.rejected == 0


def test_a_partial_trajectory_holds_the_joints_it_does_not_name(bridge):
    _, bridge, probe = bridge
    probe.send(["panda_joint2"], [(0.2, [-0.1])])
    probe.reaches({**HOME, "panda_joint2": -0.1}, "joint 2 moved, the others held")
    assert bridge.rejected == 0


def test_an_empty_trajectory_stops_and_holds(bridge):
    _, _, probe = bridge
    probe.send(
        list(PANDA), [(4.0, [HOME[n] + (0.8 if n == "panda_joint1" else 0.0) for n in PANDA])]
    )
    wait_for(lambda: probe.latest()["panda_joint1"] > 0.1, TIMEOUT, "joint 1 on its way")
    probe.send(list(PANDA), [])
    held = wait_for(lambda: _still(probe), TIMEOUT, "the arm held still")
    assert 0.1 < held["panda_joint1"] < 0.7  # stopped where it was, not at the target


def _still(probe: Probe) -> dict | None:
    """The latest state if the last few states did not move (the stand-in tracks exactly)."""
    with probe.lock:
        recent = probe.ours[-5:]
    if len(recent) < 5:
        return None
    values = [state["panda_joint1"] for state in recent]
    spread = max(values) - min(values)
    return recent[-1] if spread < 1e-9 else None


def test_the_bridge_clamps_an_out_of_limit_point(bridge):
    standin, bridge, probe = bridge
    probe.send(["panda_joint1"], [(0.3, [3.5])])  # beyond FR3's 2.7437 (and our model's 2.8973)
    probe.reaches({"panda_joint1": 2.7437}, "joint 1 at the FR3 limit")
    assert bridge.clamped >= 1 and standin.rejected == 0


def test_the_standin_rejects_an_out_of_limit_trajectory(bridge):
    standin, _, probe = bridge
    hardware = [f"fr3_joint{i}" for i in range(1, 8)]
    points = [
        (0.2, [0.2, -0.34, 0.0, -2.25, 0.0, 1.91, 0.7854]),
        (0.4, [0.4, -0.34, 0.0, -2.25, 0.0, 4.0, 0.7854]),
    ]  # joint 6 beyond 3.6827
    probe.send(hardware, points, publisher=probe.direct)
    wait_for(lambda: standin.rejected == 1, TIMEOUT, "the stand-in's rejection")
    assert probe.latest()["panda_joint1"] == pytest.approx(0.0)  # the whole trajectory dropped
    # Unknown joints are rejected too (the finger is not the controller's).
    probe.send(["fr3_finger_joint1"], [(0.1, [0.02])], publisher=probe.direct)
    wait_for(lambda: standin.rejected == 2, TIMEOUT, "the rejection of an unknown joint")


def test_bad_contract_messages_are_dropped(bridge):
    _, bridge, probe = bridge
    probe.send(["elbow"], [(0.1, [0.0])])
    wait_for(lambda: bridge.rejected == 1, TIMEOUT, "the bridge's rejection")
    assert np.allclose([probe.latest()[n] for n in PANDA], [HOME[n] for n in PANDA])


# --------------------------------------------------------------------- start-up errors
def test_unknown_joint_map_and_topic_loops_fail_at_start(ros_context):
    from lang2policy.ros.joint_map_bridge_node import JointMapBridgeNode
    from lang2policy.ros.jtc_standin_node import JtcStandinNode

    with pytest.raises(ConfigError, match=r"unknown joint map 'ur7'.*panda"):
        JointMapBridgeNode(context=ros_context, parameter_overrides=_params(joint_map="ur7"))
    with pytest.raises(ConfigError, match="parameter 'joint_map' is empty"):
        JtcStandinNode(context=ros_context)
    # panda: the arm publishes /joint_states itself, the bridge's default state_topic.
    with pytest.raises(ConfigError, match="state_topic /joint_states"):
        JointMapBridgeNode(context=ros_context, parameter_overrides=_params(joint_map="panda"))
    # SO-101 under ros2_control: its controller listens on the contract's trajectory topic.
    with pytest.raises(ConfigError, match="command_topic /arm_controller/joint_trajectory"):
        JointMapBridgeNode(
            context=ros_context,
            parameter_overrides=_params(
                joint_map="so101_ros2_control", state_topic=topics.BRIDGED_JOINT_STATES.name
            ),
        )


def test_the_standin_ignores_a_trajectory_that_ended_in_the_past(bridge):
    standin, _, probe = bridge
    msg = convert.trajectory(["fr3_joint1"], [(0.5, [0.5])])
    msg.header.stamp = convert.time_msg(standin.now() - 10.0)
    wait_for(probe.direct.get_subscription_count, TIMEOUT, "the stand-in's subscription")
    probe.direct.publish(msg)
    wait_for(lambda: standin.rejected == 1, TIMEOUT, "the stand-in ignoring an old trajectory")
    assert standin.accepted == 0


def test_a_map_with_relative_topics_drives_the_arm_of_the_bridges_namespace(
    ros_context, tmp_path
):
    """One map for a fleet: its topics relative, the bridge and the arm's controller under
    /arm1 meet on /arm1/fr3_arm_controller/joint_trajectory; nothing reaches the root's."""
    import yaml

    from lang2policy.paths import hardware_dir
    from lang2policy.ros.joint_map_bridge_node import JointMapBridgeNode
    from lang2policy.ros.jtc_standin_node import JtcStandinNode

    data = yaml.safe_load((hardware_dir() / "panda.yaml").read_text())
    data["trajectory_topic"] = data["trajectory_topic"].lstrip("/")
    data["joint_states_topic"] = data["joint_states_topic"].lstrip("/")
    relative = tmp_path / "panda_fleet.yaml"
    relative.write_text(yaml.safe_dump(data))
    standin = JtcStandinNode(context=ros_context, namespace="arm1",
                             parameter_overrides=_params(joint_map=str(relative), rate=50.0))
    bridge = JointMapBridgeNode(context=ros_context, namespace="arm1", parameter_overrides=_params(
        joint_map=str(relative), command_topic=topics.TRAJECTORY.relative,
        state_topic=topics.BRIDGED_JOINT_STATES.relative))  # fmt: skip
    probe = Probe(ros_context, load_joint_map(str(relative)))  # its topics under the root
    arm1 = rclpy.create_node("arm1_probe", namespace="arm1", context=ros_context)
    ours: list[dict[str, float]] = []
    arm1.create_subscription(JointState, topics.BRIDGED_JOINT_STATES.relative,
                             lambda m: ours.append(dict(zip(m.name, m.position, strict=True))),
                             50)  # fmt: skip
    contract = arm1.create_publisher(JointTrajectory, topics.TRAJECTORY.relative, 10)
    with spinning(ros_context, (standin, bridge, probe.node, arm1)):
        wait_for(lambda: ours, TIMEOUT, "joint states in our names under /arm1")
        assert ours[-1] == pytest.approx({**HOME, GRIPPER: 0.0})
        probe.send(["panda_joint1"], [(0.3, [0.3])], publisher=contract)
        wait_for(lambda: abs(ours[-1]["panda_joint1"] - 0.3) < 1e-3, TIMEOUT, "joint1 at 0.3")
        assert standin.map.trajectory_topic == "fr3_arm_controller/joint_trajectory"
        assert bridge.get_namespace() == "/arm1"
        assert not probe.ours and not probe.hardware  # nothing on the root namespace's topics
