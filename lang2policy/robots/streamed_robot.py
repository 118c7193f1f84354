"""A robot reached through a message stream (the ROS graph): states in, commands out.

``StreamedRobot`` lets the motion primitives drive an arm they cannot touch: the owner feeds it
measured states (``update``, from a ``/joint_states`` callback in another thread) and gives it a
``send`` function that publishes a command (a joint trajectory towards the safety node).
``sleep(seconds)`` waits until the *measured* time (the state stamps: sim time from the sim
node, wall time from a driver) has advanced by ``seconds``, so primitives keep their timing
whatever the transport's latency.

A motion can be interrupted from outside (``interrupt``): the next command or wait raises the
given exception in the thread that runs the motion, e.g. ``MotionAborted`` when a person says
stop, or ``CorrectionInterrupt`` when a correction must re-target the motion. Silence is an
error, never a hang: a wait with no new state for ``stale_after`` wall seconds raises
``RobotStateError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.robots.robot import Observation, Robot
from lang2policy.robots.safety import JointLimits


class RobotStateError(Lang2PolicyError):
    """No (fresh) joint states from the robot."""


class MotionAborted(Lang2PolicyError):
    """The running motion was stopped from outside (a stop request, the safety node)."""


class CorrectionInterrupt(Lang2PolicyError):
    """The running motion must be re-planned because a correction changed its arguments."""


class StreamedRobot(Robot):
    """``Robot`` over a state stream and a command sink; thread-safe ``update``/``interrupt``."""

    name = "streamed"

    def __init__(
        self,
        limits: JointLimits,
        send: Callable[[np.ndarray], None],
        stale_after: float = 2.0,
    ) -> None:
        super().__init__(limits)
        self._send = send
        self.stale_after = float(stale_after)
        self._latest: Observation | None = None
        self._received_at = 0.0  # monotonic wall time of the latest state
        self._pending: BaseException | None = None
        self._changed = threading.Condition()

    # ---------------------------------------------------------------- feeding
    def update(self, observation: Observation) -> None:
        """A new measured state (any thread). Names must be the limits' names, in order."""
        if observation.names != self.limits.names:
            raise RobotStateError(
                f"state names {list(observation.names)} differ from the robot's "
                f"{list(self.limits.names)}"
            )
        with self._changed:
            self._latest = observation
            self._received_at = time.monotonic()
            self._changed.notify_all()

    def interrupt(self, error: BaseException) -> None:
        """Make the motion thread's next command or wait raise ``error`` (any thread)."""
        with self._changed:
            self._pending = error
            self._changed.notify_all()

    def clear_interrupt(self) -> None:
        with self._changed:
            self._pending = None

    def raise_if_aborted(self) -> None:
        """Raise a pending ``MotionAborted`` now (host planning checks this between IK
        starts, so a stop does not wait for the next command); other interrupts stay."""
        with self._changed:
            if isinstance(self._pending, MotionAborted):
                self._raise_pending_locked()

    def wait_for_state(self, timeout: float) -> Observation:
        """The latest state, waiting up to ``timeout`` wall seconds for the first one."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._latest is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RobotStateError(
                        f"no joint states received within {timeout:g} s; is the robot node "
                        "(sim node or driver) running and publishing /joint_states?"
                    )
                self._changed.wait(left)
            return self._latest

    # ---------------------------------------------------------------- Robot
    def _connect(self) -> None:
        self.wait_for_state(self.stale_after)

    def _disconnect(self) -> None:
        pass

    def _read(self) -> Observation:
        with self._changed:
            latest = self._latest
        if latest is None:
            return self.wait_for_state(self.stale_after)
        return latest

    def _write(self, action: np.ndarray) -> None:
        self._raise_pending()
        self._send(np.asarray(action, float))

    def sleep(self, seconds: float) -> None:
        """Wait until the measured time has advanced by ``seconds`` (at least one new state)."""
        with self._changed:
            self._raise_pending_locked()
            start = self._latest.time if self._latest is not None else None
            while True:
                latest = self._latest
                if (
                    latest is not None
                    and start is not None
                    and (latest.time >= start + seconds - 1e-6 and latest.time > start)
                ):
                    return
                if start is None and latest is not None:
                    start = latest.time
                silent = time.monotonic() - self._received_at
                if silent > self.stale_after:
                    raise RobotStateError(
                        f"joint states stopped: none for {silent:.1f} s while the arm was "
                        "moving; the motion was abandoned"
                    )
                self._changed.wait(min(0.05, self.stale_after))
                self._raise_pending_locked()

    # ---------------------------------------------------------------- helpers
    def _raise_pending(self) -> None:
        with self._changed:
            self._raise_pending_locked()

    def _raise_pending_locked(self) -> None:
        if self._pending is not None:
            error, self._pending = self._pending, None
            raise error
