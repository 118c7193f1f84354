"""Teleoperation for demonstrations: a leader SO-101 or the keyboard drives the follower.

``lang2policy_teleop`` streams joint targets at ``rate`` Hz from its ``source`` to
``/lang2policy/joint_command``, the safety node's input (never around it: limits, workspace,
speed and the stop button apply as to any commander). Each target is a one-point
JointTrajectory reached in one period. When the source goes stale (no good target for
``stale_timeout`` s) or faults (a leader reading with a bad checksum, a timeout or a tick out of
range; the keyboard's input closed) it sends one hold (a trajectory with no points: the safety
node holds at the measured position) and streams again once good targets return.

Sources (``source``):
  * ``keyboard``: keys from this process's stdin (a terminal in cbreak mode, or a pipe) move
    the tool in Cartesian steps through the IK, or joints, and open/close the gripper
    (``lang2policy.teleop.keyboard``); the target starts at the measured joint state.
  * ``leader:<port>``: a leader SO-101 on its own serial port, read-only
    (``lang2policy.teleop.leader``), calibrated by ``leader_calibration`` (the driver's format).

Episodes: space starts one with the ``task`` text and stops it (kept), x stops it discarded.
The marks are status lines on ``/lang2policy/status`` (``node`` ``teleop``): ``received``
(``instruction``: the task), ``done``, ``discarded``; the recorder cuts an MCAP file per episode
at them (``lang2policy.recording.EpisodeTracker``), named after the task. The node also says
``waiting``, ``streaming`` and ``holding`` (``detail``: the reason) on every change.

Parameters: ``source``, ``task``, ``rate`` (25 Hz), ``stale_timeout`` (0.25 s),
``leader_calibration`` ("" = hardware/so101/calibration.yaml), ``bus_timeout`` (s per reply),
``port_wait`` (s for the leader's port to appear), ``margin_ticks``, ``step_m`` and ``step_rad``
(keyboard steps), ``robot``.
"""

from __future__ import annotations

import json
import os
import signal
import time
import traceback

import numpy as np
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from lang2policy.errors import ConfigError
from lang2policy.graph.topics import JOINT_COMMAND, JOINT_STATES, STATUS, TELEOP_NODE, StatusEvent
from lang2policy.robots.feetech.bus_errors import FeetechError
from lang2policy.robots.so101.calibration import Calibration
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.ros.so101_driver_node import wait_for_port
from lang2policy.teleop import (
    HELP,
    Episode,
    IkToolStepper,
    KeyboardTeleop,
    LeaderArm,
    LeaderFault,
    Source,
    TargetStream,
    parse_source,
    read_only_bus,
)
from lang2policy.teleop.keyboard import KeyResult, episode_key
from lang2policy.teleop.stream import HOLDING, KEYBOARD, STREAMING
from lang2policy.teleop.terminal_keys import EOF_KEY, KeyReader


class TeleopNode(ReadOnlyParameters):
    """``lang2policy_teleop`` (see the module docstring)."""

    executable = "teleop_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_teleop", **kwargs)
        source = self._param("source")
        self.source: Source = parse_source(source)
        self.episode = Episode(self._param("task"))
        rate = self._param("rate")
        self.period = 1.0 / rate
        stale = self._param("stale_timeout")
        self.stream = TargetStream(stale)
        self.keyboard: KeyboardTeleop | None = None
        self.leader: LeaderArm | None = None
        if self.source.kind == KEYBOARD:
            self.keyboard = self._keyboard()
            self.names = self.keyboard.names
        else:
            self.leader = self._leader()
            self.names = self.leader.names
        self.measured: np.ndarray | None = None
        self.keyboard_lost = False
        self._traceback_logged = False  # an unexpected source error's traceback: logged once
        self._said: tuple[str, str] | None = None
        self._command = self.create_publisher(JointTrajectory, JOINT_COMMAND.relative, 10)
        self._status = self.create_publisher(String, STATUS.relative, 10)
        self.create_subscription(JointState, JOINT_STATES.relative, self._on_joint_state, 10)
        self.keys = KeyReader()
        self.keys.start()
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._timer = self.create_timer(self.period, self._tick, clock=steady)
        self.get_logger().info(
            f"teleop from {self.source} at {rate:g} Hz -> {JOINT_COMMAND.name}; task "
            f"{self.episode.task or '(none: give task to record episodes)'!r}"
        )
        self.keys.show(HELP)

    def _keyboard(self) -> KeyboardTeleop:
        robot = self._param("robot")
        step_m = self._param("step_m")
        step_rad = self._param("step_rad")
        try:
            return KeyboardTeleop(IkToolStepper(robot), step_m, step_rad)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    def _leader(self) -> LeaderArm:
        path = self._param("leader_calibration")
        timeout = self._param("bus_timeout")
        margin = self._param("margin_ticks")
        wait_for_port(self.source.port, self._param("port_wait"))
        leader = LeaderArm(
            read_only_bus(self.source.port, timeout=timeout),
            Calibration.load(path or None),
            int(margin),
        )
        leader.connect()  # every servo answers, torque off; or the node ends saying why
        return leader

    @staticmethod
    def now() -> float:
        return time.monotonic()

    # ------------------------------------------------------------------ inputs
    def _on_joint_state(self, msg: JointState) -> None:
        positions = dict(zip(msg.name, msg.position, strict=False))
        if len(msg.name) != len(msg.position) or any(n not in positions for n in self.names):
            self.get_logger().warning(
                f"ignored {JOINT_STATES.name}: needs positions of {list(self.names)}",
                throttle_duration_sec=2.0,
            )
            return
        self.measured = np.array([positions[n] for n in self.names], float)
        ready = self.keyboard is not None and self.keyboard.target is None
        if ready and np.all(np.isfinite(self.measured)):
            self.keyboard.start(self.measured)

    def _tick(self) -> None:
        now = self.now()
        for key in self.keys.pressed():
            self._on_key(key)
        self._read_source(now)
        step = self.stream.step(now)
        if step.target is not None:
            self._command.publish(convert.trajectory(self.names, [(self.period, step.target)]))
        elif not self.stream.hold_sent:
            self._command.publish(JointTrajectory(joint_names=list(self.names)))
            self.stream.hold_sent = True
        self._say(step.state, step.reason)

    def _read_source(self, now: float) -> None:
        if self.leader is not None:
            try:
                self.stream.update(self.leader.read().target, now)
            except Exception as exc:  # any failure of the source is a fault: hold, say why
                self._source_fault(exc, now)
        elif self.keyboard_lost:
            self.stream.fault("the keyboard's input closed", now)
        elif self.keyboard is not None and self.keyboard.target is not None:
            self.stream.update(self.keyboard.target, now)

    def _source_fault(self, exc: Exception, now: float) -> None:
        """Reading the leader failed: the arm holds (one hold command, from ``_tick``), the
        status says why, and the node keeps running to stream again on the next good reading.
        A bus error or an impossible reading is expected; any other exception is a fault too
        (a dead node would leave the arm on its last target with no word), logged with its
        traceback the first time."""
        expected = isinstance(exc, FeetechError | LeaderFault)
        reason = f"leader: {exc}" if expected else f"leader: {type(exc).__name__}: {exc}"
        self.stream.fault(reason, now)
        if not expected and not self._traceback_logged:
            self._traceback_logged = True
            self.get_logger().error(f"{reason}\n{traceback.format_exc()}")
        else:
            self.get_logger().error(reason, throttle_duration_sec=1.0)

    def _on_key(self, key: str) -> None:
        if key == EOF_KEY:
            self.keyboard_lost = self.keyboard is not None
            return
        if self.keyboard is not None:
            result = self.keyboard.press(key)
        else:  # the leader moves the arm; the keyboard only marks episodes and quits
            result = episode_key(key) or KeyResult(message="the leader arm moves the follower")
        if result.episode:
            self._episode(result.episode)
        elif result.quit:
            self._quit()
        elif result.message:
            self.keys.show(f"{result.message} | {self._line()}")

    def _episode(self, mark: str) -> None:
        starting = mark == "toggle" and not self.episode.active
        if starting and (self._said or ("",))[0] != STREAMING:
            self.keys.show(f"the arm is not following yet: no episode | {self._line()}")
            return
        try:
            if starting:
                task, state = self.episode.start(), "received"
            else:
                task, state = self.episode.stop(), "discarded" if mark == "discard" else "done"
        except ConfigError as exc:
            self.keys.show(f"{exc} | {self._line()}")
            return
        self._publish(state, f"episode {self.episode.count}", task)
        self.get_logger().info(f"episode {self.episode.count} {state}: {task!r}")
        self.keys.show(self._line())

    def _quit(self) -> None:
        """Hold, then stop the process as Ctrl-C would (the clean path of ``spin_node``)."""
        self._command.publish(JointTrajectory(joint_names=list(self.names)))
        if self.episode.active:
            self._episode("toggle")
        os.kill(os.getpid(), signal.SIGINT)

    # ------------------------------------------------------------------ outputs
    def _line(self) -> str:
        mode = self.keyboard.status_line() if self.keyboard is not None else str(self.source)
        recording = f"REC {self.episode.count}" if self.episode.active else "not recording"
        return f"{mode} | {recording} | task {self.episode.task!r} | h help"

    def _say(self, state: str, reason: str) -> None:
        if (state, reason) == self._said:
            return
        self._said = (state, reason)
        self._publish(state, reason)
        if state == HOLDING:
            self.get_logger().warning(f"holding: {reason}")
        self.keys.show(f"{state}{': ' + reason if reason else ''} | {self._line()}")

    def _publish(self, state: str, detail: str, instruction: str = "") -> None:
        event = StatusEvent(
            TELEOP_NODE,
            state,
            instruction,
            detail,
            extra={"source": str(self.source), "streaming": state == STREAMING},
        )
        self._status.publish(String(data=json.dumps(event.to_dict())))

    def destroy_node(self) -> None:
        if (timer := getattr(self, "_timer", None)) is not None:
            timer.cancel()
        if (keys := getattr(self, "keys", None)) is not None:
            keys.stop()
        if (leader := getattr(self, "leader", None)) is not None:
            leader.close()
        super().destroy_node()


main = entry_point(TeleopNode, "teleop_node", "teleoperate until q, Ctrl-C or ROS shutdown")


if __name__ == "__main__":
    raise SystemExit(main())
