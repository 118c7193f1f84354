"""The planner node: the conductor (``lang2policy.conductor``) on ROS 2 topics.

Instructions arrive on ``/lang2policy/instruction`` and corrections on
``/lang2policy/correction`` (std_msgs/String); each status event leaves as one JSON line on
``/lang2policy/status`` (``{"node": "planner", "state", "instruction", "detail"}``, see
``lang2policy.graph.topics``). Reward specs go to the controller node on
``/lang2policy/reward_spec`` (``null`` cancels), and a reward plan ends when the controller's
status lines end its task (``conductor.spec_handoff``: ``done`` only on its ``success``); a
``stop`` correction calls ``/lang2policy/stop`` on the safety node, and its ``stopped`` report
on ``/lang2policy/safety`` stops the running plan. What to do with each message is the
conductor's business; this node reads parameters, converts messages and publishes.

Skill plans (issue 18): with ``vla`` true (a VLA node in the graph) an instruction the VLA
can do is a skill plan (``lang2policy.conductor.skill_route``): gated by the privilege policy,
started on ``/lang2policy/skill`` as a JSON message with its plan id and limits, and followed
on ``/lang2policy/status`` by the VLA node's lines with that plan id; corrections but ``stop``
go to it as language motions. Policy code's ``vla_skill(...)`` takes the same path.

A camera perception that says it is ``blind`` (no image for a while) makes the planner reject
new instructions with that reason until it says ``seeing`` again.

Keep-out zones: when a plan (code, reward or skill) starts, the keep-out zones of its privilege
policy go to the safety node on ``/lang2policy/plan_zones`` (JSON, ``safety.plan_zones``; QoS
latched: reliable, transient local, depth 1), which enforces them on every motion; an empty
mapping (``plan_id`` null) withdraws them when the plan ends, and is sent once at start-up.

Parameters: ``route`` (code | reward | auto | skill), ``llm`` and ``reward_llm``, ``memory``
and ``memory_threshold`` (corrections memory), ``vla`` with ``skill_max_joint_speed`` and
``skill_time_budget`` (the limits a skill plan asks for), ``execute``: ``graph`` (default:
skills move the arm in the graph through ``lang2policy.ros.graph_arm``) or ``local`` (an
in-process simulated arm: ``robot``, ``seed``, ``objects``), and the graph arm's
``control_rate``, ``state_timeout`` and ``scene_timeout``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from lang2policy.conductor import (
    ConductorSettings,
    LiveCodeExecutor,
    SimCodeExecutor,
    SpecHandOff,
    build_conductor,
)
from lang2policy.conductor.build import warm_conductor
from lang2policy.conductor.skill_route import SkillRoute, SkillSettings
from lang2policy.conductor.start_gate import MAX_HELD, StartGate
from lang2policy.errors import ConfigError
from lang2policy.graph import topics
from lang2policy.graph.topics import PLANNER_NODE, StatusEvent
from lang2policy.planning.grounding import GroundingSettings
from lang2policy.ros import convert
from lang2policy.ros.entry import spin_node
from lang2policy.ros.graph_arm import GraphArm
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.ros.qos import LATCHED
from lang2policy.safety.plan_zones import encode_plan_zones
from lang2policy.session.sim import SimSession
from lang2policy.wire_json import MessageError, decode_status

EXECUTE_MODES = ("graph", "local")
READY_LISTENER_WAIT = 10.0  # s the "ready" line waits for a status listener (late terminal)
OWN_STATUS_READERS = 1  # this node's own subscription to the status topic


class PlannerNode(ReadOnlyParameters):
    """``lang2policy_planner``: the conductor's host (it is the conductor's ``Outlet``)."""

    executable = "planner_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_planner", **kwargs)
        self._status = self.create_publisher(String, topics.STATUS.relative, 10)
        self._spec = self.create_publisher(String, topics.REWARD_SPEC.relative, 10)
        self._stop_client = self.create_client(Trigger, topics.STOP.relative)
        self._skill = self.create_publisher(String, topics.SKILL.relative, 10)
        self._zones = self.create_publisher(String, topics.PLAN_ZONES.relative, LATCHED)
        self.send_plan_zones(None, {})  # no plan runs (a restarted planner's old plan ended)
        self.arm: GraphArm | None = None
        self.warmth = None  # how warming the LLM went (``llm.warm.Warmth``), once done
        code = self._code_executor()
        self.settings = self._settings()
        port = self if self._vla_on() else None
        self.handoff = SpecHandOff(self)
        self.conductor = build_conductor(
            self.settings, self, code, self.handoff, port, zone_port=self
        )
        # the controller's lines end reward plans; the VLA node's, skill plans
        self.create_subscription(String, topics.STATUS.relative, self._on_status, 50)
        self.create_subscription(String, topics.INSTRUCTION.relative, self._on_instruction, 10)
        self.create_subscription(String, topics.CORRECTION.relative, self._on_correction, 10)
        self.create_subscription(MarkerArray, topics.OBJECTS.relative, self._on_objects, 10)
        self.create_subscription(String, topics.SAFETY.relative, self._on_safety, 10)
        self.create_service(Trigger, topics.MEMORY.relative, self._on_memory)
        self.create_service(Trigger, topics.FORGET.relative, self._on_forget)
        where = ", ".join(code.object_names()) if self.arm is None else "the graph's arm"
        self.get_logger().info(f"up: {where}; route {self.conductor.route_setting}")
        self.gate = StartGate()  # instructions that come before ``ready`` wait in it
        self.blind = ""  # why perception cannot see (its "blind" line); "" while it sees
        threading.Thread(target=self._warm_up, name="llm-warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        """Have the LLM server process the fixed prompt parts now, then say ``ready``: the
        first instruction then waits only for its own part of the prompt (issue 16). A
        shutdown while it works (Ctrl-C during start-up) ends it quietly: the node, its
        publisher and the sandbox it rehearses in may already be gone."""
        try:
            self._announce_ready()
        except Exception as exc:  # a thread must not die with a traceback
            if self.context.ok():
                self.get_logger().warning(f"start-up warm-up failed ({exc}); planning goes on")
                detail = {"llm": f"warm-up failed: {exc}"}
                self.status(StatusEvent(PLANNER_NODE, "ready", "", detail))
                for text in self.gate.open():
                    self.conductor.handle(text)

    def _announce_ready(self) -> None:
        self._starting("preparing the planner (example retriever, a rehearsal on a copy)")
        self.warmth = warm_conductor(self.conductor, self.settings, self._warm_progress)
        detail = {"llm": self.warmth.describe(), "warm_s": round(self.warmth.seconds, 2)}
        deadline = time.monotonic() + READY_LISTENER_WAIT  # a terminal started with the graph
        while self._status_listeners() == 0 and time.monotonic() < deadline:
            if not self.context.ok():
                return
            time.sleep(0.1)
        event = StatusEvent(PLANNER_NODE, "ready", "", {**detail, "prompts": self.warmth.prompts})
        self.status(event)
        for text in self.gate.open():  # typed while it started: planned now, in order
            self.conductor.handle(text)

    def _status_listeners(self) -> int:
        """Subscribers of the status topic other than this node's own (it reads the
        controller's and the VLA node's lines there, and its own subscription counts)."""
        return self._status.get_subscription_count() - OWN_STATUS_READERS

    def _starting(self, line: str) -> None:
        self.status(StatusEvent(PLANNER_NODE, "starting", "", line))

    def _warm_progress(self, done: int, total: int, seconds: float) -> None:
        """One ``starting`` line per warmed prompt: how many, and about how long is left."""
        if done >= total:
            return
        left = f", ~{seconds / done * (total - done):.0f} s left" if done else ""
        self._starting(f"warming the planner's prompts: {done} of {total}{left}")

    def _settings(self) -> ConductorSettings:
        memory = self._param("memory")
        return ConductorSettings(
            llm=self._param("llm"),
            reward_llm=self._param("reward_llm"),
            route=self._param("route"),
            grounding=self._grounding(),
            memory=Path(memory) if memory else None,
            memory_threshold=self._param("memory_threshold"),
            memory_scope=self._param("memory_scope"),
            skill=self._skill_settings(),
            spare_child=True,  # a sandbox child started ahead: the arm moves sooner
        )

    def _vla_on(self) -> bool:
        """``vla``: true when a VLA node runs in the graph (skill plans go to it)."""
        value = self._param("vla")
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() in ("true", "false"):
            return str(value).strip().lower() == "true"
        raise ConfigError(f"parameter 'vla' must be true or false, got {value!r}")

    def _skill_settings(self) -> SkillSettings:
        speed = self._param("skill_max_joint_speed")
        budget = self._param("skill_time_budget")
        return SkillSettings(max_joint_speed=speed, time_budget_s=budget)

    def _grounding(self) -> GroundingSettings:
        """``grounding``: on | off (ROS reads a bare on/off as a boolean: both are taken)."""
        value = self._param("grounding")
        name = ("on" if value else "off") if isinstance(value, bool) else str(value)
        try:
            return GroundingSettings.named(name)
        except ValueError as exc:
            raise ConfigError(f"parameter {exc}") from None

    def _code_executor(self):
        robot = self._param("robot")
        execute = self._param("execute")
        if execute not in EXECUTE_MODES:
            raise ConfigError(
                f"parameter 'execute' must be one of {list(EXECUTE_MODES)}, got {execute!r}"
            )
        if execute == "local":
            objects = self._param("objects")
            names = [o.strip() for o in objects.split(",") if o.strip()] or None
            code = SimCodeExecutor(SimSession(robot))
            code.reset(int(self._param("seed")), names)
            return code
        period = 1.0 / self._param("control_rate")
        stale = self._param("state_timeout")
        self.arm = GraphArm(self, robot, control_period=period, stale_after=stale)
        wait = self._param("scene_timeout")
        self.arm.session.view_timeout = self._param("view_timeout")
        return LiveCodeExecutor(self.arm.session, wait, topics.OBJECTS.name)

    # ------------------------------------------------------------------ Outlet
    def status(self, event: StatusEvent) -> None:
        self._status.publish(String(data=json.dumps(event.to_dict())))
        detail = event.detail if event.detail else ""
        self.get_logger().info(f"{event.state}: {event.instruction} {detail}".rstrip())

    def send_spec(self, spec) -> None:
        self._spec.publish(String(data="null" if spec is None else spec.to_json()))

    def send_skill(self, text: str) -> None:
        """``SkillPort``: a skill plan's start, motion or cancel ("") for the VLA node."""
        self._skill.publish(String(data=text))

    def send_plan_zones(self, plan_id: str | None, zones) -> None:
        """``ZonePort``: the running plan's keep-out zones for the safety node."""
        self._zones.publish(String(data=encode_plan_zones(plan_id, zones)))
        names = ", ".join(zones) or "none"
        self.get_logger().info(f"plan {plan_id or '-'}: keep-out zones {names}")

    def skill_listeners(self) -> int:
        return self._skill.get_subscription_count()

    def request_stop(self) -> bool:
        if self._stop_client.service_is_ready():
            self._stop_client.call_async(Trigger.Request())
            return True
        self.get_logger().warning(
            f"no safety node answers on {self.resolve_service_name(topics.STOP.relative)}; "
            "aborting the plan here only"
        )
        return False

    # ------------------------------------------------------------------ messages in
    def _on_instruction(self, message: String) -> None:
        if self.blind:  # plans on an old view of the table could hit what has moved since
            why = f"cannot plan: perception is blind ({self.blind}); the arm holds"
            self.status(StatusEvent(PLANNER_NODE, "rejected", message.data[:500], why))
            return
        held = self.gate.hold(message.data)
        if not held:
            self.conductor.instruct(message.data)
            return
        text = message.data[:500]
        if held == "full":
            why = f"the planner is still starting and holds {MAX_HELD} instructions already"
            self.status(StatusEvent(PLANNER_NODE, "rejected", text, why))
            return
        why = "queued: the planner is still starting; it plans this as soon as it is ready"
        self.status(StatusEvent(PLANNER_NODE, "received", text, {"queued": why}))

    def _on_memory(self, _request, response):
        response.success, response.message = self.conductor.corrections.memory_listing()
        return response

    def _on_forget(self, _request, response):
        response.success, response.message = self.conductor.corrections.forget()
        return response

    def _on_correction(self, message: String) -> None:
        self.conductor.corrections.correct(message.data)

    def _on_objects(self, message: MarkerArray) -> None:
        objects = self._decoded(convert.objects_from_markers, message, topics.OBJECTS.name)
        if objects is None:
            return
        self.conductor.update_objects(
            {n: tuple(float(v) for v in o.position) for n, o in objects.items()},
            {n: _yaw_degrees(o.quat) for n, o in objects.items()},
        )
        if self.arm is not None:
            self.arm.update_objects(objects)

    def _on_status(self, message: String) -> None:
        """The controller's status lines go to the reward hand-off (its verdict on a spec),
        the VLA node's to the skill route; perception's say whether it sees (no new plan
        while it is blind); ours are ignored."""
        try:
            line = decode_status(message.data, what=topics.STATUS.name)
        except MessageError as exc:
            self.get_logger().warning(f"ignored a message: {exc}", throttle_duration_sec=5.0)
            return
        if line.get("node") == topics.CONTROLLER_NODE:
            self.handoff.on_status(line)
        elif line.get("node") == topics.PERCEPTION_NODE:
            blind = line.get("state") == "blind"
            self.blind = str(line.get("detail", ""))[:300] or "no image" if blind else ""
        elif line.get("node") == topics.VLA_NODE and isinstance(self.conductor.skills, SkillRoute):
            self.conductor.skills.on_status(line)

    def _on_safety(self, message: String) -> None:
        try:  # bounded and total: a bad line is dropped with its reason, never the node
            state = decode_status(message.data, what=topics.SAFETY.name)["state"]
        except MessageError as exc:
            self.get_logger().warning(f"ignored a message: {exc}", throttle_duration_sec=5.0)
            return
        self.conductor.safety_state(state)

    def wait_idle(self, timeout: float | None = None) -> None:
        self.conductor.wait_idle(timeout)

    def destroy_node(self) -> None:
        self.wait_idle(timeout=1.0)  # a running plan gets a moment to finish its status
        self.conductor.close()
        super().destroy_node()


def _yaw_degrees(quat) -> float:
    """Heading (rotation about z, degrees) of a (w, x, y, z) quaternion."""
    w, x, y, z = quat
    return math.degrees(math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def main(args=None) -> int:
    """Console entry ``planner_node``."""
    return spin_node(PlannerNode, "planner_node", args)


if __name__ == "__main__":
    raise SystemExit(main())
