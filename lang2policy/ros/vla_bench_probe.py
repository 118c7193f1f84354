"""The outside client of ``lang2policy bench vla --graph``: one skill in, what the graph did out.

``python -m lang2policy.ros.vla_bench_probe PLAN_JSON`` joins the graph of its
``ROS_DOMAIN_ID`` as a user's client would, for one evaluation episode. It waits until the
graph is there: the safety node says ``ok`` (it has joint states), the sim node's ground truth
(``/sim/objects``) came twice, the VLA node listens on ``/lang2policy/skill`` and the safety
node on ``/lang2policy/joint_command``; then ``settle`` s more, so that the VLA node, which
reads the same object poses, has this scene's too. It then publishes the plan's skill on
``/lang2policy/skill`` (plain text, the VLA node's stable contract), and until the VLA node's
terminal status (``success``, ``timeout``, ``failed``, ``stopped``, ``cancelled``,
``rejected``) records every VLA status line, the receive time of every
``/lang2policy/joint_command`` message (those with points: targets; without: holds) and how
far the arm's joints went from where they were at the send (``/joint_states``: the commands
reached the arm). The object poses at the send and at the terminal status go into the result,
for the bench's own judge. The result is one JSON line on stdout (times in s after the send,
``time.monotonic``); nothing else is printed, but for errors on stderr. The analysis is pure
(``lang2policy.bench.vla_graph_report``).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from lang2policy.graph import topics
from lang2policy.ros import convert

GRIPPER = "gripper"


class VLABenchProbe:
    """Hears the VLA node's statuses, its joint commands, the safety state and the objects;
    publishes skills."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("vla_bench_probe")
        self.lock = threading.Lock()
        self.statuses: list[tuple[float, dict]] = []  # (received, VLA status line)
        self.targets: list[float] = []  # receive times of commands with points
        self.holds: list[float] = []  # ... and of holds (no points)
        self.safety_ok = False
        self.objects: dict[str, list[float]] = {}  # name -> x, y, z, qw, qx, qy, qz
        self.object_messages = 0
        self.arm: dict[str, float] = {}  # the latest arm joint positions (rad)
        self.arm_from: dict[str, float] | None = None  # ... at the send
        self.travel = 0.0  # rad: the largest joint excursion from ``arm_from``
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 100)
        self.node.create_subscription(String, topics.SAFETY.name, self._on_safety, 10)
        self.node.create_subscription(
            JointTrajectory, topics.JOINT_COMMAND.name, self._on_command, 100
        )
        self.node.create_subscription(MarkerArray, topics.SIM_OBJECTS.name, self._on_objects, 10)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 100)
        self.skill = self.node.create_publisher(String, topics.SKILL.name, 10)
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
        if isinstance(event, dict) and event.get("node") == topics.VLA_NODE:
            with self.lock:
                self.statuses.append((time.monotonic(), event))

    def _on_safety(self, msg: String) -> None:
        try:
            state = json.loads(msg.data).get("state")
        except (ValueError, AttributeError):
            return
        self.safety_ok = state == "ok"

    def _on_command(self, msg: JointTrajectory) -> None:
        with self.lock:
            (self.targets if msg.points else self.holds).append(time.monotonic())

    def _on_state(self, msg: JointState) -> None:
        arm = {n: q for n, q in zip(msg.name, msg.position, strict=False) if n != GRIPPER}
        with self.lock:
            self.arm = arm
            if self.arm_from is not None:
                gaps = [abs(q - self.arm_from[n]) for n, q in arm.items() if n in self.arm_from]
                self.travel = max([self.travel, *gaps])

    def _on_objects(self, msg: MarkerArray) -> None:
        try:
            found = convert.objects_from_markers(msg)
        except ValueError:
            return
        objects = {n: [float(v) for v in (*o.position, *o.quat)] for n, o in found.items()}
        with self.lock:
            self.objects, self.object_messages = objects, self.object_messages + 1

    def graph_ready(self) -> bool:
        """The safety node has joint states, the scene came twice, both listeners are there
        (the VLA node on the skill topic, the safety node and this probe on the commands)."""
        return (
            self.safety_ok
            and bool(self.arm)
            and self.object_messages >= 2
            and self.skill.get_subscription_count() > 0
            and self.node.count_subscribers(topics.JOINT_COMMAND.name) >= 2
        )

    def terminal_since(self, since: int) -> tuple[float, dict] | None:
        with self.lock:
            final = topics.FINAL_SKILL_STATES
            return next((s for s in self.statuses[since:] if s[1].get("state") in final), None)


def wait_for(predicate, timeout: float, what: str, poll: float = 0.02):
    """The first truthy value of ``predicate()`` within ``timeout`` s, else TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"no {what} within {timeout:g} s")


def run_episode(probe: VLABenchProbe, plan: dict, result: dict) -> None:
    """Wait for the graph, send the skill, record until its terminal status (into ``result``:
    what was measured stays there when a later step times out)."""
    began = time.monotonic()
    wait_for(probe.graph_ready, plan["ready_timeout"], "graph (safety ok, objects, listeners)")
    time.sleep(plan["settle"])
    with probe.lock:
        since = len(probe.statuses)
        sent = time.monotonic()
        result["start_objects"] = dict(probe.objects)
        probe.arm_from = dict(probe.arm)
    result["ready_s"] = round(sent - began, 2)
    probe.skill.publish(String(data=plan["skill"]))
    try:
        ended, final = wait_for(lambda: probe.terminal_since(since), plan["timeout"], "end")
    finally:
        with probe.lock:
            result["end_objects"] = dict(probe.objects)
            result["statuses"] = [[round(t - sent, 3), s] for t, s in probe.statuses[since:]]
            result["targets"] = [round(t - sent, 4) for t in probe.targets if t >= sent]
            result["holds"] = [round(t - sent, 4) for t in probe.holds if t >= sent]
            result["arm_travel_rad"] = round(probe.travel, 4)
    result["final"] = final
    result["wall_s"] = round(ended - sent, 3)


def main(argv: list[str] | None = None) -> int:
    """Console entry: run the plan, print the result as one JSON line; 1 if it failed."""
    plan = json.loads((sys.argv[1:] if argv is None else argv)[0])
    rclpy.init()
    probe = VLABenchProbe()
    probe.spinner.start()
    result: dict = {"final": None, "error": None}
    try:
        run_episode(probe, plan, result)
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
