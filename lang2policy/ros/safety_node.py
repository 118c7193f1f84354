"""The safety node: the only path from commanders to the robot, and the stop button.

Subscribes
  * ``/lang2policy/joint_command`` (trajectory_msgs/JointTrajectory): raw commands from the
    planner and the controller. Each is parsed (``convert.trajectory_points``) and run through
    the motion filter (``lang2policy.safety``): joint limits, workspace and keep-out zones on
    the tool centre point, joint speed (retimed), NaN/inf and malformed commands dropped; then
    shaped (the target's speed below the cap by the servo's overshoot, its acceleration
    bounded, at rest at the last point) and every sample guarded on the gripper's geometry.
  * ``/joint_states`` (sensor_msgs/JointState): the measured positions the filter starts from;
    their arrival times feed the watchdog, their stamps time (and stamp) the commands.
  * ``/lang2policy/plan_zones`` (std_msgs/String, JSON, latched): the running plan's keep-out
    zones (``safety.plan_zones``), enforced with the configured ones on the gripper's geometry
    of every motion from every source until the next message.

Publishes
  * ``/arm_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory): shaped commands,
    stamped with robot time (the robot starts each at its stamp, as joint_trajectory_controller
    reads a header stamp, and refuses one older than its ``command_deadline``); while one runs,
    its remainder is re-sent stamped anew every ``heartbeat_period`` (0.1 s), so a robot whose
    stamped stream stops knows this node is gone and brakes. A *hold* is a trajectory with
    joint names and no points ("stop and hold at the measured position", as ros2_control's
    joint_trajectory_controller and the sim node read it).
  * ``/lang2policy/safety`` (std_msgs/String, JSON): ``{"node": "safety", "state": "ok" |
    "stopped" | "holding", "reason": str, "robot_time": float | null (the latest joint state's
    stamp), "detail": {"passed", "clipped", "rejected",
    "blocked", "last_violation", "robot"}}`` on every change of state or reason and at
    ``status_rate``.

Serves ``/lang2policy/stop`` and ``/lang2policy/resume`` (std_srvs/Trigger), answered at once
with no LLM anywhere near: stop publishes the hold *before* it answers and latches; every
command is ignored until resume, which is refused while joint states are missing or stale.
A steady-clock timer (``watchdog_rate``) holds the arm when joint states go stale or a
commander falls silent while its trajectory still runs. It runs only while a trajectory runs
(a command re-arms it); in between, nothing moves, and the same check rides on the periodic
status (``status_rate``), so an idle node wakes a few times a second, not 50 (issue 16).

Parameters (read-only): ``robot`` (so101), ``config`` (limits file; empty: the packaged
config/safety.yaml), ``state_timeout`` and ``command_timeout`` (s; 0, the default, keeps the
file's values: 0.5 and 0.25), ``watchdog_rate`` (50 Hz), ``status_rate`` (2 Hz),
``heartbeat_period`` (0.1 s of robot time).

All callbacks share the node's default (mutually exclusive) callback group, so a command being
filtered and a stop never interleave: a command filtered before a stop is published before its
hold, never after.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time

from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from lang2policy.errors import ConfigError, InvalidCommandError
from lang2policy.graph.topics import (
    JOINT_COMMAND,
    JOINT_STATES,
    PLAN_ZONES,
    RESUME,
    SAFETY,
    SAFETY_NODE,
    STOP,
    TRAJECTORY,
    StatusEvent,
)
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.ros.qos import LATCHED
from lang2policy.safety import (
    Decision,
    RobotSafetyConfig,
    SafetySupervisor,
    Trajectory,
    Watchdog,
    load_safety_config,
    safety_model_for,
)
from lang2policy.safety.plan_zones import decode_plan_zones


class SafetyNode(ReadOnlyParameters):
    """``lang2policy_safety``: ``SafetySupervisor`` behind the topic contract above."""

    executable = "safety_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_safety", **kwargs)
        self.robot = self._param("robot")
        path = self._param("config")
        config = self._with_timeouts(load_safety_config(self.robot, path or None))
        watchdog_rate = self._param("watchdog_rate")
        status_rate = self._param("status_rate")

        heartbeat = self._param("heartbeat_period")
        self._lock = threading.RLock()  # one supervisor event (and its output) at a time
        model = safety_model_for(self.robot, config)
        self.supervisor = SafetySupervisor(
            model.filter,
            Watchdog(config.state_timeout, config.command_timeout),
            shaper=model.shaper,
            guard=model.guard,
            heartbeat_period=heartbeat,
        )
        self._published_state: tuple[str, str] | None = None
        self._robot_pub = self.create_publisher(JointTrajectory, TRAJECTORY.relative, 10)
        self._status_pub = self.create_publisher(String, SAFETY.relative, 10)
        self.create_subscription(JointTrajectory, JOINT_COMMAND.relative, self._on_command, 10)
        self.create_subscription(JointState, JOINT_STATES.relative, self._on_joint_state, 10)
        self.create_subscription(String, PLAN_ZONES.relative, self._on_plan_zones, LATCHED)
        # One callback group (a second one made rclpy's multi-threaded executor starve the
        # sim node's timer 5x in a shared process); the lock serialises supervisor events and
        # their output, so a command decided before a stop is never sent after its hold.
        # As resolved in this node's namespace (an arm of a fleet: /arm1/lang2policy/stop).
        self._stop_name = self.resolve_service_name(STOP.relative)
        self._resume_name = self.resolve_service_name(RESUME.relative)
        self.create_service(Trigger, STOP.relative, self._on_stop)
        self.create_service(Trigger, RESUME.relative, self._on_resume)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._watchdog = self.create_timer(1.0 / watchdog_rate, self._on_tick, clock=steady)
        self.create_timer(1.0 / status_rate, self._on_status_timer, clock=steady)
        self._log_start(config)
        self.publish_status()

    def _with_timeouts(self, config: RobotSafetyConfig) -> RobotSafetyConfig:
        """``config`` with the timeout parameters applied (0, the default: keep the file's)."""
        state = self._param("state_timeout")
        command = self._param("command_timeout")
        return dataclasses.replace(
            config,
            state_timeout=state or config.state_timeout,
            command_timeout=command or config.command_timeout,
        )

    def _log_start(self, config: RobotSafetyConfig) -> None:
        box = config.workspace
        self.get_logger().info(
            f"{self.robot}: joints {list(self.supervisor.filter.names)}; max joint speed "
            f"{config.max_joint_speed:g} rad/s (targets <= "
            f"{config.max_joint_speed / (1 + config.servo_overshoot):.3g} rad/s, accelerating <= "
            f"{config.max_joint_acceleration:g}, slowing <= "
            f"{config.max_joint_deceleration or config.max_joint_acceleration:g} rad/s^2); "
            f"tool workspace min {list(box.min)} max "
            f"{list(box.max)}; keep-out {sorted(config.keep_out)} "
            f"(+{config.zone_margin:g} m on the gripper); state_timeout "
            f"{config.state_timeout:g} s, command_timeout {config.command_timeout:g} s; "
            f"{JOINT_COMMAND.name} -> {TRAJECTORY.name}"
        )

    @staticmethod
    def now() -> float:
        """The watchdog's clock: monotonic (steady) seconds."""
        return time.monotonic()

    # ------------------------------------------------------------------ callbacks
    def _on_joint_state(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            self.get_logger().error(
                f"ignored {JOINT_STATES.name}: {len(msg.name)} names but "
                f"{len(msg.position)} positions",
                throttle_duration_sec=2.0,
            )
            return
        stamp = convert.to_seconds(msg.header.stamp) or None  # unstamped: use arrival time
        positions = dict(zip(msg.name, msg.position, strict=True))
        velocities = (
            dict(zip(msg.name, msg.velocity, strict=True))
            if len(msg.velocity) == len(msg.name)
            else None
        )
        with self._lock:
            decision = self.supervisor.on_joint_state(self.now(), stamp, positions, velocities)
            self._apply(decision)
        if not decision.ok:
            self.get_logger().error(decision.message, throttle_duration_sec=2.0)

    def _on_command(self, msg: JointTrajectory) -> None:
        try:
            points = convert.trajectory_points(msg, self.supervisor.filter.names)
        except InvalidCommandError as exc:
            with self._lock:
                decision = self.supervisor.reject(self.now(), f"command rejected: {exc}")
                self._apply(decision)
        else:
            command = Trajectory.from_named(list(msg.joint_names), points)
            with self._lock:  # decided and sent before a stop can slip in between
                decision = self.supervisor.on_command(self.now(), command)
                self._apply(decision)
                if self._watchdog.is_canceled():
                    self._watchdog.reset()
        if not decision.ok:
            self.get_logger().warning(decision.message, throttle_duration_sec=1.0)
        elif decision.message:
            self.get_logger().info(
                f"command changed: {decision.message}", throttle_duration_sec=1.0
            )

    def _on_plan_zones(self, msg: String) -> None:
        """The running plan's keep-out zones: enforced on every motion until the next message.
        A malformed message is refused and the zones kept (a plan's zones only ever narrow
        what the arm may do; forgetting them on bad input would widen it)."""
        try:
            plan_id, zones = decode_plan_zones(msg.data)
        except ConfigError as exc:
            self.get_logger().error(
                f"ignored {PLAN_ZONES.name}: {exc}; the zones stay as they were"
            )
            return
        with self._lock:
            message = self.supervisor.set_plan_zones(zones)
        self.get_logger().info(f"{message} (plan {plan_id})")
        self.publish_status()

    def _on_tick(self) -> None:
        with self._lock:
            self._apply(self.supervisor.tick(self.now()))
            self._apply(self.supervisor.heartbeat(self.now()))
            if not self.supervisor.watchdog.command_running(self.now()):
                self._watchdog.cancel()  # nothing runs: the status timer watches meanwhile

    def _on_status_timer(self) -> None:
        if self._watchdog.is_canceled():
            with self._lock:
                self._apply(self.supervisor.tick(self.now()))
        self.publish_status()

    def _on_stop(self, _request: Trigger.Request, response: Trigger.Response):
        with self._lock:
            decision = self.supervisor.stop(self.now(), f"stop requested on {self._stop_name}")
            self._apply(decision)  # the hold goes out before the answer (and before any command)
        self.get_logger().warning(f"{self._stop_name}: {decision.message}")
        response.success, response.message = True, decision.message
        return response

    def _on_resume(self, _request: Trigger.Request, response: Trigger.Response):
        with self._lock:
            decision = self.supervisor.resume(self.now())
            self._apply(decision)
        # rclpy ties a severity to each call site: one call per severity.
        if decision.ok:
            self.get_logger().info(f"{self._resume_name}: {decision.message}")
        else:
            self.get_logger().warning(f"{self._resume_name}: {decision.message}")
        response.success, response.message = decision.ok, decision.message
        return response

    # ------------------------------------------------------------------ output
    def _apply(self, decision: Decision) -> None:
        """Publish what ``decision`` sends, then the status if the state or reason changed."""
        if decision.send is not None:
            points = [(t, list(values)) for t, values in decision.send.points]
            self._robot_pub.publish(
                convert.trajectory(decision.send.names, points, stamp=decision.stamp)
            )
        state = (self.supervisor.state, self.supervisor.reason)
        if state != self._published_state:
            self.get_logger().info(f"state {state[0]}" + (f": {state[1]}" if state[1] else ""))
            self.publish_status()

    def publish_status(self) -> None:
        with self._lock:
            status = self.supervisor.status()
            self._published_state = (status["state"], status["reason"])
            event = StatusEvent(
                SAFETY_NODE,
                status["state"],
                detail={**status["detail"], "robot": self.robot},
                extra={"reason": status["reason"], "robot_time": status["robot_time"]},
            )
            self._status_pub.publish(String(data=json.dumps(event.to_dict())))

    def destroy_node(self) -> None:
        """Leave no trajectory running behind a safety layer that is going away."""
        if self.supervisor.watchdog.command_running(self.now()):
            self._robot_pub.publish(convert.trajectory(self.supervisor.filter.names, []))
        super().destroy_node()


main = entry_point(SafetyNode, "safety_node", "run the safety node until Ctrl-C or ROS shutdown")


if __name__ == "__main__":
    raise SystemExit(main())
