"""Feetech STS servo bus driver over pyserial: sync read/write, retries, bounded waits.

Every wait has a deadline (``timeout`` per transaction), corrupt replies count as missing and are
retried, and a servo that stays silent raises ``ServoTimeout`` naming its id. One lock makes each
transaction atomic, so several threads may share a bus. POSIX only (waits use ``select``).
"""

from __future__ import annotations

import errno
import glob
import operator
import select
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lang2policy.errors import InvalidCommandError
from lang2policy.robots.feetech.bus_errors import PortError, ServoError, ServoTimeout
from lang2policy.robots.feetech.counters import Counters
from lang2policy.robots.feetech.protocol import (
    BROADCAST_ID,
    MAX_TICK,
    POSITION_SIGN_BIT,
    Address,
    StatusPacket,
    StatusParser,
    decode_signed,
    encode_u16,
    error_names,
    ping_packet,
    read_packet,
    sync_read_packet,
    sync_write_packet,
    write_packet,
)
from lang2policy.robots.feetech.servo_state import (
    STATE_LENGTH,
    STATE_START,
    ServoState,
    decode_state,
)


@dataclass
class BusStats(Counters):
    """Counters for tests and logs; ``timeouts`` counts expected replies that never came valid."""

    transactions: int = 0  # requests sent, retries included
    retries: int = 0  # requests sent again after a bad or missing reply
    corrupt: int = 0  # replies whose checksum or framing was wrong
    timeouts: int = 0  # expected replies that never came valid
    unexpected: int = 0  # valid replies from a servo that was not asked
    garbage_bytes: int = 0  # bytes skipped before a packet header
    failures: int = 0  # transactions that failed after every retry


_HINT = (
    "check that the arm's power supply is on, the servo cable chain is plugged in, and the "
    "servo's id and baud rate match"
)


class FeetechBus:
    """A Feetech STS bus on one serial port (``open()`` or use as a context manager)."""

    def __init__(
        self,
        port: str,
        baudrate: int = 1_000_000,
        timeout: float = 0.02,
        retries: int = 2,
        *,
        serial_factory: Callable[..., Any] | None = None,
    ) -> None:
        """``timeout``: seconds to wait for each reply; ``retries``: resends of a request whose
        replies did not all come valid; ``serial_factory`` replaces ``serial.Serial`` (tests)."""
        if timeout <= 0 or retries < 0:
            raise ValueError(f"timeout must be > 0 and retries >= 0, got {timeout}, {retries}")
        self.port = port
        self.baudrate = baudrate
        self.timeout = timeout
        self.retries = retries
        self.stats = BusStats()
        self.last_errors: dict[int, int] = {}
        self._serial_factory = serial_factory
        self._serial: Any = None
        self._lock = threading.RLock()

    # -- port ----------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._serial is not None

    def open(self) -> None:
        if self._serial is not None:
            return
        factory = self._serial_factory
        if factory is None:
            import serial

            factory = serial.Serial
        try:
            self._serial = factory(
                self.port, self.baudrate, timeout=0, write_timeout=1.0, exclusive=True
            )
        except Exception as exc:
            raise PortError(_open_failure(self.port, exc)) from exc

    def close(self) -> None:
        with self._lock:
            if self._serial is not None:
                self._serial.close()
                self._serial = None

    def __enter__(self) -> FeetechBus:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- single servo ----------------------------------------------------------------------------

    def ping(self, servo_id: int) -> bool:
        """True if the servo answers a PING within the retries."""
        with self._lock:
            return self._request(servo_id, ping_packet(servo_id), 0) is not None

    def check_servos(self, servo_ids: Iterable[int]) -> None:
        """Ping every servo; ``ServoTimeout`` lists all that stay silent."""
        ids = list(servo_ids)
        silent = tuple(i for i in ids if not self.ping(i))
        if silent:
            raise ServoTimeout(
                f"servo(s) {_ids(silent)} on {self.port} did not answer PING "
                f"({1 + self.retries} tries, {self._ms} each); {_HINT}",
                silent,
            )

    def read(self, servo_id: int, address: int, length: int) -> bytes:
        """Read ``length`` bytes from one servo's control table."""
        with self._lock:
            reply = self._request(servo_id, read_packet(servo_id, address, length), length)
            if reply is None:
                raise self._timeout([servo_id], f"READ({address}, {length})")
        return reply.params

    def write(self, servo_id: int, address: int, data: bytes, *, ack: bool = True) -> None:
        """Write bytes to one servo; waits for its acknowledgement (not if broadcast or not ack)."""
        packet = write_packet(servo_id, address, data)
        with self._lock:
            if ack and address <= Address.ID < address + len(data):
                self._change_id(servo_id, data[Address.ID - address], packet)
            elif servo_id == BROADCAST_ID or not ack:
                self._send(packet)
            elif self._request(servo_id, packet, 0) is None:
                raise self._timeout([servo_id], f"WRITE({address}, {len(data)} bytes)")

    def _change_id(self, old_id: int, new_id: int, packet: bytes) -> None:
        self._send(packet)  # acknowledged from the old or the new id: ask the new one instead
        if not self.ping(new_id):
            raise self._timeout([new_id], f"PING after changing id {old_id} to {new_id}")

    # -- many servos -----------------------------------------------------------------------------

    def sync_write(self, address: int, data_by_id: Mapping[int, bytes]) -> None:
        """One SYNC_WRITE to several servos (no replies on the bus, so nothing to wait for)."""
        packet = sync_write_packet(address, data_by_id)
        with self._lock:
            self._send(packet)

    def sync_read(self, address: int, length: int, servo_ids: Iterable[int]) -> dict[int, bytes]:
        """One SYNC_READ; servos whose reply is missing or corrupt are re-read one by one."""
        ids = list(servo_ids)
        packet = sync_read_packet(address, length, ids)
        with self._lock:
            self._send(packet)
            replies = self._receive(ids, length)
            missing = [i for i in ids if i not in replies]
            silent = []
            for sid in missing:
                reply = self._request(
                    sid, read_packet(sid, address, length), length, retries_only=True
                )
                if reply is None:
                    silent.append(sid)
                else:
                    replies[sid] = reply
            if silent:
                raise self._timeout(silent, f"SYNC_READ({address}, {length})")
        return {sid: replies[sid].params for sid in ids}

    def torque(self, servo_ids: Iterable[int], on: bool, *, verify: bool = True) -> None:
        """Enable or disable torque; with ``verify`` the register is read back (one re-send)."""
        ids = list(servo_ids)
        value = bytes((1 if on else 0,))
        with self._lock:
            for attempt in range(2):
                self.sync_write(Address.TORQUE_ENABLE, dict.fromkeys(ids, value))
                if not verify:
                    return
                readback = self.sync_read(Address.TORQUE_ENABLE, 1, ids)
                wrong = [i for i in ids if readback[i] != value]
                if not wrong:
                    return
                ids = wrong
                if attempt == 0:
                    self.stats.retries += 1
        details = ", ".join(
            f"{i} (errors: {', '.join(error_names(self.last_errors.get(i, 0))) or 'none'})"
            for i in wrong
        )
        raise ServoError(f"servo(s) {details} refused torque {'on' if on else 'off'}", tuple(wrong))

    def read_positions(self, servo_ids: Iterable[int]) -> dict[int, int]:
        """Present positions in ticks (0..4095 per turn, 2048 at the centre)."""
        raw = self.sync_read(Address.PRESENT_POSITION, 2, servo_ids)
        return {sid: decode_signed(data, POSITION_SIGN_BIT) for sid, data in raw.items()}

    def read_state(self, servo_ids: Iterable[int]) -> dict[int, ServoState]:
        """Position, speed, load, voltage, temperature, moving and error bits in one SYNC_READ."""
        raw = self.sync_read(STATE_START, STATE_LENGTH, servo_ids)
        return {
            sid: decode_state(sid, data, self.last_errors.get(sid, 0)) for sid, data in raw.items()
        }

    def write_goal_positions(self, goals: Mapping[int, int]) -> None:
        """Send goal positions (ticks 0..4095) to several servos in one SYNC_WRITE."""
        data = {sid: encode_u16(_tick(sid, t)) for sid, t in goals.items()}
        if data:
            self.sync_write(Address.GOAL_POSITION, data)

    # -- transactions ----------------------------------------------------------------------------

    @property
    def _ms(self) -> str:
        return f"{self.timeout * 1000:.0f} ms"

    def _request(
        self, servo_id: int, packet: bytes, length: int, *, retries_only: bool = False
    ) -> StatusPacket | None:
        """Send and wait for one reply, up to 1 + ``retries`` times (or ``retries`` times)."""
        for attempt in range(1 if retries_only else 0, 1 + self.retries):
            if attempt:
                self.stats.retries += 1
            self._send(packet)
            reply = self._receive([servo_id], length).get(servo_id)
            if reply is not None:
                return reply
        return None

    def _send(self, packet: bytes) -> None:
        serial = self._require_open()
        self.stats.transactions += 1
        try:
            serial.reset_input_buffer()  # late replies to an earlier request must not match
            serial.write(packet)
            serial.flush()
        except Exception as exc:
            raise PortError(
                f"lost port {self.port} while writing ({exc}); is it unplugged?"
            ) from exc

    def _receive(self, servo_ids: list[int], length: int) -> dict[int, StatusPacket]:
        """Collect one valid reply per id until all came, or every expected packet arrived
        (some corrupt, so there is nothing left to wait for), or the deadline passed."""
        parser = StatusParser(max_params=length)
        replies: dict[int, StatusPacket] = {}
        deadline = time.monotonic() + self.timeout
        while len(replies) < len(servo_ids):
            if parser.pending == 0 and len(replies) + parser.corrupt >= len(servo_ids):
                break
            chunk = self._read_chunk(deadline)
            if not chunk:
                break
            for reply in parser.feed(chunk):
                if reply.servo_id in servo_ids and len(reply.params) == length:
                    replies.setdefault(reply.servo_id, reply)
                    self.last_errors[reply.servo_id] = reply.error
                else:
                    self.stats.unexpected += 1
        self.stats.corrupt += parser.corrupt
        self.stats.garbage_bytes += parser.skipped_bytes
        self.stats.timeouts += len(servo_ids) - len(replies)
        return replies

    def _read_chunk(self, deadline: float) -> bytes:
        serial = self._require_open()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b""
        try:
            ready, _, _ = select.select([serial.fileno()], [], [], remaining)
            return serial.read(max(1, serial.in_waiting)) if ready else b""
        except Exception as exc:
            raise PortError(
                f"lost port {self.port} while reading ({exc}); is it unplugged?"
            ) from exc

    def _require_open(self) -> Any:
        if self._serial is None:
            raise PortError(f"bus on {self.port} is not open; call open() first")
        return self._serial

    def _timeout(self, servo_ids: list[int], what: str) -> ServoTimeout:
        self.stats.failures += 1
        return ServoTimeout(
            f"servo(s) {_ids(servo_ids)} on {self.port} did not answer {what} with a valid packet "
            f"({1 + self.retries} tries, {self._ms} each); {_HINT}",
            tuple(servo_ids),
        )


def _ids(servo_ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in servo_ids)


def _tick(servo_id: int, ticks: Any) -> int:
    try:
        if isinstance(ticks, bool):
            raise TypeError
        value = operator.index(ticks)
    except TypeError:
        value = None
    if value is None or not 0 <= value <= MAX_TICK:
        raise InvalidCommandError(
            f"goal for servo {servo_id} is {ticks!r}; valid: integer ticks 0..{MAX_TICK}"
        )
    return value


def _open_failure(port: str, exc: Exception) -> str:
    code = getattr(exc, "errno", None)
    found = sorted(glob.glob("/dev/ttyACM*") + glob.glob("/dev/ttyUSB*"))
    present = f"serial ports present: {', '.join(found) or 'none'}"
    if code == errno.ENOENT or "No such file" in str(exc):
        why = (
            f"{port} does not exist: is the servo board's USB cable plugged in? ({present}; a "
            "udev rule can give the arm a stable name)"
        )
    elif code == errno.EACCES or "ermission denied" in str(exc):
        why = (
            f"permission denied on {port}: add your user to the 'dialout' group "
            "(sudo usermod -aG dialout $USER, then log in again) or add a udev rule"
        )
    elif code in (errno.EBUSY, errno.EAGAIN) or "lock" in str(exc).lower():
        why = f"{port} is in use by another process (another driver, a serial monitor?)"
    else:
        why = f"{port} could not be opened ({present})"
    return f"cannot open servo bus: {why}; also check that the arm is powered. [{exc}]"
