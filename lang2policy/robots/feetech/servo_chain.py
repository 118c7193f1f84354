"""An emulated chain of STS3215 servos: each servo's register table, and the chain answering
instruction packets as the servos on one bus would (ping, read, write, sync read and write).

The assumptions about the real servos are listed in ``lang2policy.robots.feetech.emulator``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

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
    ProtocolError,
    decode_signed,
    decode_sync_read,
    decode_sync_write,
    encode_signed,
    encode_status,
)
from lang2policy.robots.feetech.servo_plant import KinematicPlant, ServoPlant

TABLE_SIZE = 256
_READ_ONLY = frozenset(range(0, 5)) | frozenset(range(Address.PRESENT_POSITION, TABLE_SIZE))


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
