"""The robot interface and the shared safety clamp, on the simulation and the mock backend."""

import numpy as np
import pytest

from lang2policy.errors import InvalidCommandError, NotConnectedError
from lang2policy.robots import clamp_action
from lang2policy.robots.mock_robot import MockRobot
from lang2policy.robots.safety import JointLimits
from lang2policy.robots.sim_robot import SimRobot
from lang2policy.scene.robot_description import load_robot_description
from lang2policy.scene.world import World

LIMITS = JointLimits(
    names=("a", "b", "gripper"),
    lower=np.array([-1.0, -1.0, 0.0]),
    upper=np.array([1.0, 1.0, 1.0]),
    max_step=np.array([0.1, 0.1, 1.0]),
    max_deviation=np.array([0.3, 0.3, 1.0]),
)


def test_clamp_passes_a_small_valid_step_unchanged():
    result = clamp_action({"a": 0.05, "b": -0.05, "gripper": 0.5}, np.zeros(3), LIMITS)
    np.testing.assert_allclose(result.action, [0.05, -0.05, 0.5])
    assert result.clipped == ()


def test_clamp_limits_step_and_range_and_reports_it():
    result = clamp_action(np.array([0.9, -5.0, 2.0]), np.array([0.0, -0.95, 0.5]), LIMITS)
    np.testing.assert_allclose(result.action, [0.1, -1.0, 1.0])
    assert set(result.clipped) == {"a", "b", "gripper"}


def test_clamp_rate_limits_from_the_previous_command_within_the_tracking_bound():
    previous = np.array([0.25, 0.0, 0.5])
    result = clamp_action(np.array([0.6, 0.0, 0.5]), np.zeros(3), LIMITS, previous)
    np.testing.assert_allclose(result.action, [0.3, 0.0, 0.5])  # 0.25 + 0.1 capped at 0 + 0.3


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (np.array([np.nan, 0.0, 0.5]), "non-finite values for \\['a'\\]"),
        (np.array([0.0, np.inf, 0.5]), "non-finite"),
        (np.array([0.0, 0.0]), "must have 3 values"),
        ({"a": 0.0, "b": 0.0}, "missing: \\['gripper'\\]"),
        ({"a": 0.0, "b": 0.0, "gripper": 1.0, "elbow": 0.0}, "unknown: \\['elbow'\\]"),
        (["x", 0.0, 0.0], "must be numbers"),
    ],
)
def test_clamp_rejects_bad_commands_with_clear_errors(action, message):
    with pytest.raises(InvalidCommandError, match=message):
        clamp_action(action, np.zeros(3), LIMITS)


def make_robot(backend: str, robot: str = "so101"):
    """The simulation or the mock, built the way the code that runs them builds them."""
    if backend == "sim":
        return SimRobot(World(robot, "cap_tabletop"))
    return MockRobot(load_robot_description(robot))


@pytest.fixture(params=["sim", "mock"])
def robot(request):
    return make_robot(request.param, "so101")


def test_features_are_readable_before_connect(robot):
    features = robot.action_features
    assert list(features) == [
        "shoulder_pan",
        "shoulder_lift",
        "elbow_flex",
        "wrist_flex",
        "wrist_roll",
        "gripper",
    ]
    assert features["gripper"] == (0.0, 1.0)
    assert not robot.is_connected
    with pytest.raises(NotConnectedError):
        robot.get_observation()


def test_send_action_returns_what_was_sent_after_clipping(robot):
    robot.connect()
    start = robot.get_observation().position
    target = start.copy()
    target[0] += 1.0  # far more than one step
    sent = robot.send_action(target)
    assert sent["shoulder_pan"] == pytest.approx(start[0] + robot.limits.max_step[0])
    assert robot.last_clipped == ("shoulder_pan",)


def test_bad_command_is_rejected_and_nothing_moves(robot):
    robot.connect()
    before = robot.get_observation().position
    with pytest.raises(InvalidCommandError):
        robot.send_action(np.full(6, np.nan))
    robot.sleep(0.2)
    np.testing.assert_allclose(robot.get_observation().position, before, atol=2e-3)
    robot.disconnect()
    assert not robot.is_connected


def test_mock_mirrors_commands_into_state():
    robot = make_robot("mock", "panda")
    robot.connect()
    target = robot.get_observation().position.copy()
    target[1] += 0.01
    robot.send_action(target)
    np.testing.assert_allclose(robot.get_observation().position, target)


def test_sim_robot_follows_commands():
    robot = make_robot("sim", "so101")
    robot.connect()
    robot.world.reset(0)
    target = robot.get_observation().position.copy()
    goal = target[0] + 0.3
    for _ in range(40):
        target[0] = min(goal, target[0] + 0.02)
        robot.send_action(target)
        robot.sleep(0.02)
    robot.sleep(0.5)
    assert robot.get_observation().position[0] == pytest.approx(goal, abs=0.02)

