"""SO-101 calibration, and SO101Robot against the servo emulator (kinematic and MuJoCo plants)."""

import math
import time

import numpy as np
import pytest
import yaml

from lang2policy.errors import ConfigError
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.bus_errors import ServoTimeout
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.servo_plant import KinematicPlant
from lang2policy.robots.so101 import Calibration, SO101Robot, guided_calibration
from lang2policy.robots.so101.calibration import JOINTS, RAD_PER_TICK, with_joint

pytestmark = pytest.mark.timeout(30)

IDS = [1, 2, 3, 4, 5, 6]
TIMEOUT = 0.1  # generous for a busy CI machine


@pytest.fixture(scope="module")
def cal() -> Calibration:
    return Calibration.load()


# -- calibration -----------------------------------------------------------------------------


def test_default_file_matches_sim_model(cal, world):
    from lang2policy.robots.sim_robot import SimRobot

    arm = world.arm
    assert cal.names == SimRobot(world).limits.names
    assert cal.servo_ids == (1, 2, 3, 4, 5, 6)
    for j, lo, hi in zip(cal.arm, arm.lower, arm.upper, strict=True):
        assert j.zero == 2048
        assert lo <= j.lower_rad < lo + RAD_PER_TICK + 1e-9
        assert hi - RAD_PER_TICK - 1e-9 < j.upper_rad <= hi
    g = cal.gripper
    assert g.ticks_to_rad(g.closed) == pytest.approx(arm.gripper_closed, abs=RAD_PER_TICK)
    assert g.ticks_to_rad(g.open) == pytest.approx(arm.gripper_open, abs=RAD_PER_TICK)


def test_save_load_round_trip(cal, tmp_path):
    changed = with_joint(cal, "elbow_flex", sign=-1, zero=2000)
    path = tmp_path / "cal.yaml"
    changed.save(path)
    assert Calibration.load(path) == changed


def test_tick_rad_conventions(cal):
    j = cal["shoulder_lift"]
    assert j.ticks_to_rad(2048) == 0.0
    assert j.ticks_to_rad(2048 + 1024) == pytest.approx(math.pi / 2)
    assert j.rad_to_ticks(0.5) == round(2048 + 0.5 / RAD_PER_TICK)
    flipped = with_joint(cal, "shoulder_lift", sign=-1)["shoulder_lift"]
    assert flipped.ticks_to_rad(2048 + 1024) == pytest.approx(-math.pi / 2)
    assert flipped.rad_to_ticks(0.5) == round(2048 - 0.5 / RAD_PER_TICK)
    for ticks in (j.range_min, 1500, 2048, 2700, j.range_max):
        assert j.rad_to_ticks(j.ticks_to_rad(ticks)) == ticks
    # Out of range: clamped, or an error naming the range.
    assert j.rad_to_ticks(10.0) == j.range_max
    assert j.rad_to_ticks(-10.0) == j.range_min
    with pytest.raises(ConfigError, match="outside the calibrated range"):
        j.rad_to_ticks(10.0, clamp=False)


def test_gripper_opening(cal):
    g = cal.gripper
    assert g.ticks_to_opening(g.closed) == 0.0
    assert g.ticks_to_opening(g.open) == 1.0
    assert g.ticks_to_opening(g.range_max) == 1.0  # clipped like World.gripper_opening
    assert g.opening_to_ticks(0.0) == g.closed
    assert g.opening_to_ticks(1.0) == g.open
    assert g.ticks_to_opening(g.opening_to_ticks(0.4)) == pytest.approx(0.4, abs=2e-3)
    # An action vector round trip: arm rad + gripper 0..1.
    action = [0.1, -0.5, 0.7, 1.2, -2.0, 0.25]
    back = cal.ticks_to_action(cal.action_to_ticks(action))
    assert np.allclose(back, action, atol=RAD_PER_TICK)


def _data(cal):
    return yaml.safe_load(yaml.safe_dump(cal.as_dict()))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["joints"].update(elbow=d["joints"]["elbow_flex"]), "unknown joint 'elbow'"),
        (lambda d: d["joints"].pop("wrist_roll"), "missing: \\['wrist_roll'\\]"),
        (lambda d: d["joints"]["elbow_flex"].update(range_min=3200), "must be below range_max"),
        (lambda d: d["joints"]["elbow_flex"].update(range_max=5000), "outside 0..4095"),
        (lambda d: d["joints"]["elbow_flex"].update(sign=2), "sign must be 1 or -1"),
        (lambda d: d["joints"]["elbow_flex"].update(id=1), "servo ids must be distinct"),
        (lambda d: d["joints"]["gripper"].pop("open"), "missing keys \\['open'\\]"),
        (lambda d: d["joints"]["gripper"].update(open=4000), "open = 4000 is outside the range"),
        (lambda d: d["joints"]["elbow_flex"].update(zero="x"), "zero must be an integer"),
    ],
)
def test_validation_errors(cal, edit, message):
    data = _data(cal)
    edit(data)
    with pytest.raises(ConfigError, match=message):
        Calibration.from_dict(data, "test.yaml")


def test_load_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        Calibration.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("joints: [1, 2")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Calibration.load(bad)


def test_guided_calibration():
    samples = {n: [1000 + 10 * i, 3000 - 5 * i, 2100] for i, n in enumerate(JOINTS)}
    zeros = dict.fromkeys(JOINTS, 2050)
    result = guided_calibration(samples, zeros, signs={"wrist_flex": -1})
    j = result["elbow_flex"]
    assert (j.range_min, j.range_max, j.zero, j.sign, j.servo_id) == (1020, 2990, 2050, 1, 3)
    assert result["wrist_flex"].sign == -1
    g = result["gripper"]
    assert (g.closed, g.open) == (g.range_min, g.range_max)
    with pytest.raises(ConfigError, match="'elbow_flex' only moved 5 ticks"):
        guided_calibration({**samples, "elbow_flex": [2000, 2005]}, zeros)
    with pytest.raises(ConfigError, match="zero tick 500 of 'shoulder_pan' is outside"):
        guided_calibration(samples, {**zeros, "shoulder_pan": 500})
    with pytest.raises(ConfigError, match="missing: \\['gripper'\\]"):
        guided_calibration({k: v for k, v in samples.items() if k != "gripper"}, zeros)


# -- SO101Robot on the emulator ---------------------------------------------------------------


def _robot(port: str, cal: Calibration) -> SO101Robot:
    return SO101Robot(port, cal, bus=FeetechBus(port, timeout=TIMEOUT))


def _drive(robot: SO101Robot, target: dict[str, float], seconds: float, period=0.02) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        robot.send_action(target)
        time.sleep(period)


def test_connect_command_disconnect_kinematic(cal):
    start = {1: 2048, 2: 1900, 3: 2300, 4: 2048, 5: 2048, 6: 2000}
    with ServoBusEmulator(IDS, plant=KinematicPlant(), positions=start) as emulator:
        # A stale goal in the register must not move the arm when torque comes on.
        emulator.servo(2).write(42, (3000).to_bytes(2, "little"))
        robot = _robot(emulator.port, cal)
        assert robot.limits.names == JOINTS
        robot.connect()
        try:
            assert all(emulator.servo(i).torque_on for i in IDS)
            obs = robot.get_observation()
            assert obs.names == JOINTS
            assert obs.position[1] == pytest.approx((1900 - 2048) * RAD_PER_TICK)
            assert obs.time == pytest.approx(time.monotonic(), abs=1.0)
            target = {**obs.as_dict(), "shoulder_pan": 0.2, "elbow_flex": 0.3, "gripper": 0.8}
            _drive(robot, target, 1.0)
            obs = robot.get_observation()
            assert obs.as_dict()["shoulder_pan"] == pytest.approx(0.2, abs=2 * RAD_PER_TICK)
            assert obs.as_dict()["elbow_flex"] == pytest.approx(0.3, abs=2 * RAD_PER_TICK)
            assert obs.as_dict()["gripper"] == pytest.approx(0.8, abs=0.01)
            assert obs.as_dict()["shoulder_lift"] == pytest.approx(
                (1900 - 2048) * RAD_PER_TICK, abs=2 * RAD_PER_TICK
            )
            diag = robot.diagnostics()
            assert diag["elbow_flex"]["temperature_c"] == 30
            assert diag["elbow_flex"]["voltage_v"] == pytest.approx(7.4)
            assert diag["elbow_flex"]["errors"] == ()
        finally:
            robot.disconnect()
        assert not any(emulator.servo(i).torque_on for i in IDS)
        assert not robot.bus.is_open


def test_silent_servo_at_connect(cal):
    with ServoBusEmulator(IDS, plant=KinematicPlant()) as emulator:
        emulator.silence(4)
        robot = _robot(emulator.port, cal)
        with pytest.raises(ServoTimeout, match=r"servo\(s\) 4 \(wrist_flex\)") as info:
            robot.connect()
        assert emulator.port in str(info.value)
        assert info.value.servo_ids == (4,)
        assert not robot.is_connected and not robot.bus.is_open


def test_bus_error_holds_then_raises(cal):
    with ServoBusEmulator(IDS, plant=KinematicPlant(max_speed=500.0)) as emulator:
        robot = _robot(emulator.port, cal)
        robot.connect()
        try:
            robot.send_action({**robot.get_observation().as_dict(), "shoulder_pan": 0.3})
            emulator.silence(3)
            with pytest.raises(ServoTimeout) as info:
                robot.get_observation()
            assert any("hold" in note for note in info.value.__notes__)
            # The other servos were told to hold at their last read position (the ping makes
            # sure the emulator has applied that SYNC_WRITE, which has no reply).
            assert robot.bus.ping(1)
            held = int.from_bytes(emulator.servo(1).read(42, 2), "little")
            assert held == robot.servo_states[1].position
            assert emulator.servo(1).torque_on
        finally:
            emulator.silence(3, False)
            robot.disconnect()


def test_mujoco_plant_moves_the_simulated_joint(cal):
    from lang2policy.robots.so101.mujoco_plant import MujocoPlant
    from lang2policy.scene.world import World

    world = World("so101")  # its own: torque off zeroes actuator gains in the model

    plant = MujocoPlant(world, cal, set_initial_pose=False)
    with ServoBusEmulator(IDS, plant=plant, positions=plant.present_ticks()) as emulator:
        robot = _robot(emulator.port, cal)
        robot.connect()
        try:
            start = robot.get_observation().as_dict()
            with plant.lock:
                assert np.allclose([start[n] for n in JOINTS[:-1]], world.arm_qpos(), atol=0.05)
            target = {**start, "shoulder_pan": start["shoulder_pan"] + 0.4, "gripper": 0.3}
            target["elbow_flex"] = start["elbow_flex"] - 0.3
            _drive(robot, target, 1.5)
            with plant.lock:
                qpos = world.arm_qpos()
                opening = world.gripper_opening()
            assert qpos[0] == pytest.approx(target["shoulder_pan"], abs=0.03)
            assert qpos[2] == pytest.approx(target["elbow_flex"], abs=0.05)
            assert opening == pytest.approx(0.3, abs=0.05)
            obs = robot.get_observation().as_dict()
            assert obs["shoulder_pan"] == pytest.approx(qpos[0], abs=2 * RAD_PER_TICK)
        finally:
            robot.disconnect()
        assert not any(emulator.servo(i).torque_on for i in IDS)
        assert not world.model.actuator_gainprm[world.arm.actuator_ids, 0].any()  # limp
        plant.restore_actuators()
        assert world.model.actuator_gainprm[world.arm.actuator_ids, 0].all()
