"""Servo imperfections for the STS3215 emulator: a goal's way from the register to the shaft.

Today's emulated servos track their goal perfectly; a real STS3215 does not. A realism
profile's ``ServoRealism`` (``lang2policy.realism``) sets six effects, each applied here per
servo between the Goal_Position register and the plant (``ServoPlant``) that moves the shaft:

1. **command latency** ``latency_s``: a goal written acts that much later;
2. **deadband** ``deadband_ticks``: a goal within that many ticks of the present (true) shaft
   position is not pursued: the position loop idles and the shaft stays where it is;
3. **position-loop response** ``response_s``: the motor's reference follows the pursued goal
   through a first-order lag of that time constant (0: at once, as today);
4. **backlash** ``backlash_ticks``: gear play between the motor and the output shaft. The
   shaft is dragged only at the ends of the play (a play, or "hysteresis", operator), so
   after a reversal the motor turns ``backlash_ticks`` before the shaft follows, and the shaft
   comes to rest ``backlash_ticks / 2`` short of the goal in the direction it came from;
5. **reading noise** ``read_noise_ticks``: Present_Position reads carry Gaussian noise of
   that standard deviation (the plant's position is what the encoder reads);
6. **gripper slip** ``gripper_slip``: the chance per grasp that the held object slips. A grasp
   is the gripper stalled short of a new goal (an object between the jaws) for
   ``STALL_S``; a slip is the grip giving way for a moment, as a worn gear or a soft object
   lets it: ``SLIP_DELAY_S`` into the grasp (the arm lifting) the jaw eases open by
   ``SLIP_OPEN_TICKS`` from where it holds the object for ``SLIP_S``, then closes again on
   the commanded goal. What the object does (slides, drops, is caught again) is the physics'.

The plant is the output shaft: the world (MuJoCo's joints) and the encoder agree, and what
the driver sees is the shaft short of, or late to, its goal. ``RealisticPlant`` (in
``realistic_plant``) wraps a plant with one ``JointRealism`` per servo. Everything random is
seeded (one stream per servo and effect); a field at 0 adds no randomness and no step.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, fields

from lang2policy.realism.profile import ServoRealism

SNAP_TICKS = 0.01  # the lag's reference this close to its goal is at the goal
SLIP_OPEN_TICKS = 60.0  # a slip eases the jaw open by this (about 5 degrees, 5 mm at the tips)
SLIP_S = 0.2  # for this long
SLIP_DELAY_S = 0.4  # this long into the grasp (the arm lifting the object)
STALL_S = 0.1  # the gripper held short of its goal this long is a grasp
GRASP_TICKS = 20.0  # short of the goal by more than this: blocked (by an object)
STALL_SPEED = 30.0  # ticks/s: slower than this is standing still


# The profile's servo section (``lang2policy.realism.profile.ServoRealism``), by its own name.
ServoImperfections = ServoRealism
SERVO_FIELDS = tuple(f.name for f in fields(ServoRealism))


def check_realism(realism: ServoImperfections) -> None:
    """ValueError unless every field is a finite number >= 0 (and the slip chance <= 1).

    The profile loader already checks its files; this guards values given directly."""
    for name in SERVO_FIELDS:
        value = getattr(realism, name, None)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise ValueError(f"servo realism {name} must be a finite number >= 0, got {value!r}")
    if realism.gripper_slip > 1:
        chance = realism.gripper_slip
        raise ValueError(f"servo realism gripper_slip is a chance in 0..1, got {chance}")


def is_ideal(realism: ServoImperfections | None) -> bool:
    """No effect at all: the emulator then runs exactly as without realism."""
    return realism is None or all(getattr(realism, name) == 0 for name in SERVO_FIELDS)


def stream(seed: int, joint: int, effect: str) -> random.Random:
    """The seeded random stream of one servo's effect (independent of the others and of the
    emulator's fault draws, so turning one effect on does not change another's draws)."""
    return random.Random(f"servo-realism:{seed}:{joint}:{effect}")


@dataclass(frozen=True)
class Command:
    """A goal written to the servo, and when it acts (written + latency)."""

    at: float
    goal: float
    speed: float


class JointRealism:
    """One servo's way from its goal register to its shaft's target (effects 1 to 5).

    ``goal`` is what the loop pursues (after latency and deadband), ``motor`` the loop's lagged
    reference, ``shaft`` where the gear play leaves the output shaft's target."""

    def __init__(
        self, realism: ServoImperfections, position: float, noise: random.Random | None
    ) -> None:
        self.realism = realism
        self.goal = self.motor = self.shaft = float(position)
        self.speed = 0.0
        self.pending: deque[Command] = deque()
        self._noise = noise

    @property
    def busy(self) -> bool:
        """Something changes with time alone: a goal not yet acting, or the lag converging."""
        return bool(self.pending) or self.motor != self.goal

    def write(self, goal: float, speed: float, now: float) -> None:
        """A goal written at ``now``; it acts ``latency_s`` later (see ``due``)."""
        self.pending.append(Command(now + self.realism.latency_s, float(goal), float(speed)))

    def due(self, now: float) -> list[Command]:
        """The commands acting by ``now``, oldest first."""
        acting = []
        while self.pending and self.pending[0].at <= now:
            acting.append(self.pending.popleft())
        return acting

    def pursue(self, command: Command, present: float) -> None:
        """A command acts: pursued unless within the deadband of the present shaft position,
        where the loop idles and holds its reference (the shaft stays)."""
        band = self.realism.deadband_ticks
        if band and abs(command.goal - present) <= band:
            self.goal = self.motor
            return
        self.goal, self.speed = command.goal, command.speed

    def settle(self, dt: float) -> float:
        """Advance the loop's lag by ``dt`` seconds and the gear play; the shaft's target."""
        tau = self.realism.response_s
        if not tau:
            self.motor = self.goal
        elif dt > 0:
            self.motor += (self.goal - self.motor) * -math.expm1(-dt / tau)
            if abs(self.goal - self.motor) < SNAP_TICKS:
                self.motor = self.goal
        half = self.realism.backlash_ticks / 2
        if self.motor - self.shaft > half:
            self.shaft = self.motor - half
        elif self.shaft - self.motor > half:
            self.shaft = self.motor + half
        return self.shaft

    def reset(self, position: float) -> None:
        """Torque on: the loop starts from where the shaft is (the play centred on it)."""
        self.goal = self.motor = self.shaft = float(position)
        self.speed = 0.0

    def read(self, position: float) -> float:
        """What the encoder reads of the shaft at ``position``: with noise when configured."""
        if self._noise is None:
            return position
        return position + self._noise.gauss(0.0, self.realism.read_noise_ticks)


class GripperSlip:
    """Effect 6 on the gripper's servo: a grasp, drawn once, may slip (see the module doc)."""

    def __init__(self, chance: float, rng: random.Random) -> None:
        self.chance = chance
        self._rng = rng
        self.armed = False  # a new goal, not yet reached nor grasped
        self.slips = 0  # slips so far (for tests and logs)
        self._stalled_since: float | None = None
        self._slip_at: float | None = None
        self._window: tuple[float, float] | None = None  # (until, jaw target) while slipping

    @property
    def busy(self) -> bool:
        return self.armed or self._slip_at is not None or self._window is not None

    def command(self, old_goal: float, new_goal: float) -> None:
        """A goal acts on the gripper; a new one (more than ``GRASP_TICKS`` away) ends the
        grasp (and any slip to come) and may start another."""
        if abs(new_goal - old_goal) > GRASP_TICKS:
            self.cancel()
            self.armed = True

    def cancel(self) -> None:
        """No grasp any more (the jaw went limp): nothing watched, no slip to come."""
        self.armed, self._stalled_since = False, None
        self._slip_at = self._window = None

    def step(self, now: float, target: float, position: float, speed: float) -> float | None:
        """The jaw's target while it slips, else None (keep ``target``, the commanded one)."""
        if self._window is not None:
            until, target = self._window
            if now < until:
                return target
            self._window = None
            return None
        if self._slip_at is not None and now >= self._slip_at:
            self._slip_at = None
            self.slips += 1
            eased = position + math.copysign(SLIP_OPEN_TICKS, position - target)
            self._window = (now + SLIP_S, eased)
            return eased
        if self.armed:
            self._watch(now, target, position, speed)
        return None

    def _watch(self, now: float, target: float, position: float, speed: float) -> None:
        """Armed: the jaw reaching its target is no grasp; stalled short of it for ``STALL_S``
        is one, and the draw says whether it will slip."""
        short = abs(target - position) > GRASP_TICKS
        if not short and abs(speed) < STALL_SPEED:
            self.armed, self._stalled_since = False, None
            return
        if not short or abs(speed) >= STALL_SPEED:
            self._stalled_since = None
            return
        if self._stalled_since is None:
            self._stalled_since = now
        if now - self._stalled_since >= STALL_S:
            self.armed, self._stalled_since = False, None
            if self._rng.random() < self.chance:
                self._slip_at = now + SLIP_DELAY_S
