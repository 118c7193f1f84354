"""The safety layer's state machine: motion filter + watchdog + stop latch, with no ROS inside.

A node feeds it events with explicit times (joint states, commands, watchdog ticks, stop and
resume requests) and publishes what each ``Decision`` says to send: a filtered trajectory, or a
hold (names, no points: "stop": the robot brakes along its command to rest, or holds the
measured position, see ``TrajectoryFollower.stop``). States:

* ``stopped`` — the stop latch is set: every command is ignored until an explicit resume.
* ``holding`` — the arm was held because joint states are missing or stale (clears by itself
  when they are fresh again), or because a commander went silent mid-trajectory or sent a
  command that had to be dropped (clears with the next command that passes).
* ``ok`` — commands pass through the motion filter to the robot.

A hold is sent once, on the way into ``holding`` (and on every stop request), and a command cut
to nothing sends one only if the arm was not held already: repeating holds would re-anchor the
hold at each new measured position and let the arm creep.

Everything sent is stamped with robot time (the latest joint state's stamp, the watchdog's
clock) and replayed into a ``RobotTarget``: the robot starts each trajectory at its stamp from
where its target was then (joint_trajectory_controller's reading of a header stamp), so the
state a command departs from -- position *and* velocity -- is known exactly. A command that
passes the motion filter is then shaped (``lang2policy.safety.shaper``: the target's speed
below the cap by the servo's overshoot, its acceleration bounded, at rest at the last point)
and its samples guarded on the gripper's geometry (``lang2policy.safety.guard``): however
commands are timed, reversed or aimed, the arm's measured joint speed stays within the cap and
the gripper out of the keep-out zones. While a trajectory runs, ``heartbeat`` re-sends its
remainder stamped anew, so a robot that hears nothing for a short while knows its commander
(this node) is gone and brakes (``command_deadline`` on the robot nodes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lang2policy.safety.config import BoxConfig
from lang2policy.safety.guard import ZoneGuard
from lang2policy.safety.motion_filter import MotionFilter
from lang2policy.safety.reference import RobotTarget
from lang2policy.safety.shaper import Shaped, ShaperLimits, shape
from lang2policy.safety.stop_latch import StopLatch
from lang2policy.safety.trajectory import Trajectory
from lang2policy.safety.watchdog import Watchdog
from lang2policy.scene.arm import GRIPPER

STOPPED, HOLDING, OK = "stopped", "holding", "ok"
_STATES_HOLD, _COMMAND_HOLD = "states", "command"


@dataclass(frozen=True)
class Decision:
    """What to send to the robot (None: nothing) and whether the request was accepted, why."""

    send: Trajectory | None = None
    ok: bool = True
    message: str = ""
    stamp: float | None = None  # robot time the robot starts ``send`` at (None: on arrival)


class SafetySupervisor:
    def __init__(
        self,
        motion_filter: MotionFilter,
        watchdog: Watchdog,
        latch: StopLatch | None = None,
        shaper: ShaperLimits | None = None,
        guard: ZoneGuard | None = None,
        heartbeat_period: float = 0.1,
    ) -> None:
        self.filter = motion_filter
        self.watchdog = watchdog
        self.latch = latch or StopLatch()
        self.shaper = shaper
        self.guard = guard
        self.heartbeat_period = heartbeat_period
        self.counts = {"passed": 0, "clipped": 0, "rejected": 0, "blocked": 0}
        self.cuts = {"keep_out": 0, "workspace": 0}
        self.last_violation: str | None = None
        self._measured: dict[str, float] | None = None
        self._velocity: np.ndarray | None = None
        self._last_sent: float | None = None  # robot time of the last trajectory sent
        # Nothing has moved the arm yet, so starting "held" needs no hold message.
        self._hold: tuple[str, str] | None = (_STATES_HOLD, "no joint states received yet")
        self._holding_sent = False  # the last trajectory sent was a hold
        # The robot's target, as sent (a hold brakes it as the robot does).
        self.target = RobotTarget(motion_filter.names, motion_filter.braking)

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> str:
        if self.latch.stopped:
            return STOPPED
        return HOLDING if self._hold else OK

    @property
    def reason(self) -> str:
        if self.latch.stopped:
            return self.latch.reason
        return self._hold[1] if self._hold else ""

    def status(self) -> dict:
        """The status payload of /lang2policy/safety. ``robot_time`` is the stamp of the latest
        joint state when the status was made (None before any): a stop or hold took effect on
        the robot from about that time, whatever delay a subscriber reads the status with."""
        return {
            "node": "safety",
            "state": self.state,
            "reason": self.reason,
            "robot_time": self.watchdog.robot_time(0.0),
            "detail": {
                **self.counts,
                "cuts": dict(self.cuts),
                "plan_zones": sorted(self.guard.plan_zones) if self.guard else [],
                "last_violation": self.last_violation,
            },
        }

    def hold_trajectory(self) -> Trajectory:
        return Trajectory.hold(self.filter.names)

    # ------------------------------------------------------------------ events
    def on_joint_state(
        self,
        now: float,
        stamp: float | None,
        positions: Mapping[str, float],
        velocities: Mapping[str, float] | None = None,
    ) -> Decision:
        """A joint state arrived; an unusable one is ignored (and so ages into a hold)."""
        problem = self.filter.state_problem(positions)
        if problem is not None:
            return Decision(ok=False, message=f"ignored joint state: {problem}")
        self._measured = {n: float(positions[n]) for n in self.filter.names}
        self._velocity = _velocity_vector(self.filter.names, velocities)
        self.watchdog.on_state(now, stamp)
        return self.tick(now)

    def tick(self, now: float) -> Decision:
        """The watchdog's periodic check: hold on stale states or a silent commander."""
        if self.latch.stopped:
            return Decision()
        verdict = self.watchdog.check(now)
        if verdict.states_bad:
            return self._enter_hold(now, _STATES_HOLD, verdict.reason)
        if self._hold and self._hold[0] == _STATES_HOLD:
            self._hold = None
            return Decision(message="joint states fresh; the arm holds until the next command")
        if verdict.hold:
            self.watchdog.cancel_command()
            return self._enter_hold(now, _COMMAND_HOLD, verdict.reason)
        return Decision()

    def on_command(self, now: float, command: Trajectory) -> Decision:
        """A commander's trajectory: filtered and sent, or dropped (and the arm held)."""
        blocked = self._blocked(now)
        if blocked is not None:
            return blocked
        assert self._measured is not None  # _blocked lets no command pass before a joint state
        measured = self.filter.measured_vector(self._measured)
        start, velocity = self._departure(now, measured)
        result = self.filter.filter(command, self._measured, start[None, :])
        if result.trajectory is None:  # rejected
            return self.reject(now, result.summary)
        trajectory, notes = result.trajectory, [v.message for v in result.violations]
        for violation in result.violations:
            if violation.rule in self.cuts:
                self.cuts[violation.rule] += 1
        if trajectory.points and self.shaper is not None:
            trajectory, note = self._shape(start, velocity, trajectory)
            notes += [note] if note else []
        summary = "; ".join(notes)
        self.counts["clipped" if notes else "passed"] += 1
        if notes:
            self.last_violation = summary
        self._hold = None
        self.watchdog.on_command(now, trajectory.duration)
        if trajectory.points:
            return self._send(now, Decision(send=trajectory, message=summary))
        if self._holding_sent:  # held already (e.g. at a zone's face): don't re-anchor
            return Decision(message=summary)
        return self._send(now, Decision(send=self.hold_trajectory(), message=summary))

    def heartbeat(self, now: float) -> Decision:
        """The running trajectory's remainder, stamped now, when nothing was sent for
        ``heartbeat_period`` of robot time: the same motion, and proof that this node lives."""
        if self.latch.stopped or self._hold or self._last_sent is None:
            return Decision()
        robot_now = self.watchdog.robot_time(now)
        if robot_now is None or robot_now - self._last_sent < self.heartbeat_period:
            return Decision()
        remainder = self.target.remainder(robot_now)
        if not remainder:
            return Decision()
        names = self.target.names
        send = Trajectory.of(names, [(t, list(row)) for t, row in remainder])
        self._last_sent = robot_now
        return Decision(send=send, stamp=robot_now)

    def set_plan_zones(self, zones: Mapping[str, BoxConfig]) -> str:
        """The running plan's keep-out zones (replacing the previous plan's); what changed."""
        if self.guard is None:
            return "plan zones ignored: this supervisor has no zone guard"
        self.guard.set_plan_zones(zones)
        names = sorted(zones)
        return f"plan keep-out zones: {names}" if names else "plan keep-out zones cleared"

    def _departure(self, now: float, measured: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the next command departs from: the replayed target and its velocity, unless
        the arm is farther from it than a servo lags (``Braking.tolerance``: a blocked arm, a
        robot reset or restarted, another commander): then from the measured state, so the
        target never winds up ahead of an arm that does not follow (released, it would
        snap toward the target far above the speed cap)."""
        robot_now = self.watchdog.robot_time(now)
        assert robot_now is not None  # a joint state arrived (on_command's _blocked)
        start, velocity = self.target.state(robot_now, measured)
        braking = self.filter.braking
        if braking is not None and (np.abs(start - measured) > braking.tolerance).any():
            self.target.anchor(measured)
            return measured.copy(), np.zeros_like(measured)
        return start, velocity

    def _bridged(self, shaped: Shaped) -> Shaped:
        """``shaped`` later by the time the robot needs to reach its first sample within the
        speed cap from anywhere its target may be (only after a hold without braking: the
        robot stopped wherever the arm was when the hold arrived)."""
        assert self._measured is not None and self.shaper is not None  # as in _shape
        rows = self.target.uncertain(self.filter.measured_vector(self._measured))
        if rows is None:
            return shaped
        distance = np.abs(rows - shaped.positions[0]).max(axis=0)
        need = float(np.max(distance / self.shaper.max_speed, initial=0.0))
        shift = need - float(shaped.times[0])
        if shift <= 0.0:
            return shaped
        return Shaped(shaped.times + shift, shaped.positions, shaped.velocities)

    def _shape(self, start, velocity, trajectory: Trajectory) -> tuple[Trajectory, str]:
        """``trajectory`` (filtered) shaped from the target's state and guarded: the samples
        to send over the arm joints (and the gripper when it was commanded), and a note when
        the guard cut it."""
        assert self.shaper is not None  # on_command shapes only with a shaper
        names = self.filter.names
        cols = [names.index(n) for n in trajectory.names]
        times = np.array([t for t, _ in trajectory.points], float)
        rows = np.repeat(start[None, :], len(times), axis=0)
        rows[:, cols] = np.array([values for _, values in trajectory.points], float)
        shaped = shape(start, velocity, times, rows, self.shaper)
        shaped = self._bridged(shaped)
        note = ""
        if self.guard is not None:
            assert self._measured is not None  # as in _bridged
            measured = self.filter.measured_vector(self._measured)
            shaped, rule, note = self.guard.guard(start, velocity, shaped, self.shaper, measured)
            if rule is not None:
                self.cuts[rule] += 1
        keep = [i for i, n in enumerate(names) if n != GRIPPER or n in trajectory.names]
        points = [
            (float(t), row[keep].tolist())
            for t, row in zip(shaped.times, shaped.positions, strict=True)
        ]
        return Trajectory.of([names[i] for i in keep], points), note

    def reject(self, now: float, reason: str) -> Decision:
        """A command that cannot be executed at all (malformed, NaN): drop it and hold."""
        blocked = self._blocked(now)
        if blocked is not None:
            return blocked
        self.counts["rejected"] += 1
        self.last_violation = reason
        self.watchdog.cancel_command()
        decision = self._enter_hold(now, _COMMAND_HOLD, reason)
        return Decision(send=decision.send, ok=False, message=f"{reason}; the arm holds")

    def stop(self, now: float, reason: str = "stop requested") -> Decision:
        """Latch the stop and hold at once (a hold is sent on every stop request)."""
        message = self.latch.stop(now, reason)
        self.watchdog.cancel_command()
        return self._send(now, Decision(send=self.hold_trajectory(), message=message))

    def resume(self, now: float) -> Decision:
        """Release the stop latch, unless joint states are missing or stale."""
        verdict = self.watchdog.check(now)
        was_stopped = self.latch.stopped
        ok, message = self.latch.resume(now, verdict.reason if verdict.states_bad else None)
        if ok and was_stopped:
            self._hold = None  # held by the stop; the next command that passes moves the arm
        return Decision(ok=ok, message=message)

    # ------------------------------------------------------------------ helpers
    def _blocked(self, now: float) -> Decision | None:
        """A Decision that ignores the command when stopped or without fresh joint states."""
        if self.latch.stopped:
            self.counts["blocked"] += 1
            return Decision(ok=False, message="stopped: command ignored until resume")
        verdict = self.watchdog.check(now)
        if verdict.states_bad or self._measured is None:
            self.counts["blocked"] += 1
            held = self._enter_hold(now, _STATES_HOLD, verdict.reason)
            return Decision(send=held.send, ok=False, message=f"command ignored: {verdict.reason}")
        return None

    def _enter_hold(self, now: float, kind: str, reason: str) -> Decision:
        """Hold (sending a hold only when the arm was not held already).

        A hold of the same kind keeps its first reason (when and why it started), so the status
        changes, and is published, once per hold rather than at every watchdog tick.
        """
        already = self._hold is not None
        if self._hold is None or self._hold[0] != kind:
            self._hold = (kind, reason)
        if already:
            return Decision(message=reason)
        return self._send(now, Decision(send=self.hold_trajectory(), message=f"holding: {reason}"))

    def _send(self, now: float, decision: Decision) -> Decision:
        """Remember what goes to the robot at ``now``: whether it is a hold, and where it takes
        the robot's target (a hold brakes it to rest, or stops it at the measured position)."""
        send = decision.send
        assert send is not None  # what goes to the robot: a command or a hold
        self._holding_sent = send.is_hold
        measured = self._measured_or_none()
        robot_now = self.watchdog.robot_time(now)
        if send.is_hold:
            self._last_sent = None
            if measured is not None:
                assert robot_now is not None  # a measured joint state brought a stamp
                self.target.held(robot_now, measured, self._velocity)
        else:  # only commands that passed, so joint states are fresh
            assert robot_now is not None
            self.target.forwarded(robot_now, send, measured)
            self._last_sent = robot_now
        return dataclasses.replace(decision, stamp=robot_now)

    def _measured_or_none(self):
        """The latest measured positions (``filter.names`` order), None before any."""
        if self._measured is None:
            return None
        return self.filter.measured_vector(self._measured)


def _velocity_vector(names, velocities: Mapping[str, float] | None) -> np.ndarray | None:
    """Measured velocities in ``names`` order, None unless every one is a finite number."""
    if not velocities:
        return None
    try:
        vector = np.array([float(velocities[n]) for n in names])
    except (KeyError, TypeError, ValueError):
        return None
    return vector if np.isfinite(vector).all() else None
