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

Everything sent is replayed into a ``RobotTarget`` on robot time (the latest joint state's
stamp, the watchdog's clock: the time at which a robot that steps its control loop, like the
sim node, starts a trajectory that arrives before its next step), so each command's speed is
judged from where it departs on the robot (the previous command, wherever it got to, or its
first point if the command has to wait for it), not from the measured position: however the
commands are timed (late, in bursts, faster than the arm follows) and whatever the joint states
say, what is sent never asks a joint for more than ``max_joint_speed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lang2policy.safety.motion_filter import MotionFilter
from lang2policy.safety.reference import RobotTarget
from lang2policy.safety.stop_latch import StopLatch
from lang2policy.safety.trajectory import Trajectory
from lang2policy.safety.watchdog import Watchdog

STOPPED, HOLDING, OK = "stopped", "holding", "ok"
_STATES_HOLD, _COMMAND_HOLD = "states", "command"


@dataclass(frozen=True)
class Decision:
    """What to send to the robot (None: nothing) and whether the request was accepted, why."""

    send: Trajectory | None = None
    ok: bool = True
    message: str = ""


class SafetySupervisor:
    def __init__(
        self, motion_filter: MotionFilter, watchdog: Watchdog, latch: StopLatch | None = None
    ) -> None:
        self.filter = motion_filter
        self.watchdog = watchdog
        self.latch = latch or StopLatch()
        self.counts = {"passed": 0, "clipped": 0, "rejected": 0, "blocked": 0}
        self.last_violation: str | None = None
        self._measured: dict[str, float] | None = None
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
            "detail": {**self.counts, "last_violation": self.last_violation},
        }

    def hold_trajectory(self) -> Trajectory:
        return Trajectory.hold(self.filter.names)

    # ------------------------------------------------------------------ events
    def on_joint_state(
        self, now: float, stamp: float | None, positions: Mapping[str, float]
    ) -> Decision:
        """A joint state arrived; an unusable one is ignored (and so ages into a hold)."""
        problem = self.filter.state_problem(positions)
        if problem is not None:
            return Decision(ok=False, message=f"ignored joint state: {problem}")
        self._measured = {n: float(positions[n]) for n in self.filter.names}
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
        measured = self.filter.measured_vector(self._measured)
        reference = self.target.candidates(self.watchdog.robot_time(now), measured)
        result = self.filter.filter(command, self._measured, reference)
        if result.rejected:
            return self.reject(now, result.summary)
        self.counts["clipped" if result.violations else "passed"] += 1
        if result.violations:
            self.last_violation = result.summary
        self._hold = None
        self.watchdog.on_command(now, result.trajectory.duration)
        if result.trajectory.points:
            return self._send(now, Decision(send=result.trajectory, message=result.summary))
        if self._holding_sent:  # held already (e.g. at a zone's face): don't re-anchor
            return Decision(message=result.summary)
        return self._send(now, Decision(send=self.hold_trajectory(), message=result.summary))

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
        if not already or self._hold[0] != kind:
            self._hold = (kind, reason)
        if already:
            return Decision(message=reason)
        return self._send(now, Decision(send=self.hold_trajectory(), message=f"holding: {reason}"))

    def _send(self, now: float, decision: Decision) -> Decision:
        """Remember what goes to the robot at ``now``: whether it is a hold, and where it takes
        the robot's target (a hold brakes it to rest, or stops it at the measured position)."""
        self._holding_sent = decision.send.is_hold
        measured = self._measured_or_none()
        if decision.send.is_hold:
            if measured is not None:
                self.target.held(self.watchdog.robot_time(now), measured)
        else:  # only commands that passed, so joint states are fresh
            self.target.forwarded(self.watchdog.robot_time(now), decision.send, measured)
        return decision

    def _measured_or_none(self):
        """The latest measured positions (``filter.names`` order), None before any."""
        if self._measured is None:
            return None
        return self.filter.measured_vector(self._measured)
