"""The SO-101 driver node against the servo-bus emulator over a real pty (real rclpy on
loopback): it publishes /joint_states like the sim node, follows
/arm_controller/joint_trajectory, holds on an empty trajectory, gives up with the torque off
after repeated bus errors, and turns the torque off when it shuts down."""

from __future__ import annotations

import contextlib
import os
import threading

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from support.ros import spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from lang2policy.errors import ConfigError, Lang2PolicyError  # noqa: E402
from lang2policy.graph import topics  # noqa: E402
from lang2policy.robots.feetech.emulator import ServoBusEmulator  # noqa: E402
from lang2policy.robots.feetech.servo_plant import KinematicPlant  # noqa: E402
from lang2policy.robots.so101.calibration import JOINTS  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(60)]

IDS = (1, 2, 3, 4, 5, 6)
DOMAIN_ID = 1 + (os.getpid() + 151) % 200


class Probe:
    def __init__(self, context) -> None:
        self.node = rclpy.create_node("so101_probe", context=context)
        self.lock = threading.Lock()
        self.states: list[dict[str, float]] = []
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 50)
        self.commands = self.node.create_publisher(JointTrajectory, topics.TRAJECTORY.name, 10)

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            self.states.append(dict(zip(msg.name, msg.position, strict=True)))

    def latest(self) -> dict[str, float]:
        with self.lock:
            return dict(self.states[-1]) if self.states else {}

    def send(self, points) -> None:
        wait_for(self.commands.get_subscription_count, 10, "the driver's subscription")
        self.commands.publish(convert.trajectory(JOINTS, points))


@pytest.fixture()
def driver():
    with driver_on_bus([]) as running:
        yield running


def test_joint_states_and_trajectories_as_the_sim_node_does(driver):
    emulator, driver, probe = driver
    state = probe.latest()
    assert list(state) == list(JOINTS)  # the sim node's names and order
    target = {**state, "shoulder_pan": 0.3, "gripper": 0.5}
    probe.send([(0.5, [target[n] for n in JOINTS])])
    wait_for(lambda: abs(probe.latest()["shoulder_pan"] - 0.3) < 0.01, 10, "pan at 0.3 rad")
    assert abs(probe.latest()["gripper"] - 0.5) < 0.02

    probe.send([(2.0, [(-0.4 if n == "shoulder_pan" else target[n]) for n in JOINTS])])
    wait_for(lambda: probe.latest()["shoulder_pan"] < 0.2, 10, "the pan moving back")
    probe.send([])  # a stop: hold where the arm is, the gripper keeps its command
    wait_for(lambda: driver.follower.target(driver.now())[0] > -0.39, 5, "the hold")
    held = probe.latest()["shoulder_pan"]
    wait_for(lambda: len(probe.states) > 20, 5, "more states")
    assert abs(probe.latest()["shoulder_pan"] - held) < 0.05
    assert probe.latest()["shoulder_pan"] > -0.3  # it did not go on to -0.4
    assert abs(probe.latest()["gripper"] - 0.5) < 0.02
    assert all(emulator.servo(i).torque_on for i in IDS)


def test_repeated_bus_errors_turn_the_torque_off_and_stop_the_driver(driver):
    emulator, driver, _probe = driver
    driver._timer.cancel()  # ticks are driven by hand here
    emulator.silence(3)
    for _ in range(driver.max_bus_errors - 1):
        driver._tick()
    assert driver.failure is None
    emulator.silence(3, silent=False)
    driver._tick()  # one good tick resets the count
    assert driver.bus_errors == 0
    emulator.silence(3)
    with pytest.raises(Lang2PolicyError, match="bus errors in a row"):
        for _ in range(driver.max_bus_errors):
            driver._tick()
    # The torque-off went out to every servo; the silent one cannot confirm it.
    assert not any(emulator.servo(i).torque_on for i in IDS if i != 3)


def test_shutdown_turns_the_torque_off_and_a_port_is_required():
    from lang2policy.ros.so101_driver_node import SO101DriverNode

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ConfigError, match="'port' is required"):
            SO101DriverNode(context=context)
        with ServoBusEmulator(IDS, plant=KinematicPlant()) as emulator:
            driver = SO101DriverNode(
                context=context,
                parameter_overrides=[
                    Parameter("port", value=emulator.port),
                    Parameter("bus_timeout", value=0.1),
                ],
            )
            assert all(emulator.servo(i).torque_on for i in IDS)
            driver.destroy_node()
            assert not any(emulator.servo(i).torque_on for i in IDS)
    finally:
        rclpy.shutdown(context=context)


def test_the_driver_takes_lerobots_calibration_file_when_its_pose_is_accepted(tmp_path):
    import json

    from lang2policy.ros.so101_driver_node import SO101DriverNode

    # lerobot-calibrate's file: ranges around the calibration pose (2047) LeRobot's offsets make
    lerobot = {name: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 900,
                      "range_max": 3200} for i, name in enumerate(JOINTS)}  # fmt: skip
    path = tmp_path / "my_follower.json"
    path.write_text(json.dumps(lerobot))
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        with ServoBusEmulator(IDS, plant=KinematicPlant()) as emulator:
            base = [Parameter("port", value=emulator.port), Parameter("bus_timeout", value=0.1),
                    Parameter("calibration", value=str(path))]  # fmt: skip
            with pytest.raises(ConfigError, match="lerobot_calibration_pose:=true"):
                SO101DriverNode(context=context, parameter_overrides=base)
            accepted = [*base, Parameter("lerobot_calibration_pose", value=True)]
            driver = SO101DriverNode(context=context, parameter_overrides=accepted)
            calibration = driver.robot.calibration
            assert [j.zero for j in calibration.joints] == [2047] * 6
            assert calibration["elbow_flex"].range_max == 3200
            driver.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_lerobots_file_and_our_calibration_of_the_same_ticks_drive_the_bus_alike(tmp_path):
    """The same joint command through the driver with lerobot-calibrate's file (taken directly)
    and with our calibration of the same ticks (``calibrate so101 --from-lerobot``) puts the
    same goal ticks on the emulated bus, and LeRobot reads those ticks as the same angles."""
    from pathlib import Path

    from lang2policy.robots.feetech.protocol import Address
    from lang2policy.robots.so101.lerobot_calibration import (
        action_to_lerobot,
        from_lerobot,
        read_lerobot_calibration,
    )

    fixture = Path(__file__).parents[1] / "fixtures" / "lerobot" / "so101_follower.json"
    motors = read_lerobot_calibration(fixture)
    ours = from_lerobot(motors, accept_calibration_pose=True)
    ours.save(tmp_path / "ours.yaml")
    goal = [0.3, -0.2, 0.25, 0.1, -0.4, 0.6]
    choices = {
        "lerobot": [Parameter("calibration", value=str(fixture)),
                    Parameter("lerobot_calibration_pose", value=True)],
        "ours": [Parameter("calibration", value=str(tmp_path / "ours.yaml"))],
    }  # fmt: skip
    ticks, read_back = {}, {}
    for name, parameters in choices.items():
        with driver_on_bus(parameters) as (emulator, _, probe):
            probe.send([(0.5, goal)])
            wait_for(lambda: _near(probe.latest(), goal), 10, f"the goal with {name}'s file")
            ticks[name] = [
                int.from_bytes(emulator.servo(i).read(Address.GOAL_POSITION, 2), "little")
                for i in IDS
            ]
            read_back[name] = probe.latest()
    assert ticks["lerobot"] == ticks["ours"]
    degrees = action_to_lerobot(motors, ours, goal)
    for joint, tick in zip(JOINTS[:5], ticks["lerobot"][:5], strict=True):
        assert motors[joint].degrees(tick) == pytest.approx(degrees[joint], abs=0.1)
    assert motors["gripper"].percent(ticks["lerobot"][5]) == pytest.approx(60.0, abs=0.2)
    for joint in JOINTS:
        assert read_back["lerobot"][joint] == pytest.approx(read_back["ours"][joint], abs=1e-3)


def _near(state: dict[str, float], goal: list[float]) -> bool:
    return bool(state) and all(abs(state[n] - g) < 0.01 for n, g in zip(JOINTS, goal, strict=True))


@contextlib.contextmanager
def driver_on_bus(parameters: list):
    """(emulator, driver, probe): the driver on a fresh emulated bus with these extra
    parameters (after the port and a bus timeout a busy CI machine meets), and a probe."""
    from lang2policy.ros.so101_driver_node import SO101DriverNode

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        with ServoBusEmulator(IDS, plant=KinematicPlant(max_speed=2000.0)) as emulator:
            context = rclpy.Context()
            rclpy.init(context=context)
            overrides = [Parameter("port", value=emulator.port),
                         Parameter("bus_timeout", value=0.1), *parameters]  # fmt: skip
            driver = SO101DriverNode(context=context, parameter_overrides=overrides)
            probe = Probe(context)
            with spinning(context, (driver, probe.node)):  # shuts the context down on exit
                wait_for(probe.latest, 10, "joint states from the driver")
                yield emulator, driver, probe
