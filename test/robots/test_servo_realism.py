"""The emulated STS3215 servos' imperfections (issue 34): deadband, backlash, position-loop lag,
command latency, reading noise and gripper slip, seen by the real ``FeetechBus`` over the
emulator's pty; the ``off`` profile is today's emulator byte for byte; bad values are refused.

The emulator runs on a manual clock (motion is exact); each request advances it, so the
helpers below poll the bus every ``STEP`` seconds of emulator time.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import pytest

from lang2policy.realism import ServoRealism, load_realism
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.emulator import main as emulator_main
from lang2policy.robots.feetech.protocol import (
    Address,
    InstructionParser,
    encode_u16,
    ping_packet,
    read_packet,
    sync_read_packet,
    sync_write_packet,
    write_packet,
)
from lang2policy.robots.feetech.realistic_plant import RealisticPlant
from lang2policy.robots.feetech.servo_plant import KinematicPlant
from lang2policy.robots.feetech.servo_realism import SLIP_OPEN_TICKS, GripperSlip, stream

pytestmark = pytest.mark.timeout(30)

IDS = [1, 2, 3]
START = 2048
STEP = 0.005  # s of emulator time between polls
TIMEOUT = 0.1


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def arm(
    realism: ServoRealism | None, *, seed: int = 0, plant=None, **kwargs
) -> Iterator[tuple[ServoBusEmulator, FeetechBus, ManualClock]]:
    """An emulator with ``realism`` on a manual clock, the real bus on its pty, torque on."""
    clock = ManualClock()
    plant = plant if plant is not None else KinematicPlant(3000.0)
    emulator = ServoBusEmulator(IDS, plant=plant, clock=clock, seed=seed, realism=realism, **kwargs)
    with emulator, FeetechBus(emulator.port, timeout=TIMEOUT, retries=2) as bus:
        bus.torque(IDS, True)
        yield emulator, bus, clock


def goal(bus: FeetechBus, goals: dict[int, int]) -> None:
    """SYNC_WRITE has no reply: the ping behind it makes sure it was applied."""
    bus.write_goal_positions(goals)
    assert bus.ping(next(iter(goals)))


def run(bus: FeetechBus, clock: ManualClock, seconds: float) -> None:
    """Let ``seconds`` of emulator time pass, the bus polling every ``STEP``."""
    for _ in range(round(seconds / STEP)):
        clock.now += STEP
        assert bus.ping(IDS[0])


def shaft(emulator: ServoBusEmulator, servo_id: int) -> float:
    """Where the shaft really is (no reading noise; an ideal emulator has no wrapper)."""
    plant = emulator.plant
    return getattr(plant, "true_position", plant.position)(IDS.index(servo_id))


# -- off: today's emulator -----------------------------------------------------------------------


def _script(emulator: ServoBusEmulator, clock: ManualClock) -> list[bytes]:
    """Every reply of the chain to a fixed request script (moves, speeds, torque, power cycle)."""
    state = (Address.PRESENT_POSITION, 11)
    packets = [
        ping_packet(1),
        write_packet(1, Address.TORQUE_ENABLE, b"\x01"),
        write_packet(2, Address.TORQUE_ENABLE, b"\x01"),
        sync_write_packet(Address.GOAL_POSITION, {1: encode_u16(2600), 2: encode_u16(1500)}),
        write_packet(2, Address.GOAL_SPEED, encode_u16(700)),
        sync_read_packet(*state, [1, 2, 3]),
        sync_write_packet(Address.GOAL_POSITION, {1: encode_u16(2000), 2: encode_u16(2100)}),
        read_packet(1, *state),
        write_packet(1, Address.TORQUE_ENABLE, b"\x00"),
        sync_read_packet(*state, [1, 2, 3]),
    ]
    replies = []
    for packet in packets * 3:
        clock.now += 0.013
        (parsed,) = InstructionParser().feed(packet)
        replies += [raw for _, raw in emulator.chain.handle(parsed)]
    emulator.power_cycle(2)
    (parsed,) = InstructionParser().feed(sync_read_packet(*state, [1, 2, 3]))
    return [*replies, *(raw for _, raw in emulator.chain.handle(parsed))]


@pytest.mark.parametrize("off", [ServoRealism(), load_realism("off").servo])
def test_off_is_todays_emulator_byte_for_byte(off):
    answers = []
    for realism in (None, off):
        clock = ManualClock()
        emulator = ServoBusEmulator(IDS, plant=KinematicPlant(), clock=clock, realism=realism)
        assert type(emulator.plant) is KinematicPlant  # nothing put in front of the plant
        answers.append(_script(emulator, clock))
    assert answers[0] == answers[1]
    assert len(answers[0]) > 30 and len(set(answers[0])) > 10  # the script did move the arm


# -- deadband ------------------------------------------------------------------------------------


def test_deadband_keeps_a_small_goal_and_pursues_a_large_one():
    with arm(ServoRealism(deadband_ticks=5)) as (emulator, bus, clock):
        for small in (START + 5, START - 3, START + 1):
            goal(bus, {1: small})
            run(bus, clock, 0.1)
            assert bus.read_positions([1])[1] == START  # not pursued: the shaft stays
            assert shaft(emulator, 1) == START
        goal(bus, {1: START + 6})
        run(bus, clock, 0.1)
        assert bus.read_positions([1])[1] == START + 6
        goal(bus, {1: START + 400})
        run(bus, clock, 0.3)
        assert bus.read_positions([1])[1] == START + 400
    with arm(ServoRealism(backlash_ticks=0.0, read_noise_ticks=0.0)) as (_, bus, clock):
        goal(bus, {1: START + 3})  # the same small goal without a deadband: pursued
        run(bus, clock, 0.1)
        assert bus.read_positions([1])[1] == START + 3


# -- backlash ------------------------------------------------------------------------------------


def test_backlash_loses_the_play_after_a_reversal():
    play = 20
    with arm(ServoRealism(backlash_ticks=play)) as (_, bus, clock):
        positions = [bus.read_positions([1])[1]]
        for target in (START + 500, START + 1000, START + 500, START):
            goal(bus, {1: target})
            run(bus, clock, 0.3)
            positions.append(bus.read_positions([1])[1])
        travel = [b - a for a, b in itertools.pairwise(positions)]
        # The first move takes up half the play; on in the same direction: the full 500;
        # the reversal turns the motor through the whole play before the shaft follows.
        assert travel == [500 - play // 2, 500, -(500 - play), -500]
        assert positions[-1] == START + play // 2  # at rest short of the goal, from above


# -- position-loop response and latency ----------------------------------------------------------


def test_response_is_a_first_order_lag_not_a_jump():
    tau, step = 0.1, 200
    with arm(ServoRealism(response_s=tau)) as (_, bus, clock):
        goal(bus, {1: START + step})
        seen = []
        for _ in range(5):
            run(bus, clock, tau / 5)
            seen.append(bus.read_state([1])[1])
        # 200 ticks at 3000 ticks/s would take 67 ms; the lag reaches 1 - 1/e after tau.
        expected = step * (1 - math.exp(-1))
        assert seen[-1].position - START == pytest.approx(expected, abs=4)
        assert all(s.moving and s.speed > 0 for s in seen)  # moving all along
        assert [s.position for s in seen] == sorted(s.position for s in seen)
        run(bus, clock, 6 * tau)
        assert bus.read_positions([1])[1] == START + step


def test_latency_delays_the_start_of_motion():
    latency = 0.05
    with arm(ServoRealism(latency_s=latency)) as (emulator, bus, clock):
        goal(bus, {1: START + 300})
        run(bus, clock, latency - 2 * STEP)
        assert shaft(emulator, 1) == START  # not acting yet
        run(bus, clock, 2 * STEP + 0.01)
        assert shaft(emulator, 1) == pytest.approx(START + 0.01 * 3000, abs=1)  # then at speed
        run(bus, clock, 0.1)
        assert bus.read_positions([1])[1] == START + 300


# -- reading noise -------------------------------------------------------------------------------


def _reads(seed: int, count: int = 300) -> tuple[list[int], float]:
    with arm(ServoRealism(read_noise_ticks=4.0), seed=seed) as (emulator, bus, _):
        reads = [bus.read_positions([1, 2]) for _ in range(count)]
        return [r[1] for r in reads] + [r[2] for r in reads], shaft(emulator, 1)


def test_reading_noise_has_its_spread_and_is_seeded():
    reads, true = _reads(seed=7)
    assert true == START  # the reads are noisy, the shaft still
    assert statistics.mean(reads) == pytest.approx(START, abs=0.6)
    assert statistics.stdev(reads) == pytest.approx(4.0, rel=0.12)
    assert _reads(seed=7)[0] == reads  # the same seed: the same reads
    assert _reads(seed=8)[0] != reads


# -- gripper slip --------------------------------------------------------------------------------


class ObjectInTheJaw(KinematicPlant):
    """Joint 2 (the gripper) closes on an object at tick 1800: it cannot go below it."""

    def advance(self, now: float) -> None:
        super().advance(now)
        if self._pos[2] < 1800:
            self._pos[2], self._vel[2] = 1800.0, 0.0


def _grasp(chance: float, seed: int = 0) -> list[float]:
    """The jaw's true positions every 20 ms through one grasp (close on the object, hold)."""
    realism = ServoRealism(gripper_slip=chance)
    with arm(realism, seed=seed, plant=ObjectInTheJaw(), gripper_id=3) as (emulator, bus, clock):
        goal(bus, {3: 1500})
        trace = []
        for _ in range(60):
            run(bus, clock, 0.02)
            trace.append(shaft(emulator, 3))
        return trace


def test_a_slipping_grasp_eases_the_jaw_open_for_a_moment():
    held = _grasp(0.0)
    assert held[10:] == [1800.0] * 50  # closed on the object and held
    slipped = _grasp(1.0)[10:]  # from 0.22 s: closed on the object
    assert max(slipped) == pytest.approx(1800 + SLIP_OPEN_TICKS, abs=1)  # eased open ...
    assert slipped[-1] == 1800.0  # ... then closed on it again
    opened = [i for i, p in enumerate(slipped) if p > 1801]
    assert 0.5 <= (opened[0] + 11) * 0.02 <= 0.8  # STALL_S + SLIP_DELAY_S into the grasp
    assert len(opened) * 0.02 == pytest.approx(0.2 + 0.04, abs=0.05)  # SLIP_S, and the way back


def test_slip_draws_are_once_per_grasp_and_seeded():
    def draws(seed: int) -> list[bool]:
        slip = GripperSlip(0.5, stream(seed, 5, "slip"))
        slipped, now = [], 0.0
        for grasp in range(40):
            slip.command(1000.0 if grasp % 2 else 2000.0, 1500.0)
            before = slip.slips
            for _ in range(100):  # 1 s stalled on an object at 1600
                now += 0.01
                target = slip.step(now, 1500.0, 1600.0, 0.0)
            assert target is None  # the slip (if any) is over: the grip is back
            slipped.append(slip.slips - before)
        assert set(slipped) <= {0, 1}  # at most one slip per grasp
        return [bool(n) for n in slipped]

    first = draws(3)
    assert first == draws(3)
    assert first != draws(4)
    assert 8 <= sum(first) <= 32


# -- refused values, the CLI ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"deadband_ticks": -1.0},
        {"backlash_ticks": math.nan},
        {"response_s": math.inf},
        {"latency_s": -0.01},
        {"read_noise_ticks": "2"},
        {"gripper_slip": 1.5},
        {"gripper_slip": True},
    ],
)
def test_bad_values_are_refused(bad):
    (name,) = bad
    with pytest.raises(ValueError, match=name):
        ServoBusEmulator(IDS, realism=replace(ServoRealism(), **bad))
    with pytest.raises(ValueError, match=name):
        RealisticPlant(KinematicPlant(), replace(ServoRealism(), **bad))


def test_gripper_id_must_be_a_servo():
    with pytest.raises(ValueError, match="gripper_id 9"):
        ServoBusEmulator(IDS, realism=ServoRealism(gripper_slip=0.1), gripper_id=9)


def test_cli_refuses_an_unknown_level(capsys):
    with pytest.raises(SystemExit) as exit_info:
        emulator_main(["--realism", "harsh"])
    assert exit_info.value.code == 2
    assert "allowed: off, mild, hard" in capsys.readouterr().err


def test_cli_serves_imperfect_servos():
    command = [sys.executable, "-m", "lang2policy.robots.feetech.emulator", "--ids", "1,2"]
    process = subprocess.Popen(
        [*command, "--realism", "hard", "--seed", "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        port = process.stdout.readline().strip()
        with FeetechBus(port, timeout=0.2, retries=2) as bus:
            reads = {bus.read_positions([1, 2])[1] for _ in range(40)}
        assert len(reads) > 1  # the hard profile's reading noise
    finally:
        process.terminate()
        process.wait(timeout=10)


# -- MuJoCo and the ROS node ---------------------------------------------------------------------


def test_mujoco_plant_through_the_hard_profile():
    from lang2policy.robots.so101.calibration import Calibration
    from lang2policy.robots.so101.mujoco_plant import MujocoPlant
    from lang2policy.scene.world import World

    calibration = Calibration.load(None)
    plant = MujocoPlant(World("so101"), calibration, set_initial_pose=False)
    assert plant.gripper_joint == calibration.servo_ids.index(6)
    clock = ManualClock()
    ids = list(calibration.servo_ids)
    emulator = ServoBusEmulator(
        ids,
        plant=plant,
        clock=clock,
        positions=plant.present_ticks(),
        realism=load_realism("hard").servo,
    )
    assert isinstance(emulator.plant, RealisticPlant) and emulator.plant.slip is not None
    with emulator, FeetechBus(emulator.port, timeout=TIMEOUT, retries=2) as bus:
        start = bus.read_positions([1])[1]
        bus.torque(ids, True)
        goal(bus, {1: start + 300})
        for _ in range(150):
            clock.now += 0.01
            assert bus.ping(1)
        # the shaft got there, within the play and the deadband of the hard profile
        assert emulator.plant.true_position(0) == pytest.approx(start + 300, abs=12)


@pytest.mark.ros
def test_ros_node_reads_the_realism_parameter(tmp_path):
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter

    from lang2policy.errors import ConfigError
    from lang2policy.ros.so101_emulator_node import SO101EmulatorNode

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        for value, expected in (("mild", load_realism("mild").servo), (False, None)):
            overrides = [
                Parameter("link", value=str(tmp_path / "so101")),
                Parameter("realism", value=value),
            ]
            node = SO101EmulatorNode(context=context, parameter_overrides=overrides)
            try:
                plant = node.emulator.plant
                if expected is None:  # a bare off on the command line is YAML for false
                    assert plant is node.plant
                else:
                    assert isinstance(plant, RealisticPlant) and plant.realism == expected
            finally:
                node.destroy_node()
        overrides = [
            Parameter("link", value=str(tmp_path / "so101")),
            Parameter("realism", value="harsh"),
        ]
        with pytest.raises(ConfigError, match="allowed: off, mild, hard"):
            SO101EmulatorNode(context=context, parameter_overrides=overrides)
    finally:
        rclpy.shutdown(context=context)
