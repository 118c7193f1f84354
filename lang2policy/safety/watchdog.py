"""The watchdog: decides from explicit timestamps when the arm must hold because inputs went stale.

Two clocks, both passed in, never read here:

* ``now`` — a monotonic local clock (the node's steady clock). Joint-state freshness is
  measured on it, by *arrival*: if the robot (or the simulation) dies, its stamps stop, so only
  arrival times can tell.
* robot time — the stamp of the latest joint state (sim time from the sim node, wall time from
  a driver). Commands are timed on it because their ``time_from_start`` runs on the robot: "the
  trajectory still moves the arm" means robot time has not reached the trajectory's end. It is
  not extrapolated between states, so a robot (or simulation) that slows down or stalls never
  makes a commander look silent; a command counts from the latest stamp before it arrived, so
  silence is overestimated by at most one joint-state period.

States, checked in this order: ``no_states`` (nothing received yet), ``stale_states`` (the last
joint state arrived more than ``state_timeout`` ago), ``silent_commander`` (more than
``command_timeout`` of robot time since the last command while that command's trajectory still
runs), ``ok``.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_STATES = "no_states"
STALE_STATES = "stale_states"
SILENT_COMMANDER = "silent_commander"
OK = "ok"


@dataclass(frozen=True)
class Verdict:
    state: str  # NO_STATES | STALE_STATES | SILENT_COMMANDER | OK
    reason: str = ""

    @property
    def hold(self) -> bool:
        return self.state != OK

    @property
    def states_bad(self) -> bool:
        return self.state in (NO_STATES, STALE_STATES)


class Watchdog:
    def __init__(self, state_timeout: float, command_timeout: float) -> None:
        if not (state_timeout > 0 and command_timeout > 0):
            raise ValueError(
                f"timeouts must be > 0 s, got state {state_timeout}, command {command_timeout}"
            )
        self.state_timeout = state_timeout
        self.command_timeout = command_timeout
        self._state_arrival: float | None = None
        self._state_stamp = 0.0
        self._command: tuple[float, float] | None = None  # (start, end) in robot time

    def on_state(self, now: float, stamp: float | None = None) -> None:
        """A valid joint state arrived at ``now`` stamped ``stamp`` (None: unstamped, use now)."""
        self._state_arrival = now
        self._state_stamp = now if stamp is None else stamp

    def on_command(self, now: float, duration: float) -> None:
        """A trajectory lasting ``duration`` s was sent to the robot at ``now``."""
        start = self.robot_time(now)
        self._command = None if start is None else (start, start + duration)

    def cancel_command(self) -> None:
        """The running trajectory was cancelled (held, stopped): nothing moves the arm."""
        self._command = None

    def robot_time(self, now: float) -> float | None:
        """Robot time at ``now``: the latest joint state's stamp (None before any)."""
        return None if self._state_arrival is None else self._state_stamp

    def command_running(self, now: float) -> bool:
        t = self.robot_time(now)
        return self._command is not None and t is not None and t < self._command[1]

    def check(self, now: float) -> Verdict:
        """The watchdog's state at ``now``; ``hold`` is True when the arm must hold."""
        if self._state_arrival is None:
            return Verdict(NO_STATES, "no joint states received yet")
        age = now - self._state_arrival
        if age > self.state_timeout:
            return Verdict(
                STALE_STATES,
                f"joint states stale: the last arrived {age:.3f} s ago "
                f"(state_timeout {self.state_timeout:g} s)",
            )
        command, robot_now = self._command, self.robot_time(now)
        if command is not None and robot_now is not None and self.command_running(now):
            start, end = command
            silent = robot_now - start
            if silent > self.command_timeout:
                return Verdict(
                    SILENT_COMMANDER,
                    f"commander silent for {silent:.3f} s (command_timeout "
                    f"{self.command_timeout:g} s) while its trajectory still runs for "
                    f"{end - start - silent:.3f} s",
                )
        return Verdict(OK)
