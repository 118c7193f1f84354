"""The real-time MPC controller as a ROS 2 node: reward specs in, streamed joint targets out.

Subscribes
  * ``/joint_states`` (sensor_msgs/JointState): joints mapped by name (never by order). The
    header stamp is the *measured time* every plan is built on (sim time from the sim node,
    wall time from a hardware driver); a zero stamp falls back to this node's ROS clock (sim
    time if ``use_sim_time`` is set). See ``lang2policy.mpc.realtime`` for the time base.
  * ``/lang2policy/objects`` (visualization_msgs/MarkerArray, ``convert.objects_from_markers``):
    the object poses. When the set of names changes, the planning model is rebuilt.
  * ``/lang2policy/reward_spec`` (std_msgs/String): a reward spec as JSON, validated against
    the objects last seen (``validate_spec``). A good spec starts or swaps the task at the next
    planning iteration (warm start kept); a bad one (malformed, too big, too deep, a number too
    long: ``decode_spec_text``) is reported and changes nothing; JSON ``null`` cancels the task
    and holds.

Parameter ``backend``: ``mpc`` (default) plans every spec with the MPC; ``rl`` runs a shipped
goal-conditioned policy (``rl_policies``: directories, "" = ``models/rl-*``) for each spec of a
family it serves, at the rate it was trained at, and the MPC for every other spec; the status
``stats.backend`` says which ran ("rl:reach" or "mpc").

Planning runs in a worker process (``ProcessMPC``; parameter ``planner_process``, default
true; false plans on a thread in this process, which shares the GIL with the executor). If the
worker dies the error is logged, the task ends ``failed``, the arm holds and later specs are
rejected; the worker exits with the node.

Publishes
  * ``/lang2policy/joint_command`` (trajectory_msgs/JointTrajectory, the safety layer's input)
    at ``control_rate`` while a task runs: points every control period over ``lookahead`` s of
    the current plan (arm joints in rad, ``gripper`` 0..1), header stamp zero (start on
    arrival). When a task ends one last trajectory holds the final target; while idle nothing is
    sent, so other controllers may own the arm (a position-controlled arm holds its last
    command). Nothing is sent while the joint states are stale (``stale_after``).
  * ``/lang2policy/status`` (std_msgs/String, JSON) at ``status_rate``:
    ``{"node": "controller", "state": idle|running|success|failed|timeout, "task", "detail",
    "success", "stats": {rate_hz, plan_ms_mean, plan_ms_p95, latency_ms_mean, ...}}``, and one
    message per spec received with state ``accepted`` (detail: clamped-value notes),
    ``rejected`` (detail: the error) or ``cancelled``.

Until the safety node sits in between, run the sim node with its trajectory input remapped:
``sim_node --ros-args -r /arm_controller/joint_trajectory:=/lang2policy/joint_command``.
"""

from __future__ import annotations

import json
import threading

from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.errors import Lang2PolicyError, RewardSpecError
from lang2policy.graph import topics
from lang2policy.mpc.model import ObjectState
from lang2policy.mpc.process import ProcessMPC
from lang2policy.mpc.realtime import InvalidStateError, RealtimeMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import decode_spec_text, validate_spec
from lang2policy.rl.planner import backend_settings
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters


class ControllerNode(ReadOnlyParameters):
    """``lang2policy_controller``: ``RealtimeMPC`` behind the topic contract above."""

    executable = "controller_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_controller", **kwargs)
        robot = self._param("robot")
        layout = self._param("layout")
        # In its own process the planner never waits for the GIL on this node's callbacks
        # (in-process it fell from ~45 Hz to 1-3 Hz beside the executor on two loaded cores).
        separate = bool(self._param("planner_process"))
        config = MPCConfig(
            sampler=self._param("sampler"),
            samples=int(self._param("samples")),
            horizon=self._param("horizon"),
            threads=int(self._param("threads")),
            # IK-guided candidates (what lifts and places need: without them the graph's MPC
            # timed out on "lift the blue block 10 cm") make many short GIL-releasing MuJoCo
            # calls; in this process, beside the executor's threads, each release could wait a
            # whole GIL switch interval and iterations took seconds. On with a worker process.
            proposals=bool(self._param("proposals", separate)),
        )
        backend = self._backend(robot)
        families = backend.pop("families", [])
        self.control_rate = self._param("control_rate")
        status_rate = self._param("status_rate")
        self.lookahead = self._param("lookahead")
        stale_after = self._param("stale_after")
        self._objects: dict[str, ObjectState] = {}
        self._objects_lock = threading.Lock()
        self._was_active = False
        self.rejected_states = 0
        self.commands_sent = 0
        logger = self.get_logger()
        self.mpc = (ProcessMPC if separate else RealtimeMPC)(
            robot,
            config,
            layout=layout,
            log=logger.warning,
            info=logger.info,
            stale_after=stale_after,
            **backend,
        ).start()
        self._command = self.create_publisher(JointTrajectory, topics.JOINT_COMMAND.relative, 10)
        self._status = self.create_publisher(String, topics.STATUS.relative, 10)
        self.create_subscription(
            JointState, topics.JOINT_STATES.relative, self._on_joint_states, 10
        )
        self.create_subscription(MarkerArray, topics.OBJECTS.relative, self._on_objects, 10)
        self.create_subscription(String, topics.REWARD_SPEC.relative, self._on_spec, 10)
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # not /clock: never wait on the sim
        self._timers = [
            self.create_timer(1.0 / self.control_rate, self._on_control, clock=steady),
            self.create_timer(1.0 / status_rate, self.publish_status, clock=steady),
        ]
        self.get_logger().info(
            f"{robot}: {config.sampler} MPC, {config.samples} samples"
            f"{' + IK proposals' if config.proposals else ''}, {config.horizon:g} s "
            f"horizon, {config.threads} threads; commands at {self.control_rate:g} Hz on "
            f"{topics.JOINT_COMMAND.name}"
            + (f"; RL policies for {families}, the MPC for other specs" if families else "")
        )

    def _backend(self, robot: str) -> dict:
        """The ``backend`` and ``rl_policies`` parameters as the planner's settings."""
        return backend_settings(
            self._param("backend"),
            robot,
            self._param("rl_policies"),
        )

    # ----------------------------------------------------------------- inputs
    def _on_joint_states(self, msg: JointState) -> None:
        stamp = convert.to_seconds(msg.header.stamp)
        if stamp == 0.0:
            stamp = self.get_clock().now().nanoseconds * 1e-9
        names = list(msg.name)
        try:
            if len(msg.position) != len(names):
                raise InvalidStateError(
                    f"JointState has {len(names)} names but {len(msg.position)} positions"
                )
            positions = dict(zip(names, msg.position, strict=True))
            velocities = (
                dict(zip(names, msg.velocity, strict=True))
                if len(msg.velocity) == len(names)
                else None
            )
            with self._objects_lock:
                objects = self._objects
            self.mpc.update_state(stamp, positions, objects, velocities)
        except InvalidStateError as exc:
            self.rejected_states += 1
            self.get_logger().warning(
                f"ignored {topics.JOINT_STATES.name}: {exc}", throttle_duration_sec=2.0
            )

    def _on_objects(self, msg: MarkerArray) -> None:
        objects = self._decoded(convert.objects_from_markers, msg, topics.OBJECTS.name)
        if objects is not None:
            with self._objects_lock:
                self._objects = objects

    def _on_spec(self, msg: String) -> None:
        try:  # bounded (size, nesting, number length): no message can end the node
            data = decode_spec_text(msg.data, what=topics.REWARD_SPEC.name)
        except RewardSpecError as exc:
            self._report("rejected", "", str(exc))
            return
        if data is None:
            self.mpc.set_spec(None)
            self._report("cancelled", "", "holding position")
            return
        with self._objects_lock:
            names = sorted(self._objects)
        try:
            validated = validate_spec(data, names)
            self.mpc.set_spec(validated.spec)
            self._timers[0].reset()  # the control timer (stopped while idle)
        except Lang2PolicyError as exc:  # RewardSpecError, or an object the model lacks
            task = data.get("task", "") if isinstance(data, dict) else ""
            self._report("rejected", str(task)[:200], _spec_error(exc, names))
            return
        self._report("accepted", validated.spec.task, {"notes": list(validated.notes)})

    # ----------------------------------------------------------------- outputs
    def _on_control(self) -> None:
        """Stream the plan while a task runs; one hold message when it ends. Idle, the timer
        stops itself (no 50 Hz wake-ups while nothing runs); an accepted spec re-arms it."""
        active = self.mpc.active
        if not active and not self._was_active:
            self._timers[0].cancel()
            return
        if not self.mpc.fresh:
            if active:
                self.get_logger().warning(
                    f"no fresh {topics.JOINT_STATES.name}: not commanding",
                    throttle_duration_sec=2.0,
                )
            return
        if active:
            self._send(self._plan_points())
            self._was_active = True
        elif self._was_active:
            self._send(self._plan_points(count=1))
            self._was_active = False

    def _plan_points(self, count: int | None = None) -> list[tuple[float, list[float]]]:
        period = 1.0 / self.control_rate
        count = count or max(1, round(self.lookahead / period))
        now = self.mpc.clock()
        points = []
        for k in range(1, count + 1):
            action = self.mpc.action(now + k * period)
            if action is None:
                return []
            points.append((k * period, [action[n] for n in self.mpc.names]))
        return points

    def _send(self, points: list[tuple[float, list[float]]]) -> None:
        if not points:  # an empty trajectory would mean "stop" to the receiver
            return
        try:
            msg = convert.trajectory(self.mpc.names, points)
        except ValueError as exc:  # non-finite: never sent
            self.get_logger().error(f"not sending a command: {exc}")
            return
        self._command.publish(msg)
        self.commands_sent += 1

    def publish_status(self) -> None:
        """The periodic status line (state, task, reason, planning statistics)."""
        stats = self.mpc.stats()
        extra = {"task": stats.task, "success": stats.status == "success"}
        self._publish(stats.status, stats.reason, extra | {"stats": stats.as_dict()})

    def _report(self, state: str, task: str, detail: object) -> None:
        self._publish(state, detail, {"task": task})
        line = f"reward spec {state}: {task} {detail}".rstrip()
        if state == "rejected":  # rclpy wants one severity per call site
            self.get_logger().warning(line)
        else:
            self.get_logger().info(line)

    def _publish(self, state: str, detail: object, extra: dict) -> None:
        event = topics.StatusEvent(topics.CONTROLLER_NODE, state, detail=detail, extra=extra)
        self._status.publish(String(data=json.dumps(event.to_dict())))

    def destroy_node(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self.mpc.stop()
        super().destroy_node()


def _spec_error(exc: Exception, objects: list[str]) -> str:
    text = str(exc)
    if isinstance(exc, RewardSpecError) and not objects:
        text += f" (no objects seen on {topics.OBJECTS.name} yet)"
    return text


main = entry_point(
    ControllerNode, "controller_node", "run the MPC controller until Ctrl-C or shutdown"
)


if __name__ == "__main__":
    raise SystemExit(main())
