"""``RealisticPlant``: a ``ServoPlant`` that puts a real servo's imperfections in front of
another plant (``KinematicPlant``, ``MujocoPlant``); the effects are in ``servo_realism``.

The emulator writes goals to it and advances it with its clock as it would the plant it wraps.
Goals pass through each servo's ``JointRealism`` (latency, deadband, lag, gear play) and the
result becomes the wrapped plant's goal; reads of the position carry the encoder's noise.

Time: while anything changes with time alone (a goal not yet acting, the lag converging, a
grasp watched for a slip), ``advance(now)`` steps the wrapped plant in sub-steps of at most
``step_s`` (and exactly at the instant each delayed goal acts), updating the targets between
them, so the motion does not depend on how often the bus is polled. Otherwise it hands the
whole interval to the wrapped plant, as without realism. A gap longer than ``max_gap_s`` (a
stalled clock; default: the wrapped plant's ``max_catch_up``, else 0.25 s) is one step.

Thread safety: calls are serialised by ``lock`` (the ROS node's physics timer and the
emulator's thread both advance it); the wrapped plant's own lock is taken inside it.
"""

from __future__ import annotations

import math
import threading

from lang2policy.robots.feetech.servo_plant import ServoPlant
from lang2policy.robots.feetech.servo_realism import (
    Command,
    GripperSlip,
    JointRealism,
    ServoImperfections,
    check_realism,
    stream,
)

STEP_S = 0.002  # s: the longest sub-step while the servos' state changes with time


class RealisticPlant:
    """``ServoPlant`` wrapper: ``plant`` driven through ``realism`` (see the module doc)."""

    def __init__(
        self,
        plant: ServoPlant,
        realism: ServoImperfections,
        *,
        seed: int = 0,
        gripper_joint: int | None = None,
        step_s: float = STEP_S,
        max_gap_s: float | None = None,
    ) -> None:
        """``gripper_joint``: the plant joint of the gripper's servo (slip acts there only)."""
        check_realism(realism)
        if not step_s > 0:
            raise ValueError(f"step_s must be > 0, got {step_s}")
        self.plant = plant
        self.realism = realism
        self.seed = seed
        self.gripper_joint = gripper_joint
        self.step_s = step_s
        self.max_gap_s = (
            max_gap_s if max_gap_s is not None else getattr(plant, "max_catch_up", 0.25)
        )
        self.lock = threading.RLock()
        self.slip: GripperSlip | None = None
        self._joints: dict[int, JointRealism] = {}
        self._torque: dict[int, bool] = {}
        self._sent: dict[int, tuple[float, float]] = {}
        self._measured: dict[int, float] = {}  # shaft speed over the last sub-step, ticks/s
        self._last_position: dict[int, float] = {}
        self._time: float | None = None

    # -- ServoPlant ------------------------------------------------------------------------------

    def add_joint(self, joint: int, position: float) -> None:
        with self.lock:
            self.plant.add_joint(joint, position)
            present = float(self.plant.position(joint))
            noise = stream(self.seed, joint, "noise") if self.realism.read_noise_ticks else None
            self._joints[joint] = JointRealism(self.realism, present, noise)
            self._torque[joint] = False
            self._measured[joint] = 0.0
            self._last_position[joint] = present
            if joint == self.gripper_joint and self.realism.gripper_slip:
                self.slip = GripperSlip(self.realism.gripper_slip, stream(self.seed, joint, "slip"))

    def set_goal(self, joint: int, ticks: float, speed: float) -> None:
        """The goal register written: it acts ``latency_s`` from now (at once without)."""
        with self.lock:
            servo = self._joints[joint]
            now = self._time if self._time is not None else 0.0
            servo.write(ticks, speed, now)
            if not self.realism.latency_s:
                self._act(joint, servo.due(now))
                self._send(joint, servo.settle(0.0))

    def set_torque(self, joint: int, on: bool) -> None:
        """On: the loop starts from where the shaft is (the goal written next is pursued)."""
        with self.lock:
            if on and not self._torque[joint]:
                present = float(self.plant.position(joint))
                self._joints[joint].reset(present)
                self.plant.set_goal(joint, present, 0.0)
                self._sent[joint] = (present, 0.0)
            if not on and self.slip is not None and joint == self.gripper_joint:
                self.slip.cancel()  # a limp jaw holds nothing
            self._torque[joint] = on
            self.plant.set_torque(joint, on)

    def advance(self, now: float) -> None:
        with self.lock:
            last = self._time
            if last is None or now <= last or not self._busy():
                self._time = now if last is None else max(now, last)
                self.plant.advance(now)
                return
            for joint in self._joints:
                self._last_position[joint] = float(self.plant.position(joint))
            for t in self._substeps(last, now):
                self.plant.advance(t)
                self._update(t, t - self._time)
                self._time = t

    def position(self, joint: int) -> float:
        """What the encoder reads: the shaft's position, with the reading noise."""
        with self.lock:
            return self._joints[joint].read(self.plant.position(joint))

    def velocity(self, joint: int) -> float:
        """The wrapped plant's, or the shaft's measured speed while it follows the lag (a
        kinematic plant that catches its target each sub-step reports 0 while moving)."""
        with self.lock:
            speed = self.plant.velocity(joint)
            if speed == 0.0 and self._joints[joint].busy:
                return self._measured[joint]
            return speed

    def load(self, joint: int) -> float:
        return self.plant.load(joint)

    # -- helpers ---------------------------------------------------------------------------------

    def true_position(self, joint: int) -> float:
        """The shaft's position without the reading noise (tests, diagnostics)."""
        with self.lock:
            return float(self.plant.position(joint))

    def _busy(self) -> bool:
        slipping = self.slip is not None and self.slip.busy
        return slipping or any(servo.busy for servo in self._joints.values())

    def _substeps(self, last: float, now: float) -> list[float]:
        """Sub-step ends in (last, now]: an even grid of at most ``step_s``, plus the instants
        delayed goals act; one step across a gap longer than ``max_gap_s``."""
        span = now - last
        if span > self.max_gap_s:
            return [now]
        count = max(1, math.ceil(span / self.step_s - 1e-9))
        times = {last + span * k / count for k in range(1, count)} | {now}
        for servo in self._joints.values():
            times.update(c.at for c in servo.pending if last < c.at < now)
        return sorted(times)

    def _update(self, now: float, dt: float) -> None:
        """At the end of a sub-step: goals that act now, the lag, the gear play, the slip."""
        for joint, servo in self._joints.items():
            present = float(self.plant.position(joint))
            if dt > 0:
                self._measured[joint] = (present - self._last_position[joint]) / dt
            self._last_position[joint] = present
            self._act(joint, servo.due(now))
            target = servo.settle(dt)
            if self.slip is not None and joint == self.gripper_joint and self._torque[joint]:
                speed = self.plant.velocity(joint) or self._measured[joint]
                held = self.slip.step(now, servo.shaft, present, speed)
                target = held if held is not None else target
            self._send(joint, target)

    def _act(self, joint: int, commands: list[Command]) -> None:
        """Goals acting: recorded with torque off (torque on restarts from the shaft), else
        pursued (the deadband against the true shaft position)."""
        servo = self._joints[joint]
        for command in commands:
            if not self._torque[joint]:
                servo.goal = servo.motor = servo.shaft = float(self.plant.position(joint))
                continue
            before = servo.goal
            servo.pursue(command, float(self.plant.position(joint)))
            if self.slip is not None and joint == self.gripper_joint:
                self.slip.command(before, servo.goal)

    def _send(self, joint: int, target: float) -> None:
        """The wrapped plant's goal, when it changed (and only with torque on)."""
        if not self._torque[joint]:
            return
        goal = (target, self._joints[joint].speed)
        if self._sent.get(joint) != goal:
            self._sent[joint] = goal
            self.plant.set_goal(joint, *goal)
