"""The planner as a ROS 2 node: instructions in, plans run through the sandbox, status out.

Subscribes ``/lang2policy/instruction`` (std_msgs/String) and publishes one JSON object per
status line on ``/lang2policy/status`` (std_msgs/String): ``{"state": "received" | "planning" |
"running" | "done" | "failed" | "rejected" | "busy", "instruction": ..., "detail": ...}``.
Planning and execution run in a worker thread, one instruction at a time, so the node keeps
answering while the LLM thinks; an instruction that arrives while one is running is refused
with ``busy`` (corrections and ``stop`` arrive with the terminal and safety nodes).

Where skills execute (parameter ``execute``):
  * ``graph`` (default): on the arm in the graph. The node keeps a mirror of the scene from
    ``/joint_states`` and ``/lang2policy/objects`` and streams the primitives' commands on
    ``/lang2policy/joint_command`` (the safety node's input), see ``lang2policy.ros.graph_arm``.
    Before a code plan runs, a running reward task is cancelled (``null`` on the spec topic).
  * ``local``: on an in-process simulated arm (``robot``, ``seed``, ``objects`` parameters), as
    ``lang2policy run`` does; nothing moves in the graph.
The history of the session is kept, so follow-up instructions work.

Stop: when the safety node reports ``stopped`` on ``/lang2policy/safety``, the running motion is
aborted at its next control step, no repair is attempted, and a running reward task is
cancelled; the instruction ends ``failed`` with the reason.

Routing (parameter ``planner``: ``code`` | ``reward`` | ``auto``, default ``auto``): each
instruction goes to Code as Policies or to Language to Rewards, as
``lang2policy.planning.route.choose_planner`` decides. A reward-routed instruction is planned
into a reward spec (``lang2policy.l2r.planner.RewardPlanner``) and published as JSON on
``/lang2policy/reward_spec`` for the MPC controller node; the last spec is kept as the running
one, so a follow-up like "higher" edits it. Reward specs name the objects of the live scene
(``/lang2policy/objects``, with their positions and headings) when that topic has been heard,
else the objects of the in-process session. ``reward_llm`` (default: the ``llm`` setting) picks
the LLM of the reward planner; with the same setting both planners share one client. Every
instruction's status carries its route: ``"received"`` has ``{"route": ...}`` as its detail and
the final ``done`` detail has ``"route"`` too (for reward: the spec, notes, description, code).
"""

from __future__ import annotations

import json
import math
import threading
import time

from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from lang2policy.commands.run import (
    RunRequest,
    build_planning,
    build_session,
    check_instruction,
)
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.planning.route import SETTINGS, choose_planner
from lang2policy.ros import convert
from lang2policy.ros.entry import spin_node
from lang2policy.ros.graph_arm import GraphArm
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.ros.planner_corrections import PlannerCorrections
from lang2policy.session.readout import scene_readout
from lang2policy.skills.remote import RemoteSkillBackend
from lang2policy.wire_json import MessageError, decode_status

INSTRUCTION_TOPIC = "/lang2policy/instruction"
STATUS_TOPIC = "/lang2policy/status"
SPEC_TOPIC = "/lang2policy/reward_spec"
OBJECTS_TOPIC = "/lang2policy/objects"
SAFETY_TOPIC = "/lang2policy/safety"
EXECUTE_MODES = ("graph", "local")


class PlannerNode(ReadOnlyParameters, PlannerCorrections):
    """``lang2policy_planner``: Code-as-Policies planning + sandboxed execution."""

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_planner", **kwargs)
        objects = self._param("objects", "", 'comma-separated objects, "" = chosen by the seed')
        request = RunRequest(
            instruction="",
            robot=self._param("robot", "so101", "robot description (config/robots/<name>.yaml)"),
            objects=tuple(o.strip() for o in objects.split(",") if o.strip()) or None,
            llm=self._param("llm", "local", "local | openai | replay:FILE | record:FILE"),
            seed=int(self._param("seed", 0, "scene seed")),
        )
        self.route = self._param("planner", "auto", "code | reward | auto (choose per instruction)")
        if self.route not in SETTINGS:
            raise ConfigError(f"parameter 'planner' must be one of {list(SETTINGS)}, "
                              f"got {self.route!r}")
        self.reward_llm = self._param("reward_llm", "", 'LLM of the reward planner; "" = llm')
        self.execute = self._param("execute", "graph", "graph (the arm in the graph) | local")
        if self.execute not in EXECUTE_MODES:
            raise ConfigError(f"parameter 'execute' must be one of {list(EXECUTE_MODES)}, "
                              f"got {self.execute!r}")
        self.wait_for_scene = self._number(
            "scene_timeout", 10.0, "seconds to wait for joint states and objects (graph)"
        )
        self.arm = None
        if self.execute == "graph":
            self.arm = GraphArm(
                self,
                request.robot,
                control_period=1.0 / self._number("control_rate", 50.0, "command rate (Hz)"),
                stale_after=self._number("state_timeout", 2.0, "s without joint states = lost"),
            )
            self.session = self.arm.session
            self.backend = RemoteSkillBackend(self.session)
            self.planning = build_planning(self.backend, request.llm)
            self.objects = []
        else:
            self.session, self.objects, self.planning = build_session(request)
        self._stopped = threading.Event()  # set by a stop during the running instruction
        self._stop_reason = ""
        self.planning.cancelled = self._stopped.is_set
        self.planning.runner.cancelled = self._stop_pending
        self.safety_state = "unknown"
        self.llm_setting = request.llm
        self.current_spec = None  # the last reward spec sent: what a correction edits
        self._reward_planner = None
        self._reward_objects: tuple[str, ...] = ()
        self._live_objects: dict[str, tuple[float, ...]] = {}  # name -> [x, y, z]
        self._live_headings: dict[str, float] = {}  # name -> yaw (degrees)
        self._status = self.create_publisher(String, STATUS_TOPIC, 10)
        self._spec = self.create_publisher(String, SPEC_TOPIC, 10)
        self.create_subscription(String, INSTRUCTION_TOPIC, self._on_instruction, 10)
        self.create_subscription(MarkerArray, OBJECTS_TOPIC, self._on_objects, 10)
        self.create_subscription(String, SAFETY_TOPIC, self._on_safety, 10)
        self._busy = threading.Lock()
        self._worker: threading.Thread | None = None
        self.current_instruction, self.current_route = "", ""
        self._setup_corrections()
        scene = ", ".join(self.objects) if self.objects else f"the graph's arm ({self.execute})"
        self.get_logger().info(f"ready: {request.robot} with {scene}; planner {self.route}")

    def publish_status(self, state: str, instruction: str, detail: object = "") -> None:
        message = String()
        message.data = json.dumps({"state": state, "instruction": instruction, "detail": detail})
        self._status.publish(message)
        self.get_logger().info(f"{state}: {instruction} {detail if detail else ''}".rstrip())

    def _on_objects(self, message: MarkerArray) -> None:
        try:
            objects = convert.objects_from_markers(message)
        except ValueError as exc:
            self.get_logger().warning(f"ignored {OBJECTS_TOPIC}: {exc}", throttle_duration_sec=5.0)
            return
        self._live_objects = {n: tuple(float(v) for v in o.position) for n, o in objects.items()}
        self._live_headings = {n: _yaw_degrees(o.quat) for n, o in objects.items()}
        if self.arm is not None:
            self.arm.update_objects(objects)

    def _on_safety(self, message: String) -> None:
        try:  # bounded and total: a bad line is dropped with its reason, never the node
            state = decode_status(message.data, what=SAFETY_TOPIC)["state"]
        except MessageError as exc:
            self.get_logger().warning(f"ignored a message: {exc}", throttle_duration_sec=5.0)
            return
        if state == "stopped" and self.safety_state != "stopped":
            self.on_stop("stopped by a stop request (/lang2policy/stop)")
        self.safety_state = state

    def _stop_pending(self) -> str:
        """The reason of a stop during the running instruction ("" while none)."""
        return self._stop_reason if self._stopped.is_set() else ""

    def on_stop(self, reason: str) -> None:
        """Abort the running motion (no repair) and cancel a running reward task."""
        if self._stopped.is_set() and self.current_spec is None:
            return  # already handled (the stop request, then the safety node's report)
        self._stop_reason = reason
        self._stopped.set()
        if self.arm is not None and self._busy.locked():
            self.backend.abort(reason)
        if self.current_spec is not None:
            self._spec.publish(String(data="null"))
            self.current_spec = None
        self.publish_status("stopped", "", reason)

    def _on_instruction(self, message: String) -> None:
        try:
            instruction = check_instruction(message.data)
            route = choose_planner(instruction, self.route)
        except Lang2PolicyError as exc:
            self.publish_status("rejected", message.data[:200], str(exc))
            return
        if not self._busy.acquire(blocking=False):
            self.publish_status("busy", instruction, "another instruction is running")
            return
        self.current_instruction, self.current_route = instruction, route
        self.publish_status("received", instruction, {"route": route})
        handle = self._handle_reward if route == "reward" else self._handle
        self._worker = threading.Thread(target=handle, args=(instruction,), daemon=True)
        self._worker.start()

    def _handle_reward(self, instruction: str) -> None:
        """Plan a reward spec and hand it to the MPC controller (worker thread)."""
        try:
            positions, headings = dict(self._live_objects), dict(self._live_headings)
            planner = self._reward_planner_for(tuple(positions) or tuple(self.objects))
            plan = planner.plan(
                instruction,
                self.current_spec,
                positions=positions or None,
                headings=headings or None,
            )
            spec, remembered = self._recall_into_spec(instruction, plan.spec)
            self._spec.publish(String(data=spec.to_json()))
            self.current_spec = spec
            state, detail = "done", {
                "route": "reward",
                "outcome": "reward_spec",
                "new_task": plan.new_task,
                "spec": spec.to_dict(),
                "notes": [*plan.notes, *remembered],
                "description": plan.description,
                "code": plan.code,
            }
        except Exception as exc:  # the node must survive any planning error
            state, detail = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self._busy.release()  # before the final status: whoever hears it may send more
        self.publish_status(state, instruction, detail)

    def _reward_planner_for(self, objects: tuple[str, ...]):
        """The reward planner for the scene's objects (a new one, and no running spec, when
        the set of objects changed)."""
        if self._reward_planner is None or set(objects) != set(self._reward_objects):
            from lang2policy.l2r.planner import RewardPlanner
            from lang2policy.llm import make_client

            setting = self.reward_llm or self.llm_setting
            llm = (
                self.planning.planner.llm
                if setting == self.llm_setting
                else make_client(setting)
            )
            if self._reward_planner is not None:
                self.current_spec = None
            self._reward_planner = RewardPlanner(llm, list(objects))
            self._reward_objects = objects
        return self._reward_planner

    def _prepare_graph_run(self) -> None:
        """Before a code plan moves the graph's arm: fresh state, no reward task, no stop."""
        robot = self.session.robot
        robot.clear_interrupt()
        robot.wait_for_state(self.wait_for_scene)
        if not robot.is_connected:
            robot.connect()
        wait_until(lambda: bool(self.session.object_snapshot()), self.wait_for_scene)
        if not self.session.object_snapshot():
            raise Lang2PolicyError(
                f"no objects heard on {OBJECTS_TOPIC} within {self.wait_for_scene:g} s; is the "
                "perception node running?"
            )
        if self.current_spec is not None:
            self._spec.publish(String(data="null"))
            self.current_spec = None
        self.session.sync()

    def _handle(self, instruction: str) -> None:
        self._stopped.clear()
        self._stop_reason = ""
        try:
            if self.arm is not None:
                self._prepare_graph_run()
            self._start_code_edits(instruction)
            result = self.planning.handle(
                instruction,
                on_status=lambda line: self.publish_status("running", instruction, line),
            )
            outcome = result.outcome
            if self.arm is not None:
                self.session.sync()
            state = "done" if outcome.ok else "failed"
            detail = {
                "route": "code",
                "outcome": outcome.kind,
                "message": outcome.message,
                "attempts": result.attempts,
                "code": result.program.code if result.program else "",
                "relations": scene_readout(self.session)["relations"],
            }
        except Exception as exc:  # the node must survive any planning error
            state, detail = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            self._busy.release()  # before the final status: whoever hears it may send more
        self.publish_status(state, instruction, detail)

    def wait_idle(self, timeout: float | None = None) -> None:
        if self._worker is not None:
            self._worker.join(timeout)

    def destroy_node(self) -> None:
        self.wait_idle(timeout=1.0)  # a running plan gets a moment to finish its status
        super().destroy_node()


def wait_until(predicate, timeout: float, step: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` s pass; returns the last answer."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True


def _yaw_degrees(quat) -> float:
    """Heading (rotation about z, degrees) of a (w, x, y, z) quaternion."""
    w, x, y, z = quat
    return math.degrees(math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def main(args=None) -> int:
    """Console entry ``planner_node``."""
    return spin_node(PlannerNode, "planner_node", args)


if __name__ == "__main__":
    raise SystemExit(main())
