"""A stop brakes along the command to rest (``TrajectoryFollower.stop``), pure and in MuJoCo.

The follower's target must decelerate within the limit, never reverse, and hold where it comes to
rest (from the measured state when the caller gives the measured velocity, as the robot nodes
do); a joint at rest holds its target, a joint far from its target holds its measured position,
the gripper keeps its command. In the real simulation (the sim node's loop without ROS: the
follower's target to ``SimRobot`` every 20 ms) the arm must then stop without running past
where it comes to rest; holding the lagging measured position instead (the old stop) ran past
it and came back. The safety node's model of the robot (``RobotTarget``) brakes the same way.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from lang2policy.control.trajectory_follower import (
    BRAKING_SAMPLE,
    REST_SPEED,
    Braking,
    TrajectoryFollower,
    braking_trajectory,
    robot_braking,
)
from lang2policy.errors import ConfigError
from lang2policy.robots.sim_robot import SimRobot
from lang2policy.safety.reference import RobotTarget
from lang2policy.safety.trajectory import Trajectory
from lang2policy.scene import robot_description
from lang2policy.scene.robot_description import load_robot_description
from lang2policy.scene.world import World

NAMES = ("a", "b", "gripper")
LIMIT = 10.0  # rad/s^2
TOLERANCE = 0.1  # rad
BRAKING = Braking(np.array([LIMIT, LIMIT, np.inf]), np.array([TOLERANCE, TOLERANCE, np.inf]))
PERIOD = 0.02  # s: the sim node's control period
OVERSHOOT = 0.005  # rad a stopped arm may run past where it comes to rest


def moving(speed: float = 1.0) -> TrajectoryFollower:
    """Joint a moving at ``speed`` from 0 from t = 0 (for 10 s), b and the gripper still."""
    follower = TrajectoryFollower(NAMES, np.array([0.0, 0.5, 0.3]), queue=10)
    follower.start(0.0, [(10.0, {"a": 10.0 * speed})], np.zeros(3))
    return follower


def test_a_stop_brakes_along_the_command_within_the_limit_and_holds_where_it_rests():
    follower = moving(1.0)
    measured = np.array([0.46, 0.5, 0.9])  # the servo lags 0.04 rad; the gripper is open wider
    far = follower.stop(0.5, measured, BRAKING)
    assert not far.any()
    step = BRAKING_SAMPLE  # the braking trajectory's points: linear in between
    track = np.array([follower.target(t) for t in np.arange(0.5, 1.0, step)])
    velocity = np.diff(track[:, 0]) / step
    assert track[0, 0] == pytest.approx(0.5)  # from the target, not the measured 0.46
    assert velocity[0] == pytest.approx(1.0, abs=LIMIT * step)  # no jump in speed
    assert (velocity >= -1e-9).all()  # never reverses
    assert (np.diff(velocity) <= 1e-9).all()  # only slows down
    assert np.abs(np.diff(velocity) / step).max() <= LIMIT * 1.01
    rest = 0.5 + 2 * 1.0**2 / (3 * LIMIT)  # the cubic's rest point
    stopped = 2 * 1.0 / LIMIT  # s
    assert follower.target(0.5 + stopped) == pytest.approx([rest, 0.5, 0.3], abs=1e-9)
    assert follower.target(99.0) == pytest.approx([rest, 0.5, 0.3], abs=1e-9)
    assert follower.velocity(0.5 + stopped + 0.01) == pytest.approx(np.zeros(3))
    assert follower.active(0.5 + stopped - 0.01) and not follower.active(0.5 + stopped + 0.01)


@pytest.mark.parametrize("first", [0.0, 0.01, 0.03])  # a late, on-time, catching-up commander
def test_a_streamed_commands_speed_is_its_own_not_its_bridge_from_the_target(first):
    """A 20 ms step stream's chunk bridges from the target to its first point: the stop brakes
    from the stream's 0.5 rad/s, whatever that bridge asks for."""
    follower = TrajectoryFollower(NAMES, np.zeros(3), queue=10)
    chunk = [(PERIOD * (k + 1), {"a": first + 0.01 * k}) for k in range(5)]
    follower.start(0.0, chunk, np.zeros(3))
    assert follower.velocity(0.01)[0] == pytest.approx(0.5)
    follower.stop(0.01, np.zeros(3), BRAKING)
    rest = follower.target(0.01)[0] + 2 * 0.5**2 / (3 * LIMIT)
    assert follower.target(9.0)[0] == pytest.approx(rest, abs=1e-9)


def test_a_long_first_segment_is_the_commands_speed():
    follower = TrajectoryFollower(NAMES, np.zeros(3))
    follower.start(0.0, [(1.0, {"a": 0.3}), (2.0, {"a": 0.4})], np.zeros(3))
    assert follower.velocity(0.5)[0] == pytest.approx(0.3)
    assert follower.velocity(1.5)[0] == pytest.approx(0.1)
    assert follower.velocity(2.5)[0] == 0.0


def test_braking_backwards_is_the_mirror_image():
    times, rows = braking_trajectory(np.array([1.0]), np.array([-1.5]), np.array([LIMIT]))
    assert times[-1] == pytest.approx(0.3)
    assert rows[-1, 0] == pytest.approx(1.0 - 2 * 1.5**2 / (3 * LIMIT))
    assert (np.diff(rows[:, 0]) <= 0).all()


def test_with_the_measured_velocity_a_moving_joint_brakes_from_its_measured_state():
    follower = moving(1.0)
    measured = np.array([0.46, 0.5, 0.9])  # lagging 0.04 rad; the gripper held open wider
    jumped = follower.stop(0.5, measured, BRAKING, np.array([0.9, 0.0, 0.0]))
    assert jumped.tolist() == [True, False, False]  # only a: b and the gripper are at rest
    rest = 0.46 + 2 * 0.9**2 / (3 * LIMIT)
    assert follower.target(0.5) == pytest.approx([0.46, 0.5, 0.3])
    start = (follower.target(0.501)[0] - 0.46) / 0.001
    assert start == pytest.approx(0.9, abs=LIMIT * BRAKING_SAMPLE)  # from the measured speed
    assert follower.target(99.0) == pytest.approx([rest, 0.5, 0.3], abs=1e-9)
    track = np.array([follower.target(t)[0] for t in np.arange(0.5, 1.0, BRAKING_SAMPLE)])
    assert (np.diff(track) >= -1e-12).all()  # never reverses


def test_a_joint_still_moving_toward_a_target_at_rest_brakes_from_its_measured_state():
    follower = TrajectoryFollower(NAMES, np.array([0.2, -0.3, 0.4]))  # commands at rest
    speed = np.array([0.4, REST_SPEED / 2, 0.0])  # a still arrives; b creeps, at rest
    jumped = follower.stop(1.0, np.array([0.17, -0.29, 0.4]), BRAKING, speed)
    assert jumped.tolist() == [True, False, False]
    assert follower.target(9.0) == pytest.approx([0.17 + 2 * 0.4**2 / (3 * LIMIT), -0.3, 0.4])


def test_at_rest_a_stop_holds_the_target_not_the_measured_position():
    follower = TrajectoryFollower(NAMES, np.array([0.2, -0.3, 0.4]))
    measured = np.array([0.17, -0.28, 0.6])  # sagging, and a gripper closed on a block
    assert not follower.stop(1.0, measured, BRAKING, np.zeros(3)).any()
    assert follower.target(1.0) == pytest.approx([0.2, -0.3, 0.4])
    assert follower.target(5.0) == pytest.approx([0.2, -0.3, 0.4])


def test_a_joint_far_from_its_target_holds_its_measured_position_at_once():
    follower = moving(1.0)
    measured = np.array([0.5 - 2 * TOLERANCE, 0.5, 0.3])  # a blocked: the target ran ahead
    far = follower.stop(0.5, measured, BRAKING)
    assert far.tolist() == [True, False, False]
    assert follower.target(0.5) == pytest.approx(measured)
    assert follower.target(9.0) == pytest.approx(measured)


def test_the_gripper_keeps_its_command_however_far_its_opening_is():
    follower = TrajectoryFollower(NAMES, np.array([0.0, 0.0, 1.0]))
    follower.start(0.0, [(1.0, {"gripper": 0.0})], np.zeros(3))  # closing
    far = follower.stop(0.5, np.array([0.0, 0.0, 0.95]), BRAKING)  # the block holds it open
    assert not far.any()
    assert follower.target(0.5)[2] == pytest.approx(0.5)
    assert follower.target(3.0)[2] == pytest.approx(0.5)  # stops at once, keeps the command


def test_a_stop_cancels_waiting_trajectories_and_a_new_command_departs_from_the_brake():
    follower = moving(1.0)
    for k in range(1, 4):  # a burst: these wait for the running trajectory's first point
        follower.start(0.5, [(PERIOD, {"a": 5.0 + k})], np.zeros(3))
    assert follower.waits(0.5)
    follower.stop(0.5, np.array([0.48, 0.5, 0.3]), BRAKING)
    rest = follower.target(99.0)[0]
    assert rest < 0.6 and not follower.waits(1.0)
    follower.start(1.0, [(0.5, {"a": 0.0})], np.zeros(3))
    assert follower.target(1.0)[0] == pytest.approx(rest)


def test_bad_braking_values_fail_loudly():
    with pytest.raises(ConfigError, match="deceleration"):
        Braking(np.array([10.0, -1.0]), np.array([0.1, 0.1]))
    with pytest.raises(ConfigError, match="tolerance"):
        Braking(np.array([10.0, 10.0]), np.array([np.nan, 0.1]))
    with pytest.raises(ConfigError, match="one value per joint"):
        moving().stop(0.5, np.zeros(3), Braking(np.ones(2), np.ones(2)))


@pytest.mark.parametrize("robot", ["so101", "panda"])
def test_each_robot_has_an_acceleration_limit_and_the_gripper_stops_at_once(robot):
    description = load_robot_description(robot)
    names = (*description.home, "gripper")
    braking = robot_braking(description, names)
    assert (braking.deceleration[:-1] == description.max_joint_acceleration).all()
    assert 5.0 <= description.max_joint_acceleration <= 40.0
    assert braking.deceleration[-1] == np.inf and braking.tolerance[-1] == np.inf
    # Fast enough to halt from the speed limit in well under a second.
    assert 2 * description.max_joint_speed / description.max_joint_acceleration < 0.35


@pytest.mark.parametrize(
    ("key", "value"), [("max_joint_acceleration", "-5.0"), ("hold_tolerance", ".nan")]
)
def test_a_bad_acceleration_limit_in_a_robot_description_is_a_config_error(
    tmp_path, monkeypatch, key, value
):
    source = robot_description.config_dir() / "robots" / "so101.yaml"
    (tmp_path / "robots").mkdir()
    target = tmp_path / "robots" / "so101.yaml"
    shutil.copy(source, target)
    lines = [
        f"{key}: {value}" if line.startswith(f"{key}:") else line
        for line in target.read_text().splitlines()
    ]
    target.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(robot_description, "config_dir", lambda: tmp_path)
    with pytest.raises(ConfigError, match=f"{key} must be a finite number > 0"):
        load_robot_description("so101")


# ---------------------------------------------------------------------- the safety model
def test_the_safety_model_brakes_the_replayed_target_as_the_robot_does():
    robot = moving(1.0)
    model = RobotTarget(NAMES, BRAKING)
    model.forwarded(0.0, Trajectory(NAMES, ((10.0, (10.0, 0.5, 0.3)),)), np.array([0, 0.5, 0.3]))
    measured = np.array([0.46, 0.5, 0.3])
    robot.stop(0.5, measured, BRAKING)
    model.held(0.5, measured)
    for t in (0.5, 0.55, 0.6, 1.0):
        position, velocity = model.state(t, measured)
        assert position == pytest.approx(robot.target(t))  # the replay is the robot's target
        assert velocity == pytest.approx(robot.velocity(t))
    model.forwarded(1.0, Trajectory(NAMES, ((0.5, (0.0, 0.5, 0.3)),)), measured)
    robot.start(1.0, [(0.5, {"a": 0.0, "b": 0.5, "gripper": 0.3})], measured, start_time=1.0)
    assert not model.holding
    assert model.state(1.2, measured)[0] == pytest.approx(robot.target(1.2))


def test_without_braking_the_safety_model_holds_the_measured_position_as_before():
    model = RobotTarget(NAMES)
    model.forwarded(0.0, Trajectory(NAMES, ((10.0, (10.0, 0.5, 0.3)),)), np.zeros(3))
    model.held(0.5, np.array([0.46, 0.5, 0.3]))
    position, velocity = model.state(0.6, np.array([0.47, 0.5, 0.3]))
    assert position.tolist() == [0.46, 0.5, 0.3] and not velocity.any()
    # where the robot's target may be: where the arm was when the hold went out, or now
    rows = model.uncertain(np.array([0.47, 0.5, 0.3]))
    assert rows.tolist() == [[0.47, 0.5, 0.3], [0.46, 0.5, 0.3]]


# ---------------------------------------------------------------------- in the simulation
def stop_in_simulation(speed: float, braked: bool) -> tuple[float, float, float]:
    """shoulder_pan ramping at ``speed``, stopped after 0.8 s: (travel after the stop, how far
    it ran past where it came to rest, s until it stays within OVERSHOOT of that)."""
    world = World(robot="so101", layout="cap_tabletop")
    world.reset(0)
    robot = SimRobot(world, control_period=PERIOD)
    robot.connect()
    start = robot.get_observation().position
    follower = TrajectoryFollower(robot.limits.names, start, queue=10)
    accelerate = speed / 10.0  # s at 10 rad/s^2 to reach the speed, then constant

    def pan(t: float) -> float:
        return float(start[0] + 5.0 * min(t, accelerate) ** 2 + speed * max(t - accelerate, 0.0))

    ramp = [(k * PERIOD, {"shoulder_pan": pan(k * PERIOD)}) for k in range(1, 100)]
    begin = world.time
    follower.start(begin, ramp, start)
    stop_at, track = begin + 0.8, []
    while world.time < stop_at + 1.0:
        now = world.time
        if abs(now - stop_at) < PERIOD / 2:
            observation = robot.get_observation()
            measured = observation.position
            if braked:  # as the sim node does
                braking = robot_braking(world.description, robot.limits.names)
                if follower.stop(now, measured, braking, observation.velocity).any():
                    robot.forget_last_command()
            else:  # the old stop: hold the measured position (the gripper keeps its command)
                measured[-1] = follower.target(now)[-1]
                robot.forget_last_command()
                follower.start(now, [], measured)
            at_stop = measured[0]
        robot.send_action(follower.target(now))
        for _ in range(10):
            world.step(1)
            if world.time >= stop_at:
                track.append((world.time - stop_at, world.arm_qpos()[0]))
    times, pans = np.array(track).T
    rest = pans[-1]
    away = np.flatnonzero(np.abs(pans - rest) > OVERSHOOT)
    return float(rest - at_stop), float(pans.max() - rest), float(times[away[-1] + 1])


@pytest.mark.parametrize("speed", [0.5, 1.0, 1.5])
def test_the_simulated_arm_stops_without_running_past_where_it_rests(speed):
    old = stop_in_simulation(speed, braked=False)
    new = stop_in_simulation(speed, braked=True)
    print(
        f"\nstop from {speed} rad/s: hold at measured: overshoot {old[1]:.4f} rad, within "
        f"{OVERSHOOT} rad after {old[2]:.3f} s; braking: travel {new[0]:.4f} rad, overshoot "
        f"{new[1]:.4f} rad, within {OVERSHOOT} rad after {new[2]:.3f} s"
    )
    assert new[1] <= OVERSHOOT < old[1]
    assert new[2] < 0.2  # within OVERSHOOT of rest (the old stop: 0.11-0.15 s)
    assert new[0] > 0.0  # it stops ahead of where it was measured, never coming back


def test_braking_never_passes_the_end_of_the_running_command():
    """A command the safety node cut at the workspace box ends there; an arm still running
    toward it when a hold comes must not coast past it (CI: 1.855 rad past a cut at < 1.85)."""
    follower = TrajectoryFollower(NAMES, np.array([0.2, -0.3, 0.4]))  # commands at rest
    speed = np.array([0.9, 0.0, 0.0])  # the arm catches up fast, 0.01 rad short of the end
    follower.stop(1.0, np.array([0.19, -0.3, 0.4]), BRAKING, speed)
    track = np.array([follower.target(t)[0] for t in np.arange(1.0, 2.0, BRAKING_SAMPLE)])
    assert track.max() <= 0.2 + 1e-12 and follower.target(9.0)[0] == pytest.approx(0.2)


def test_an_end_behind_the_arm_is_not_a_target_braking_stops_where_it_rests():
    """A command that turned back (the MPC reversed) while the arm still runs the other way: the
    hold brakes the arm to rest from its measured state and holds there; the command's end, 0.4
    rad behind it, is no limit to stop at (CI: the hold drove shoulder_pan 0.43 rad back to it)."""
    follower = TrajectoryFollower(NAMES, np.array([-0.2, -0.3, 0.4]))
    follower.start(0.0, [(0.5, {"a": 0.2})], np.zeros(3))  # turned back toward +0.2
    speed = np.array([-1.0, 0.0, 0.0])  # the arm still runs toward -inf
    follower.stop(0.02, np.array([-0.22, -0.3, 0.4]), BRAKING, speed)
    rest = -0.22 - 2 * 1.0**2 / (3 * LIMIT)
    track = np.array([follower.target(t)[0] for t in np.arange(0.02, 1.0, BRAKING_SAMPLE)])
    assert (np.diff(track) <= 1e-12).all()  # never turns toward the old end
    assert follower.target(9.0)[0] == pytest.approx(rest)
