"""The leader arm reader against the servo emulator over a real pseudo-terminal: positions read
and mapped, only read instructions on the wire (writes refused before a byte leaves), and
corrupt, silent or impossible readings reported as faults (the node holds on them)."""

import math
import threading

import pytest

from lang2policy.robots.feetech.bus_errors import ServoTimeout
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.protocol import Address, Instruction, encode_signed, write_packet
from lang2policy.robots.feetech.servo_plant import KinematicPlant
from lang2policy.robots.so101.calibration import Calibration
from lang2policy.teleop import LeaderArm, LeaderFault, WriteRefused, read_only_bus

pytestmark = pytest.mark.timeout(30)

IDS = (1, 2, 3, 4, 5, 6)
TIMEOUT = 0.1  # s per reply: generous on a busy CI machine
START = {1: 2048, 2: 2048, 3: 2048, 4: 2048, 5: 2048, 6: 2000}


class HandPlant(KinematicPlant):
    """The leader's joints, moved by a person's hand (torque off: nothing else moves them)."""

    def move_by_hand(self, joint: int, ticks: float) -> None:
        self._pos[joint] = float(ticks)


@pytest.fixture
def plant():
    return HandPlant()


@pytest.fixture
def emulator(plant):
    with ServoBusEmulator(IDS, plant=plant, positions=START, seed=3) as emu:
        seen: list[int] = []
        lock = threading.Lock()
        handle = emu.chain.handle

        def record(packet):  # every instruction that reached the servos
            with lock:
                seen.append(packet.instruction)
            return handle(packet)

        emu.chain.handle = record
        emu.seen = seen
        yield emu


@pytest.fixture
def leader(emulator):
    arm = LeaderArm(read_only_bus(emulator.port, timeout=TIMEOUT), Calibration.load())
    arm.connect()
    yield arm
    arm.close()


def test_the_leader_posture_is_read_as_follower_joint_targets(leader, plant, emulator):
    first = leader.read()
    assert first.ticks == START
    assert first.target[:5].tolist() == pytest.approx([0.0] * 5)
    plant.move_by_hand(0, 2048 + 512)  # joint 0 is servo 1, shoulder_pan: 512 ticks = pi/4
    plant.move_by_hand(4, 2048 - 1024)  # wrist_roll a quarter turn back
    plant.move_by_hand(5, 2830)  # the gripper at its open tick
    moved = leader.read()
    assert moved.names == Calibration.load().names
    assert moved.ticks == {**START, 1: 2560, 5: 1024, 6: 2830}
    assert moved.target.tolist() == pytest.approx([math.pi / 4, 0, 0, 0, -math.pi / 2, 1.0])


def test_only_read_instructions_ever_reach_the_leaders_servos(leader, emulator):
    for _ in range(5):
        leader.read()
    bus = leader.bus
    with pytest.raises(WriteRefused, match="SYNC_WRITE"):
        bus.write_goal_positions({1: 100})
    with pytest.raises(WriteRefused, match="SYNC_WRITE"):
        bus.torque(IDS, True)
    with pytest.raises(WriteRefused, match="WRITE packet to servo 1"):
        bus.write(1, Address.ID, b"\x09")
    with pytest.raises(WriteRefused, match="WRITE packet to servo 3"):
        bus.write(3, Address.GOAL_POSITION, b"\x00\x04", ack=False)
    leader.read()  # still works after the refusals
    allowed = {Instruction.PING, Instruction.READ, Instruction.SYNC_READ}
    assert emulator.seen and set(emulator.seen) <= allowed
    assert Instruction.SYNC_READ in emulator.seen
    for servo_id in IDS:
        servo = emulator.servo(servo_id)
        assert not servo.torque_on
        assert servo.servo_id == servo_id


def test_corrupt_replies_are_retried_and_a_silent_servo_is_a_timeout(leader, emulator):
    emulator.corrupt_next(2, servo_id=3)
    reading = leader.read()  # checksums caught, the servo re-read: the reading is good
    assert reading.ticks[3] == 2048
    assert leader.bus.stats.corrupt >= 1
    emulator.silence(4)
    with pytest.raises(ServoTimeout, match=r"servo\(s\) 4 .* did not answer"):
        leader.read()
    emulator.silence(4, False)
    assert leader.read().ticks[4] == 2048


def test_an_impossible_reading_is_a_fault(leader, plant):
    plant.move_by_hand(0, 3299 + 300)  # beyond shoulder_pan's range and its margin
    with pytest.raises(LeaderFault, match=r"shoulder_pan \(servo 1\) reads tick 3599"):
        leader.read()


def test_a_leader_with_torque_on_is_refused_at_connect(emulator):
    emulator.servo(2).write(Address.TORQUE_ENABLE, b"\x01")  # as if used as a follower before
    arm = LeaderArm(read_only_bus(emulator.port, timeout=TIMEOUT), Calibration.load())
    with pytest.raises(LeaderFault, match=r"\['shoulder_lift'\] have their torque on"):
        arm.connect()
    assert not arm.bus.is_open


def test_a_negative_sign_magnitude_position_is_a_fault(leader, emulator):
    servo = emulator.servo(5)
    original = servo.read

    def negative(address, length):  # a multi-turn (sign bit) reading a leader never gives
        data = original(address, length)
        if address == Address.PRESENT_POSITION:
            return encode_signed(-12, 15) + data[2:]
        return data

    servo.read = negative
    with pytest.raises(LeaderFault, match=r"wrist_roll \(servo 5\) reads -12"):
        leader.read()


def test_the_port_itself_refuses_writes_that_bypass_the_bus(leader, emulator):
    """The second layer: bytes written straight to the bus's port object."""
    port = leader.bus._serial
    before = len(emulator.seen)
    with pytest.raises(WriteRefused, match="WRITE packet to servo 2"):
        port.write(write_packet(2, Address.TORQUE_ENABLE, b"\x01"))
    assert not hasattr(port, "writelines") and not hasattr(port, "send_break")
    leader.read()
    assert emulator.seen[before:] == [Instruction.SYNC_READ]
    assert not emulator.servo(2).torque_on
