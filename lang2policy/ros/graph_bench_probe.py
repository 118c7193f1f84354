"""The outside client of ``lang2policy bench graph``: instructions in, what the graph did out.

``python -m lang2policy.ros.graph_bench_probe PLAN_JSON`` joins the graph of its
``ROS_DOMAIN_ID`` as a user's client would: it hears the status lines, ``/joint_states`` and
the sim node's ground truth (``/sim/objects``), waits for the planner's ``ready``, publishes
each instruction of the plan and records its statuses (receive times), the first joint state
whose arm left where it was at the send, the sim-time span in which the arm moved, the object
poses before, after and at their highest, and for a reward plan the controller's end of the
task. Then the stop: a long shoulder_pan move streamed on ``/lang2policy/joint_command``,
``/lang2policy/stop`` called (std_srvs/Trigger, as the terminal does) at speed, the joint
states around it kept, ``/lang2policy/resume`` called. Progress goes to stderr, the result is
one JSON line on stdout; times are ``time.monotonic()`` (system-wide on Linux), stamps sim
time. The analysis is pure (``lang2policy.bench.graph_bench_analysis``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.graph import topics
from lang2policy.ros import convert

MOVED = 0.01  # rad an arm joint must leave its position at the send to count as motion
MOVING_SPEED = 0.05  # rad/s of an arm joint that counts as moving
CHUNK_POINTS, CHUNK_DT = 5, 0.02  # the stop test's streamer: 5 points 20 ms apart, every 20 ms
STOP_SPEED, STOP_TRAVEL = 0.5, 1.0  # rad/s and rad of the long shoulder_pan move
GRIPPER = "gripper"


def say(text: str) -> None:
    """A progress line on stderr (stdout carries the result)."""
    print(f"[graph-bench] {text}", file=sys.stderr, flush=True)


class Watch:
    """One instruction in flight: what the joint states and objects showed meanwhile."""

    def __init__(self, start: dict[str, float]) -> None:
        self.start = start
        self.first_motion: tuple[float, float] | None = None  # (received, stamp)
        self.moving: list[float] = []  # [first, last] stamp with an arm joint moving
        self.top: dict[str, float] = {}  # object -> highest z seen

    def on_state(self, received: float, stamp: float, arm: dict[str, tuple[float, float]]):
        if self.first_motion is None and any(
            abs(q - self.start[n]) > MOVED for n, (q, _) in arm.items() if n in self.start
        ):
            self.first_motion = (received, stamp)
        if any(abs(v) > MOVING_SPEED for _, v in arm.values()):
            self.moving = [self.moving[0] if self.moving else stamp, stamp]

    def on_objects(self, objects: dict[str, list[float]]) -> None:
        for name, position in objects.items():
            self.top[name] = max(self.top.get(name, position[2]), position[2])


class GraphBenchProbe:
    """Subscribes to the graph's outputs, publishes instructions and commands, calls stop."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("graph_bench_probe")
        self.lock = threading.Lock()
        self.statuses: list[tuple[float, dict]] = []
        self.states: list[tuple[float, float, dict[str, tuple[float, float]]]] = []
        self.latest: dict[str, float] = {}  # every joint of the last joint state
        self.objects: dict[str, list[float]] = {}
        self.objects_received = 0.0
        self.watch: Watch | None = None
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 100)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 200)
        self.node.create_subscription(MarkerArray, topics.SIM_OBJECTS.name, self._on_objects, 10)
        self.instruction = self.node.create_publisher(String, topics.INSTRUCTION.name, 10)
        self.command = self.node.create_publisher(JointTrajectory, topics.JOINT_COMMAND.name, 10)
        self.stop_client = self.node.create_client(Trigger, topics.STOP.name)
        self.resume_client = self.node.create_client(Trigger, topics.RESUME.name)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.spinner = threading.Thread(target=self.executor.spin, name="spin", daemon=True)

    def close(self) -> None:
        """Stop spinning (the thread ends before the context goes), destroy the node."""
        self.executor.shutdown()
        self.spinner.join(timeout=5)
        self.node.destroy_node()

    def _on_status(self, msg: String) -> None:
        try:
            event = json.loads(msg.data)
        except ValueError:
            return
        with self.lock:
            self.statuses.append((time.monotonic(), event))

    def _on_state(self, msg: JointState) -> None:
        received, stamp = time.monotonic(), convert.to_seconds(msg.header.stamp)
        velocity = list(msg.velocity) or [0.0] * len(msg.name)
        named = zip(msg.name, msg.position, velocity, strict=False)
        arm = {n: (q, v) for n, q, v in named if n != GRIPPER}
        with self.lock:
            self.states.append((received, stamp, arm))
            self.latest = dict(zip(msg.name, msg.position, strict=False))
            if self.watch is not None:
                self.watch.on_state(received, stamp, arm)

    def _on_objects(self, msg: MarkerArray) -> None:
        try:
            found = convert.objects_from_markers(msg)
        except ValueError:
            return
        objects = {name: [float(v) for v in o.position] for name, o in found.items()}
        with self.lock:
            self.objects, self.objects_received = objects, time.monotonic()
            if self.watch is not None:
                self.watch.on_objects(objects)

    def index_since(self, since: int, predicate) -> int | None:
        """The index of the first status from ``since`` on that satisfies ``predicate``."""
        with self.lock:
            return next(
                (i for i in range(since, len(self.statuses)) if predicate(self.statuses[i][1])),
                None,
            )

    def status_since(self, since: int, predicate) -> tuple[float, dict] | None:
        index = self.index_since(since, predicate)
        return None if index is None else self.statuses[index]

    def stamp(self) -> float:
        with self.lock:
            return self.states[-1][1] if self.states else 0.0

    def arm_speed(self) -> float:
        with self.lock:
            arm = self.states[-1][2] if self.states else {}
        return max((abs(v) for _, v in arm.values()), default=0.0)


def wait_for(predicate, timeout: float, what: str, poll: float = 0.02):
    """The first truthy value of ``predicate()`` within ``timeout`` s, else TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"no {what} within {timeout:g} s")


def wait_ready(probe: GraphBenchProbe, timeout: float) -> dict:
    """The planner's ``ready`` line (receive time, detail), then the scene on the topics."""
    say("waiting for the planner's 'ready' line...")
    when, event = wait_for(
        lambda: probe.status_since(
            0, lambda s: s.get("node") == topics.PLANNER_NODE and s.get("state") == "ready"
        ),
        timeout,
        "'ready' line from the planner",
    )
    wait_for(lambda: probe.latest and probe.objects, 60, "joint states and /sim/objects")
    wait_for(probe.instruction.get_subscription_count, 60, "planner on the instruction topic")
    return {"t": when, "detail": event.get("detail")}


def run_instruction(probe: GraphBenchProbe, item: dict, timeout: float) -> dict:
    """Send one instruction, wait for its final status and the arm to settle; what happened."""
    text = item["text"]
    with probe.lock:
        since = len(probe.statuses)
        watch = Watch({n: q for n, (q, _) in probe.states[-1][2].items()})
        before = {k: list(v) for k, v in probe.objects.items()}
        probe.watch = watch
        sent, sent_stamp = time.monotonic(), probe.states[-1][1]
    probe.instruction.publish(String(data=text))
    say(f"sent {text!r} ({item['route']} route); waiting for its outcome...")

    def final(s: dict) -> bool:
        return (
            s.get("node") == topics.PLANNER_NODE
            and s.get("instruction") == text
            and s.get("state") in topics.FINAL_PLANNER_STATES
        )

    try:
        ended, outcome = wait_for(lambda: probe.status_since(since, final), timeout, "outcome")
    except TimeoutError:
        ended, outcome = None, {"state": "timeout", "detail": f"no outcome in {timeout:g} s"}
    controller = None
    detail = outcome.get("detail")
    if isinstance(detail, dict) and isinstance(detail.get("controller"), dict):
        controller = detail["controller"].get("state")  # the reward plan ended on its verdict
    elif isinstance(detail, dict) and detail.get("outcome") == "reward_spec":  # older planners
        ended, controller = wait_controller(probe, since, timeout - (time.monotonic() - sent))
    settle(probe)
    with probe.lock:
        probe.watch = None
        statuses = [
            [t, s.get("state"), topics.planner_phase(s)]
            for t, s in probe.statuses[since:]
            if s.get("node") == topics.PLANNER_NODE and s.get("instruction") == text
        ]
        after = {k: list(v) for k, v in probe.objects.items()}
    say(f"{text!r}: {outcome.get('state')}")
    return {
        **item,
        "sent": sent,
        "sent_stamp": sent_stamp,
        "ended": ended,
        "outcome": outcome.get("state"),
        "controller_outcome": controller,
        "outcome_detail": str(outcome.get("detail", ""))[:300],
        "statuses": statuses,
        "first_motion": watch.first_motion,
        "moving": watch.moving,
        "objects_before": before,
        "objects_after": after,
        "objects_top": watch.top,
    }


def wait_controller(probe: GraphBenchProbe, since: int, timeout: float):
    """A reward plan is done for the planner when the spec is handed over; the task ends when
    the controller says so: (receive time, state) of its first final state after it ran the
    task (statuses from ``since`` on), or (None, "no end") after ``timeout`` s."""

    def said(states: tuple[str, ...], start: int) -> int | None:
        return probe.index_since(
            start, lambda s: s.get("node") == topics.CONTROLLER_NODE and s.get("state") in states
        )

    say("the spec is handed over; waiting for the controller to end the task...")
    try:
        began = wait_for(lambda: said(("accepted", "running"), since), max(timeout, 1.0), "task")
        end = wait_for(
            lambda: said(("success", "failed", "timeout", "cancelled", "rejected"), began),
            max(timeout, 1.0),
            "the task's end",
        )
    except TimeoutError:
        return None, "no end"
    with probe.lock:
        when, event = probe.statuses[end]
    return when, event["state"]


def settle(probe: GraphBenchProbe, still_for: float = 0.5, timeout: float = 5.0) -> None:
    """Wait until the arm has been still ``still_for`` s (at most ``timeout``), then for a
    fresh ``/sim/objects``."""
    deadline, still = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if probe.arm_speed() > MOVING_SPEED:
            still = None
        elif still is None:
            still = time.monotonic()
        elif time.monotonic() - still >= still_for:
            break
        time.sleep(0.02)
    asked = time.monotonic()
    with contextlib.suppress(TimeoutError):
        wait_for(lambda: probe.objects_received > asked, 3.0, "fresh objects")


def call(client, timeout: float = 5.0) -> tuple[bool, str]:
    """Call a Trigger service; (success, message)."""
    if not client.wait_for_service(timeout_sec=timeout):
        return False, f"{client.srv_name} is not offered"
    future = client.call_async(Trigger.Request())
    wait_for(future.done, timeout, f"answer of {client.srv_name}", poll=0.002)
    return bool(future.result().success), str(future.result().message)


class Streamer:
    """A long shoulder_pan move streamed as the controller streams: every 20 ms, the next
    100 ms of the ramp from where the arm is."""

    def __init__(self, probe: GraphBenchProbe) -> None:
        self.probe = probe
        with probe.lock:
            self.names = list(probe.latest)
            self.start = dict(probe.latest)
        self.direction = -1.0 if self.start.get("shoulder_pan", 0.0) > 0 else 1.0
        self.t0 = probe.stamp() + 0.1
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def target(self, t: float) -> list[float]:
        pan = self.direction * min(STOP_SPEED * max(t - self.t0, 0.0), STOP_TRAVEL)
        return [self.start[n] + (pan if n == "shoulder_pan" else 0.0) for n in self.names]

    def _run(self) -> None:
        while not self.done.wait(CHUNK_DT):
            now = self.probe.stamp()
            points = [
                (k * CHUNK_DT, self.target(now + k * CHUNK_DT)) for k in range(1, CHUNK_POINTS + 1)
            ]
            self.probe.command.publish(convert.trajectory(self.names, points))

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=5)


def controller_idle(probe: GraphBenchProbe, timeout: float = 60.0) -> str:
    """Wait (at most ``timeout`` s) until the controller's last status is not ``running``: a
    reward task still streaming would move the arm too. Its last state, for the report."""

    def last() -> str:
        with probe.lock:
            said = [s for _, s in probe.statuses if s.get("node") == topics.CONTROLLER_NODE]
        return said[-1].get("state", "") if said else "unknown"

    with contextlib.suppress(TimeoutError):
        wait_for(lambda: last() != "running", timeout, "an idle controller", poll=0.1)
    return last()


def run_stop(probe: GraphBenchProbe) -> dict:
    """The long move, the stop call at speed, the joint states around it, then resume."""
    controller = controller_idle(probe)
    settle(probe)
    say(f"stop: streaming a shoulder_pan move at {STOP_SPEED} rad/s...")
    wait_for(probe.command.get_subscription_count, 30, "safety node on the command topic")
    streamer = Streamer(probe)
    try:
        wait_for(lambda: probe.arm_speed() > 0.8 * STOP_SPEED, 20, "the arm at speed")
        with probe.lock:
            index = len(probe.states)
            called, called_stamp = time.monotonic(), probe.states[-1][1]
        success, message = call(probe.stop_client)
        answered = time.monotonic()
        wait_for(lambda: probe.stamp() >= called_stamp + 1.5, 30, "1.5 s of sim time")
    finally:
        streamer.close()
    with probe.lock:
        states = [
            [received, stamp, {n: list(qv) for n, qv in arm.items()}]
            for received, stamp, arm in probe.states[max(0, index - 5) :]
        ]
    resumed = call(probe.resume_client)
    say(f"stop: answered {success} ({message}) in {1000 * (answered - called):.0f} ms")
    return {
        "called": called,
        "called_stamp": called_stamp,
        "answered": answered,
        "success": success,
        "message": message,
        "resumed": resumed[0],
        "direction": streamer.direction,
        "controller": controller,
        "states": states,
    }


def run_plan(probe: GraphBenchProbe, plan: dict, result: dict) -> None:
    """The whole client session of the bench (see the module docstring), into ``result`` (what
    was measured stays there when a later step times out)."""
    result["ready"] = wait_ready(probe, plan["ready_timeout"])
    say(f"planner ready: {result['ready']['detail']}")
    for item in plan["instructions"]:
        result["tasks"].append(run_instruction(probe, item, plan["task_timeout"]))
    if plan.get("stop", True):
        result["stop"] = run_stop(probe)


def main(argv: list[str] | None = None) -> int:
    """Console entry: run the plan, print the result as one JSON line; 1 if it failed."""
    plan = json.loads((sys.argv[1:] if argv is None else argv)[0])
    rclpy.init()
    probe = GraphBenchProbe()
    probe.spinner.start()
    print(json.dumps({"listening": True}), flush=True)  # the bench launches the graph now
    result: dict = {"ready": None, "tasks": [], "stop": None, "error": None}
    try:
        run_plan(probe, plan, result)
    except KeyboardInterrupt:  # the bench stops the client with SIGINT when it is cut short
        result["error"] = "interrupted"
    except Exception as exc:  # the result says what went wrong; what was measured stays
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        probe.close()
        rclpy.try_shutdown()
    print(json.dumps(result), flush=True)
    return 0 if result.get("error") is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
