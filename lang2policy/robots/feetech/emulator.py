"""A Feetech STS3215 servo-chain emulator on a pseudo-terminal, with injectable faults.

``ServoBusEmulator`` opens a pty and answers the protocol in a thread like a chain of STS3215
servos, so ``FeetechBus`` (or any Feetech client) can be tested without an arm. Joint motion
comes from a *plant*; ``KinematicPlant`` (shipped here) moves each joint straight to its goal at a
bounded speed. A MuJoCo-backed plant only has to implement ``ServoPlant``.

Faults, changeable at run time and deterministic under a seed: dropped and corrupted replies
(a rate, or the next N), latency, a silent servo (as if unplugged), over-temperature (sets the
overheat bit and drops torque) and out-of-range voltage.

Run as a process: ``python -m lang2policy.robots.feetech.emulator --ids 1,2,3,4,5,6`` prints the
pty path and serves until interrupted.

Emulator assumptions (check on a real arm): torque is off at power-up; ``Lock`` is 1 at power-up
and EEPROM writes (addresses < 40) take effect at once but survive ``power_cycle`` only when
written with ``Lock`` 0; the goal register keeps its value while torque is off, so enabling
torque drives to it (write goal = present first); REG_WRITE/ACTION, goal time and acceleration
are stored but not acted on.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import select
import signal
import sys
import threading
import time
import tty
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Protocol

from lang2policy import cli_types
from lang2policy.robots.feetech.protocol import (
    BROADCAST_ID,
    CENTER_TICK,
    EEPROM_END,
    LOAD_FULL_SCALE,
    LOAD_SIGN_BIT,
    MAX_TICK,
    SPEED_SIGN_BIT,
    STS3215_MODEL_NUMBER,
    Address,
    ErrorBit,
    Instruction,
    InstructionPacket,
    InstructionParser,
    ProtocolError,
    decode_signed,
    decode_sync_read,
    decode_sync_write,
    encode_signed,
    encode_status,
)

TABLE_SIZE = 256
_READ_ONLY = frozenset(range(0, 5)) | frozenset(range(Address.PRESENT_POSITION, TABLE_SIZE))


class ServoPlant(Protocol):
    """What moves the joints. Joints are indexed 0..n-1 in chain order (ids can be rewritten)."""

    def add_joint(self, joint: int, position: float) -> None: ...

    def set_goal(self, joint: int, ticks: float, speed: float) -> None:
        """Drive towards ``ticks`` at ``speed`` ticks/s (0: as fast as the joint can)."""

    def set_torque(self, joint: int, on: bool) -> None: ...

    def advance(self, now: float) -> None:
        """Bring the simulation up to time ``now`` (seconds, the emulator's clock)."""

    def position(self, joint: int) -> float: ...

    def velocity(self, joint: int) -> float: ...

    def load(self, joint: int) -> float:
        """Signed fraction of the maximum torque."""


class KinematicPlant:
    """Joints that go straight to their goal at a bounded speed: no inertia, gravity or load.

    A stand-in until the MuJoCo-backed plant exists; with torque off a joint stays where it is.
    """

    def __init__(self, max_speed: float = 3000.0) -> None:
        self.max_speed = max_speed  # ticks/s; an STS3215 at 7.4 V does about 3000
        self._pos: dict[int, float] = {}
        self._goal: dict[int, float] = {}
        self._speed: dict[int, float] = {}
        self._vel: dict[int, float] = {}
        self._torque: dict[int, bool] = {}
        self._time: float | None = None

    def add_joint(self, joint: int, position: float) -> None:
        self._pos[joint] = self._goal[joint] = float(position)
        self._speed[joint], self._vel[joint], self._torque[joint] = 0.0, 0.0, False

    def set_goal(self, joint: int, ticks: float, speed: float) -> None:
        self._goal[joint] = float(ticks)
        self._speed[joint] = float(speed)

    def set_torque(self, joint: int, on: bool) -> None:
        self._torque[joint] = on

    def advance(self, now: float) -> None:
        dt = 0.0 if self._time is None else now - self._time
        self._time = now if self._time is None else max(now, self._time)
        if dt <= 0:
            return
        for joint in self._pos:
            error = self._goal[joint] - self._pos[joint]
            speed = min(self._speed[joint] or self.max_speed, self.max_speed)
            step = min(abs(error), speed * dt) if self._torque[joint] else 0.0
            self._pos[joint] += math.copysign(step, error)
            moving = step < abs(error)  # the velocity now, not the mean over a long step
            self._vel[joint] = math.copysign(speed, error) if moving else 0.0

    def position(self, joint: int) -> float:
        return self._pos[joint]

    def velocity(self, joint: int) -> float:
        return self._vel[joint]

    def load(self, joint: int) -> float:
        return 0.0


def _u16(table: bytearray, address: int) -> int:
    return int.from_bytes(table[address : address + 2], "little")


def _put_u16(table: bytearray, address: int, value: int) -> None:
    table[address : address + 2] = int(value).to_bytes(2, "little")


class EmulatedServo:
    """One STS3215: control table, error bits, and the link from its registers to the plant."""

    def __init__(
        self, servo_id: int, joint: int, plant: ServoPlant, position: int, voltage: float
    ) -> None:
        self.joint = joint
        self.plant = plant
        self.table = bytearray(TABLE_SIZE)
        self.temperature = 30
        self.voltage = voltage
        self.silent = False
        self._factory_defaults(servo_id)
        self.flash = bytes(self.table[:EEPROM_END])
        self._power_up(position)

    @property
    def servo_id(self) -> int:
        return self.table[Address.ID]

    @property
    def torque_on(self) -> bool:
        return self.table[Address.TORQUE_ENABLE] == 1

    def error_bits(self) -> int:
        bits = 0
        if self.temperature > self.table[Address.MAX_TEMPERATURE]:
            bits |= ErrorBit.OVERHEAT
        volts = round(self.voltage * 10)
        if not self.table[Address.MIN_VOLTAGE] <= volts <= self.table[Address.MAX_VOLTAGE]:
            bits |= ErrorBit.VOLTAGE
        return int(bits)

    def refresh(self) -> None:
        """Copy the plant's state into the present-value registers; overheat drops torque."""
        if self.error_bits() & ErrorBit.OVERHEAT and self.torque_on:
            self._set_torque(False)
        t = self.table
        position = min(max(round(self.plant.position(self.joint)), 0), MAX_TICK)
        speed = round(self.plant.velocity(self.joint))
        load = round(self.plant.load(self.joint) * LOAD_FULL_SCALE)
        _put_u16(t, Address.PRESENT_POSITION, position)
        t[Address.PRESENT_SPEED : Address.PRESENT_SPEED + 2] = encode_signed(speed, SPEED_SIGN_BIT)
        t[Address.PRESENT_LOAD : Address.PRESENT_LOAD + 2] = encode_signed(
            max(-LOAD_FULL_SCALE, min(LOAD_FULL_SCALE, load)), LOAD_SIGN_BIT
        )
        t[Address.PRESENT_VOLTAGE] = min(max(round(self.voltage * 10), 0), 255)
        t[Address.PRESENT_TEMPERATURE] = min(max(self.temperature, 0), 255)
        t[Address.STATUS] = self.error_bits()
        t[Address.MOVING] = int(abs(speed) > 0)

    def read(self, address: int, length: int) -> bytes:
        self.refresh()
        data = bytes(self.table[address : address + length])
        return data + bytes(length - len(data))

    def write(self, address: int, data: bytes) -> None:
        for offset, value in enumerate(data):
            a = address + offset
            if a >= TABLE_SIZE or a in _READ_ONLY:
                continue
            self.table[a] = value
            if a < EEPROM_END and self.table[Address.LOCK] == 0:
                self.flash = self.flash[:a] + bytes((value,)) + self.flash[a + 1 :]
        touched = set(range(address, address + len(data)))
        if Address.TORQUE_ENABLE in touched:
            self._set_torque(self.table[Address.TORQUE_ENABLE] == 1)
        if touched & {Address.GOAL_POSITION, Address.GOAL_POSITION + 1, Address.GOAL_SPEED}:
            self._send_goal()

    def power_cycle(self) -> None:
        """Reload EEPROM from flash and reset RAM, as after switching the supply off and on."""
        position = round(self.plant.position(self.joint))
        self.table[:EEPROM_END] = self.flash
        self.table[EEPROM_END:] = bytes(TABLE_SIZE - EEPROM_END)
        self._power_up(position)

    def _factory_defaults(self, servo_id: int) -> None:
        t = self.table
        t[Address.FIRMWARE_MAJOR], t[Address.FIRMWARE_MINOR] = 3, 10
        _put_u16(t, Address.MODEL_NUMBER, STS3215_MODEL_NUMBER)
        t[Address.ID], t[Address.BAUD_RATE], t[Address.RESPONSE_LEVEL] = servo_id, 0, 1
        _put_u16(t, Address.MIN_ANGLE_LIMIT, 0)
        _put_u16(t, Address.MAX_ANGLE_LIMIT, MAX_TICK)
        t[Address.MAX_TEMPERATURE], t[Address.MAX_VOLTAGE], t[Address.MIN_VOLTAGE] = 70, 140, 40
        _put_u16(t, Address.MAX_TORQUE, 1000)

    def _power_up(self, position: int) -> None:
        t = self.table
        position = min(max(position, 0), MAX_TICK)
        _put_u16(t, Address.GOAL_POSITION, position)
        _put_u16(t, Address.TORQUE_LIMIT, _u16(t, Address.MAX_TORQUE))
        t[Address.LOCK] = 1
        self.plant.set_torque(self.joint, False)
        self.plant.set_goal(self.joint, position, 0.0)
        self.refresh()

    def _set_torque(self, on: bool) -> None:
        if on and self.error_bits() & ErrorBit.OVERHEAT:
            on = False  # an overheated servo stays unloaded until it has cooled down
        self.table[Address.TORQUE_ENABLE] = int(on)
        self.plant.set_torque(self.joint, on)
        if on:
            self._send_goal()

    def _send_goal(self) -> None:
        goal = _u16(self.table, Address.GOAL_POSITION) & 0x7FFF
        low, high = (
            _u16(self.table, Address.MIN_ANGLE_LIMIT),
            _u16(self.table, Address.MAX_ANGLE_LIMIT),
        )
        if low < high:
            goal = min(max(goal, low), high)
        speed = abs(
            decode_signed(self.table[Address.GOAL_SPEED : Address.GOAL_SPEED + 2], SPEED_SIGN_BIT)
        )
        self.plant.set_goal(self.joint, goal, float(speed))


class ServoChain:
    """Servos on one bus answering instruction packets; no I/O, no faults."""

    def __init__(
        self,
        servo_ids: Sequence[int],
        *,
        plant: ServoPlant | None = None,
        clock: Callable[[], float] = time.monotonic,
        positions: Mapping[int, int] | None = None,
        voltage: float = 7.4,
    ) -> None:
        if len(set(servo_ids)) != len(servo_ids) or not servo_ids:
            raise ValueError(f"servo ids must be distinct and not empty, got {list(servo_ids)}")
        self.plant = plant if plant is not None else KinematicPlant()
        self.clock = clock
        self._servos: list[EmulatedServo] = []
        for joint, sid in enumerate(servo_ids):
            position = (positions or {}).get(sid, CENTER_TICK)
            self.plant.add_joint(joint, position)
            self._servos.append(EmulatedServo(sid, joint, self.plant, position, voltage))

    def servo(self, servo_id: int) -> EmulatedServo:
        for s in self._servos:
            if s.servo_id == servo_id:
                return s
        raise KeyError(f"no servo {servo_id}; ids: {[s.servo_id for s in self._servos]}")

    def handle(self, packet: InstructionPacket) -> list[tuple[int, bytes]]:
        """Answer one instruction: [(servo id, status packet bytes), ...] in bus order."""
        self.plant.advance(self.clock())
        try:
            return self._dispatch(packet)
        except ProtocolError:
            return []  # a malformed request is ignored, as a servo would

    def _answering(self, servo_id: int) -> EmulatedServo | None:
        for s in self._servos:
            if s.servo_id == servo_id and not s.silent:
                return s
        return None

    def _dispatch(self, packet: InstructionPacket) -> list[tuple[int, bytes]]:
        code, params = packet.instruction, packet.params
        if code == Instruction.SYNC_READ:
            address, length, ids = decode_sync_read(params)
            return [self._reply(s, s.read(address, length)) for s in self._each(ids)]
        if code == Instruction.SYNC_WRITE:
            address, data_by_id = decode_sync_write(params)
            for servo in self._each(data_by_id):
                self._write(servo, address, data_by_id[servo.servo_id])
            return []
        targets = (
            [s for s in self._servos if not s.silent]
            if packet.servo_id == BROADCAST_ID
            else list(self._each([packet.servo_id]))
        )
        replies = [r for s in targets if (r := self._single(s, code, params)) is not None]
        return [] if packet.servo_id == BROADCAST_ID else replies

    def _single(self, servo: EmulatedServo, code: int, params: bytes) -> tuple[int, bytes] | None:
        if code == Instruction.PING and not params:
            return self._reply(servo, b"")
        if code == Instruction.READ and len(params) == 2:
            return self._reply(servo, servo.read(params[0], params[1]))
        if code == Instruction.WRITE and len(params) >= 2:
            addressed_as = servo.servo_id  # an id change is acknowledged from the old id
            self._write(servo, params[0], params[1:])
            if not servo.table[Address.RESPONSE_LEVEL]:
                return None
            servo.refresh()
            return addressed_as, encode_status(addressed_as, servo.error_bits())
        return None

    def _each(self, servo_ids: Iterable[int]) -> Iterable[EmulatedServo]:
        for sid in servo_ids:
            servo = self._answering(sid)
            if servo is not None:
                yield servo

    def _write(self, servo: EmulatedServo, address: int, data: bytes) -> None:
        if address <= Address.ID < address + len(data):
            new_id = data[Address.ID - address]
            if new_id != servo.servo_id and self._answering(new_id) is not None:
                return  # the emulator refuses a duplicate id rather than modelling collisions
        servo.write(address, data)

    @staticmethod
    def _reply(servo: EmulatedServo, params: bytes) -> tuple[int, bytes]:
        servo.refresh()
        return servo.servo_id, encode_status(servo.servo_id, servo.error_bits(), params)


@dataclass
class EmulatorStats:
    requests: int = 0
    replies: int = 0
    dropped: int = 0
    corrupted: int = 0
    bad_requests: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class ServoBusEmulator:
    """A pty that answers like a chain of STS3215 servos; faults can be injected at run time."""

    def __init__(
        self,
        servo_ids: Sequence[int] = (1, 2, 3, 4, 5, 6),
        *,
        plant: ServoPlant | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        positions: Mapping[int, int] | None = None,
    ) -> None:
        self.chain = ServoChain(servo_ids, plant=plant, clock=clock, positions=positions)
        self.stats = EmulatorStats()
        self.drop_rate = 0.0
        self.corrupt_rate = 0.0
        self.latency_s = 0.0
        self._rng = random.Random(seed)
        self._drop_next: Counter[int | None] = Counter()
        self._corrupt_next: Counter[int | None] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._master = self._slave = -1
        self.port = ""

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> str:
        """Open the pty and start answering; returns the port path to give the bus."""
        if self._thread is not None:
            return self.port
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line discipline: bytes pass as they are
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="feetech-emulator", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        for fd in (self._master, self._slave):
            if fd >= 0:
                os.close(fd)
        self._master = self._slave = -1

    def __enter__(self) -> ServoBusEmulator:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType
    ) -> None:
        self.stop()

    # -- faults and inspection -------------------------------------------------------------------

    def set_faults(
        self,
        *,
        drop_rate: float | None = None,
        corrupt_rate: float | None = None,
        latency_s: float | None = None,
    ) -> None:
        """Fraction of replies dropped / corrupted (one byte flipped), delay before each answer."""
        with self._lock:
            if drop_rate is not None:
                self.drop_rate = _fraction("drop_rate", drop_rate)
            if corrupt_rate is not None:
                self.corrupt_rate = _fraction("corrupt_rate", corrupt_rate)
            if latency_s is not None:
                self.latency_s = max(0.0, latency_s)

    def drop_next(self, count: int = 1, servo_id: int | None = None) -> None:
        """Drop the next ``count`` replies (of ``servo_id``, or of any servo)."""
        with self._lock:
            self._drop_next[servo_id] += count

    def corrupt_next(self, count: int = 1, servo_id: int | None = None) -> None:
        """Corrupt the error byte of the next ``count`` replies, so their checksum fails."""
        with self._lock:
            self._corrupt_next[servo_id] += count

    def silence(self, servo_id: int, silent: bool = True) -> None:
        """A silent servo ignores everything, as if its cable were unplugged."""
        with self._lock:
            self.chain.servo(servo_id).silent = silent

    def set_temperature(self, servo_id: int, celsius: int) -> None:
        """Above the servo's limit (70 °C) the overheat bit is set and torque drops."""
        with self._lock:
            servo = self.chain.servo(servo_id)
            servo.temperature = int(celsius)
            servo.refresh()

    def set_voltage(self, servo_id: int, volts: float) -> None:
        with self._lock:
            self.chain.servo(servo_id).voltage = volts

    def power_cycle(self, servo_id: int) -> None:
        with self._lock:
            self.chain.servo(servo_id).power_cycle()

    def servo(self, servo_id: int) -> EmulatedServo:
        return self.chain.servo(servo_id)

    # -- serving ---------------------------------------------------------------------------------

    def _serve(self) -> None:
        parser = InstructionParser()
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self._master, 4096)
            except (BlockingIOError, OSError):
                continue
            for packet in parser.feed(data):
                self._answer(packet)
            self.stats.bad_requests = parser.corrupt

    def _answer(self, packet: InstructionPacket) -> None:
        with self._lock:
            self.stats.requests += 1
            replies = [self._faulty(sid, raw) for sid, raw in self.chain.handle(packet)]
            out = b"".join(r for r in replies if r)
            latency = self.latency_s
        if not out or (latency and self._stop.wait(latency)):
            return
        with contextlib.suppress(OSError):  # nobody reads the port: bytes are lost, as on a wire
            os.write(self._master, out)

    def _faulty(self, servo_id: int, raw: bytes) -> bytes:
        if self._take(self._drop_next, servo_id) or self._chance(self.drop_rate):
            self.stats.dropped += 1
            return b""
        self.stats.replies += 1
        if self._take(self._corrupt_next, servo_id):
            self.stats.corrupted += 1
            return raw[:4] + bytes((raw[4] ^ 0x80,)) + raw[5:]
        if self._chance(self.corrupt_rate):
            self.stats.corrupted += 1
            index = self._rng.randrange(2, len(raw))
            return (
                raw[:index] + bytes((raw[index] ^ self._rng.randrange(1, 256),)) + raw[index + 1 :]
            )
        return raw

    @staticmethod
    def _take(pending: Counter[int | None], servo_id: int) -> bool:
        for key in (servo_id, None):
            if pending[key] > 0:
                pending[key] -= 1
                return True
        return False

    def _chance(self, rate: float) -> bool:
        return rate > 0 and self._rng.random() < rate


def _fraction(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within 0..1, got {value}")
    return float(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", default="1,2,3,4,5,6", help="servo ids, comma separated")
    parser.add_argument(
        "--seed", type=cli_types.seed, default=0, help=f"fault seed (0 to {cli_types.MAX_SEED})"
    )
    parser.add_argument("--drop", type=float, default=0.0, help="fraction of replies dropped")
    parser.add_argument("--corrupt", type=float, default=0.0, help="fraction corrupted")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--silent", default="", help="ids that never answer, comma separated")
    parser.add_argument("--max-speed", type=float, default=3000.0, help="ticks/s")
    parser.add_argument("--link", help="also make this symlink to the pty (a stable port name)")
    args = parser.parse_args(argv)
    ids = [int(i) for i in args.ids.split(",") if i]
    emulator = ServoBusEmulator(ids, plant=KinematicPlant(args.max_speed), seed=args.seed)
    emulator.set_faults(drop_rate=args.drop, corrupt_rate=args.corrupt, latency_s=args.latency)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    port = emulator.start()
    for sid in (int(i) for i in args.silent.split(",") if i):
        emulator.silence(sid)
    if args.link:
        if os.path.islink(args.link):
            os.unlink(args.link)
        os.symlink(port, args.link)
    print(port, flush=True)
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
        if args.link and os.path.islink(args.link):
            os.unlink(args.link)
    return 0


if __name__ == "__main__":
    sys.exit(main())
