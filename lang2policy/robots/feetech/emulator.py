"""A Feetech STS3215 servo-chain emulator on a pseudo-terminal, with injectable faults.

``ServoBusEmulator`` opens a pty and answers the protocol in a thread like a chain of STS3215
servos, so ``FeetechBus`` (or any Feetech client) can be tested without an arm. Joint motion
comes from a *plant*; ``KinematicPlant`` (shipped here) moves each joint straight to its goal at a
bounded speed. A MuJoCo-backed plant only has to implement ``ServoPlant``.

Faults, changeable at run time and deterministic under a seed: dropped and corrupted replies
(a rate, or the next N), latency, a silent servo (as if unplugged), over-temperature (sets the
overheat bit and drops torque) and out-of-range voltage.

Servo imperfections (``realism=``, a realism profile's ``ServoRealism``: deadband, backlash,
position-loop lag, command latency, reading noise, gripper slip; seeded by ``realism_seed``,
default ``seed``) put a ``RealisticPlant`` in front of the plant (``servo_realism``); without
them, or with every one at 0 (the ``off`` profile), nothing is put there.

Run as a process: ``python -m lang2policy.robots.feetech.emulator --ids 1,2,3,4,5,6`` prints the
pty path and serves until interrupted (``--realism off|mild|hard|FILE`` for the imperfections).

Emulator assumptions (check on a real arm): torque is off at power-up; ``Lock`` is 1 at power-up
and EEPROM writes (addresses < 40) take effect at once but survive ``power_cycle`` only when
written with ``Lock`` 0; the goal register keeps its value while torque is off, so enabling
torque drives to it (write goal = present first); REG_WRITE/ACTION, goal time and acceleration
are stored but not acted on.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import select
import signal
import sys
import threading
import time
import tty
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lang2policy import cli_types
from lang2policy.errors import ConfigError
from lang2policy.robots.feetech.counters import Counters
from lang2policy.robots.feetech.protocol import (
    InstructionPacket,
    InstructionParser,
)
from lang2policy.robots.feetech.realistic_plant import RealisticPlant
from lang2policy.robots.feetech.servo_chain import EmulatedServo, ServoChain
from lang2policy.robots.feetech.servo_plant import KinematicPlant, ServoPlant
from lang2policy.robots.feetech.servo_realism import (
    ServoImperfections,
    check_realism,
    is_ideal,
)


@dataclass
class EmulatorStats(Counters):
    """What the emulator saw and did: requests, replies, and the faults it injected."""

    requests: int = 0
    replies: int = 0
    dropped: int = 0
    corrupted: int = 0
    bad_requests: int = 0


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
        realism: ServoImperfections | None = None,
        realism_seed: int | None = None,
        gripper_id: int | None = None,
    ) -> None:
        """``realism``: the servos' imperfections (None or all 0: ideal servos, as ever);
        ``gripper_id``: the servo that slips (default: the plant's ``gripper_joint``)."""
        if realism is not None:
            check_realism(realism)
        if not is_ideal(realism):
            inner = plant if plant is not None else KinematicPlant()
            plant = RealisticPlant(
                inner,
                realism,
                seed=seed if realism_seed is None else realism_seed,
                gripper_joint=_gripper_joint(servo_ids, gripper_id, inner),
            )
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

    def __exit__(self, *exc_info: object) -> None:
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

    @property
    def plant(self) -> ServoPlant:
        """What the servos drive (a ``RealisticPlant`` around the given one with realism):
        advance this one to run physics between requests."""
        return self.chain.plant

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


def _gripper_joint(
    servo_ids: Sequence[int], gripper_id: int | None, plant: ServoPlant
) -> int | None:
    """The plant joint whose grasps may slip: ``gripper_id``'s, else the plant's own."""
    if gripper_id is None:
        return getattr(plant, "gripper_joint", None)
    if gripper_id not in servo_ids:
        raise ValueError(f"gripper_id {gripper_id} is not among the servo ids {list(servo_ids)}")
    return list(servo_ids).index(gripper_id)


def _servo_realism(parser: argparse.ArgumentParser, level_or_file: str) -> ServoImperfections:
    """``--realism``: the servo part of a realism profile (exits naming what is allowed)."""
    from lang2policy.realism import load_realism  # the profiles: only the CLI reads them

    try:
        return load_realism(level_or_file).servo
    except ConfigError as exc:
        parser.error(str(exc))


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
    parser.add_argument(
        "--realism",
        default="off",
        metavar="LEVEL|FILE",
        help="servo imperfections of a realism profile: off, mild, hard or a YAML file "
        "(config/realism/); seeded by --seed",
    )
    args = parser.parse_args(argv)
    ids = [int(i) for i in args.ids.split(",") if i]
    realism = _servo_realism(parser, args.realism)
    emulator = ServoBusEmulator(
        ids, plant=KinematicPlant(args.max_speed), seed=args.seed, realism=realism
    )
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
