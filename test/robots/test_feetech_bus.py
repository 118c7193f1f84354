"""FeetechBus against the servo emulator over a real pseudo-terminal, faults included.

The emulator runs on a manual clock, so joint motion is exact; bus deadlines use real time.
"""

import errno
import subprocess
import sys
import threading
import time

import pytest
import serial

from lang2policy.errors import InvalidCommandError
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.bus_errors import PortError, ServoError, ServoTimeout
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.protocol import Address, ErrorBit, encode_u16
from lang2policy.robots.feetech.servo_plant import KinematicPlant

pytestmark = pytest.mark.timeout(20)

IDS = [1, 2, 3, 4, 5, 6]
TIMEOUT = 0.1  # generous: the CI machine may be busy; the real-arm default is 20 ms
SPEED = 3000.0  # ticks/s of the kinematic plant


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def send_goals(bus: FeetechBus, goals: dict[int, int]) -> None:
    """SYNC_WRITE has no reply: a ping behind it makes sure the emulator applied it before
    the test moves the manual clock."""
    bus.write_goal_positions(goals)
    assert bus.ping(next(iter(goals)))


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def bus_emulator(clock):
    with ServoBusEmulator(IDS, plant=KinematicPlant(SPEED), clock=clock, seed=1) as emu:
        yield emu


@pytest.fixture
def bus(bus_emulator):
    with FeetechBus(bus_emulator.port, timeout=TIMEOUT, retries=2) as bus:
        yield bus


def test_ping(bus):
    assert bus.ping(1)
    assert not bus.ping(9)
    assert bus.stats.retries == 2  # the unknown id was tried 1 + 2 times
    bus.check_servos(IDS)


def test_check_servos_names_the_silent_ones(bus, bus_emulator):
    bus_emulator.silence(4)
    bus_emulator.silence(6)
    with pytest.raises(ServoTimeout, match=r"servo\(s\) 4, 6 .* did not answer PING") as info:
        bus.check_servos(IDS)
    assert info.value.servo_ids == (4, 6)


def test_goals_converge_at_the_servo_speed(bus, clock):
    bus.torque(IDS, True)
    goals = {sid: 2048 + 100 * sid for sid in IDS}
    send_goals(bus, goals)
    clock.advance(0.02)  # 60 ticks at 3000 ticks/s
    assert bus.read_positions(IDS) == {sid: min(goals[sid], 2048 + 60) for sid in IDS}
    clock.advance(1.0)
    assert bus.read_positions(IDS) == goals


def test_read_state_fields(bus, clock):
    bus.torque([1, 2], True)
    send_goals(bus, {1: 1000, 2: 2048})
    clock.advance(0.1)
    state = bus.read_state([1, 2])
    moving, still = state[1], state[2]
    assert moving.position == 2048 - 300
    assert moving.speed == -3000  # sign bit decoded
    assert moving.moving and not still.moving
    assert still.speed == 0
    assert moving.voltage == pytest.approx(7.4)
    assert moving.temperature == 30
    assert moving.load == 0.0  # the kinematic plant carries no load
    assert moving.errors == 0 and moving.error_names == ()
    clock.advance(1.0)
    assert bus.read_state([1])[1].moving is False


def test_torque_off_stops_motion(bus, clock, bus_emulator):
    bus.torque([3], True)
    send_goals(bus, {3: 4000})
    clock.advance(0.1)
    stopped_at = bus.read_positions([3])[3]
    bus.torque([3], False)
    clock.advance(1.0)
    assert bus.read_positions([3])[3] == stopped_at == 2048 + 300
    assert bus_emulator.servo(3).table[Address.TORQUE_ENABLE] == 0


def test_goal_speed_register_limits_speed(bus, clock):
    bus.torque([1], True)
    bus.write(1, Address.GOAL_SPEED, encode_u16(500))
    send_goals(bus, {1: 3000})
    clock.advance(0.1)
    assert bus.read_positions([1])[1] == 2048 + 50


def test_corrupt_reply_is_retried(bus, bus_emulator):
    bus_emulator.corrupt_next(1, servo_id=3)
    start = time.monotonic()
    assert bus.read_positions(IDS) == dict.fromkeys(IDS, 2048)
    assert time.monotonic() - start < 0.9 * TIMEOUT  # all packets came: no wait for the deadline
    stats = bus.stats
    assert (stats.corrupt, stats.retries, stats.timeouts, stats.failures) == (1, 1, 1, 0)


def test_dropped_reply_is_retried(bus, bus_emulator):
    bus_emulator.drop_next(2, servo_id=5)  # lost in the SYNC_READ and in the first READ
    assert bus.read_positions(IDS) == dict.fromkeys(IDS, 2048)
    assert (bus.stats.corrupt, bus.stats.retries, bus.stats.timeouts) == (0, 2, 2)


def test_random_faults_are_absorbed_by_retries(bus_emulator):
    bus_emulator.set_faults(drop_rate=0.1, corrupt_rate=0.2)
    with FeetechBus(bus_emulator.port, timeout=0.05, retries=5) as bus:
        for _ in range(12):
            assert bus.read_positions(IDS) == dict.fromkeys(IDS, 2048)
    assert bus.stats.retries > 0 and bus.stats.corrupt > 0 and bus.stats.failures == 0
    assert bus_emulator.stats.dropped > 0 and bus_emulator.stats.corrupted > 0


def test_silent_servo_times_out_within_the_retry_budget(bus, bus_emulator):
    bus_emulator.silence(4)
    start = time.monotonic()
    with pytest.raises(ServoTimeout, match=r"servo\(s\) 4 .* SYNC_READ\(56, 2\)") as info:
        bus.read_positions(IDS)
    elapsed = time.monotonic() - start
    assert info.value.servo_ids == (4,)
    # one SYNC_READ wait and two READ retries, each bounded by the timeout
    assert 3 * TIMEOUT * 0.95 <= elapsed < 3 * TIMEOUT + 0.5
    assert bus.stats.failures == 1
    bus_emulator.silence(4, False)
    assert bus.read_positions([4]) == {4: 2048}


def test_latency_within_the_timeout_works(bus, bus_emulator):
    bus_emulator.set_faults(latency_s=TIMEOUT / 4)
    assert bus.read_positions(IDS) == dict.fromkeys(IDS, 2048)
    assert bus.stats.retries == 0


def test_latency_beyond_the_timeout_times_out(bus_emulator):
    bus_emulator.set_faults(latency_s=0.3)
    with FeetechBus(bus_emulator.port, timeout=0.05, retries=0) as bus:
        start = time.monotonic()
        with pytest.raises(ServoTimeout) as info:
            bus.read_positions(IDS)
        assert time.monotonic() - start < 0.25
    assert info.value.servo_ids == tuple(IDS)


def test_over_temperature_reports_and_drops_torque(bus, bus_emulator, clock):
    bus.torque([2], True)
    bus_emulator.set_temperature(2, 85)
    state = bus.read_state([2])[2]
    assert state.temperature == 85
    assert state.errors & ErrorBit.OVERHEAT and "overheat" in state.error_names
    assert bus.read(2, Address.TORQUE_ENABLE, 1) == b"\x00"
    with pytest.raises(ServoError, match=r"2 \(errors: overheat\) refused torque on"):
        bus.torque([2], True)
    send_goals(bus, {2: 3000})
    clock.advance(1.0)
    assert bus.read_positions([2]) == {2: 2048}  # unloaded: the goal is not followed
    bus_emulator.set_temperature(2, 40)
    bus.torque([2], True)
    clock.advance(1.0)
    assert bus.read_positions([2]) == {2: 3000}


def test_voltage_error_bit(bus, bus_emulator):
    bus_emulator.set_voltage(1, 3.0)
    state = bus.read_state([1])[1]
    assert state.voltage == pytest.approx(3.0) and state.error_names == ("voltage",)


def test_write_waits_for_acknowledgement(bus, bus_emulator):
    bus.write(1, Address.ACCELERATION, b"\x10")
    assert bus_emulator.servo(1).table[Address.ACCELERATION] == 0x10
    bus_emulator.silence(1)
    with pytest.raises(ServoTimeout, match=r"servo\(s\) 1 .* WRITE\(41"):
        bus.write(1, Address.ACCELERATION, b"\x20")


def test_id_change_persists_only_when_unlocked(bus, bus_emulator):
    bus.write(6, Address.LOCK, b"\x00")
    bus.write(6, Address.ID, b"\x07")
    assert bus.ping(7) and not bus.ping(6)
    bus_emulator.power_cycle(7)
    assert bus.ping(7)
    bus.write(7, Address.LOCK, b"\x01")
    bus.write(7, Address.ID, b"\x08")
    assert bus.ping(8)
    bus_emulator.power_cycle(8)
    assert bus.ping(7)  # written while locked: lost at power-off


def test_bad_goal_is_rejected_before_sending(bus):
    sent = bus.stats.transactions
    for bad in (4096, -1, 12.5, True):
        with pytest.raises(InvalidCommandError, match="servo 1"):
            bus.write_goal_positions({1: bad})
    assert bus.stats.transactions == sent


def test_threads_share_the_bus(bus):
    errors = []

    def reader():
        try:
            for _ in range(30):
                assert bus.read_positions(IDS) == dict.fromkeys(IDS, 2048)
        except Exception as exc:  # reported below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not errors and bus.stats.retries == 0


def test_missing_port_is_a_clear_error():
    with pytest.raises(PortError, match=r"/dev/ttyNOPE does not exist.*powered"):
        FeetechBus("/dev/ttyNOPE").open()


def test_permission_denied_names_the_fix():
    def denied(*args, **kwargs):
        raise serial.SerialException(errno.EACCES, "could not open port /dev/ttyACM0")

    with pytest.raises(PortError, match=r"permission denied on /dev/ttyACM0.*dialout"):
        FeetechBus("/dev/ttyACM0", serial_factory=denied).open()


def test_port_in_use_and_port_lost(bus_emulator):
    with FeetechBus(bus_emulator.port, timeout=TIMEOUT) as bus:
        with pytest.raises(PortError, match="in use"):
            FeetechBus(bus_emulator.port).open()
        bus_emulator.stop()
        with pytest.raises(PortError, match="lost port"):
            bus.read_positions(IDS)


def test_emulator_runs_as_a_process():
    proc = subprocess.Popen(
        [sys.executable, "-m", "lang2policy.robots.feetech.emulator", "--ids", "1,2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = proc.stdout.readline().strip()  # bounded by the test timeout
        with FeetechBus(port, timeout=TIMEOUT) as bus:
            assert bus.ping(1) and bus.ping(2) and not bus.ping(3)
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    assert proc.returncode == 0
