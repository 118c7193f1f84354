"""The graph's topic contract: every topic and service name, its message type, and the status
event schema. The one home of these names: nodes, the launch description, the recorder,
benchmarks and tests import them from here (a pure module: no ROS, no other lang2policy
import), so a topic cannot be renamed in one place and missed in another.

Status lines (``/lang2policy/status`` and ``/lang2policy/safety``) are one JSON object each,
``StatusEvent.to_dict()``: ``{"node": <who says it>, "state": ..., "instruction": ...,
"detail": ...}`` plus node-specific fields (the controller's ``task`` and ``stats``, the VLA
node's ``skill``, ``backend`` and ``stats``). Every line names its ``node``, so a listener never
has to guess who spoke from the keys.

Names here are the graph's names in the root namespace (``/joint_states``); the nodes of the
graph create their topics and services with ``Endpoint.relative`` (``joint_states``), so a node
started in a namespace (``__ns:=/arm1``, one arm of a fleet) speaks ``/arm1/joint_states`` and
one in the root namespace speaks exactly these names. Probes and tools in the root namespace
may use ``name`` for the default graph and ``in_namespace(ns)`` for an arm's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Endpoint(NamedTuple):
    """A topic or service: its name and its ROS interface type (``pkg/msg/Type``)."""

    name: str
    type: str

    @property
    def relative(self) -> str:
        """The name a node of the graph uses: relative, so it resolves under the node's
        namespace (``/arm1/lang2policy/status``), and to ``name`` in the root namespace."""
        return self.name.lstrip("/")

    def in_namespace(self, namespace: str) -> str:
        """The fully qualified name in ``namespace`` (``arm1`` or ``/arm1``; "" or "/": the
        root namespace, ``name``)."""
        return namespaced(namespace, self.relative)


def namespaced(namespace: str, relative: str) -> str:
    """``/<namespace>/<relative>`` (``/<relative>`` for the root namespace)."""
    prefix = namespace.strip("/")
    return f"/{prefix}/{relative}" if prefix else f"/{relative}"


def camera_topics(camera: str) -> tuple[str, str]:
    """A camera's image and camera-info topics, relative like ``Endpoint.relative`` (the sim
    node, the USB camera node, perception and the VLA node use them; ``/camera/<name>/...`` in
    the root namespace)."""
    return f"camera/{camera}/image_raw", f"camera/{camera}/camera_info"


# ------------------------------------------------------------------ the robot's side
JOINT_STATES = Endpoint("/joint_states", "sensor_msgs/msg/JointState")
TRAJECTORY = Endpoint("/arm_controller/joint_trajectory", "trajectory_msgs/msg/JointTrajectory")
SIM_OBJECTS = Endpoint("/sim/objects", "visualization_msgs/msg/MarkerArray")  # ground truth
CLOCK = Endpoint("/clock", "rosgraph_msgs/msg/Clock")
# The sim time from which the sim node's table shows its latest scene (its start, then each
# reset): camera perception forgets what it kept hidden, and drops images stamped before it,
# when the simulator puts a new scene on the table (a real table never jumps).
SIM_SCENE = Endpoint("/sim/scene", "builtin_interfaces/msg/Time")
# The joint-map bridge's side when a ros2_control arm's names differ from the model's.
BRIDGED_JOINT_STATES = Endpoint("/lang2policy/joint_states", "sensor_msgs/msg/JointState")
BRIDGED_TRAJECTORY = Endpoint("/lang2policy/arm_trajectory", "trajectory_msgs/msg/JointTrajectory")

# ------------------------------------------------------------------ lang2policy's own
JOINT_COMMAND = Endpoint("/lang2policy/joint_command", "trajectory_msgs/msg/JointTrajectory")
OBJECTS = Endpoint("/lang2policy/objects", "visualization_msgs/msg/MarkerArray")  # perceived
INSTRUCTION = Endpoint("/lang2policy/instruction", "std_msgs/msg/String")
CORRECTION = Endpoint("/lang2policy/correction", "std_msgs/msg/String")
STATUS = Endpoint("/lang2policy/status", "std_msgs/msg/String")  # planner, controller, VLA lines
SAFETY = Endpoint("/lang2policy/safety", "std_msgs/msg/String")  # the safety node's lines
REWARD_SPEC = Endpoint("/lang2policy/reward_spec", "std_msgs/msg/String")  # JSON or "null"
SKILL = Endpoint("/lang2policy/skill", "std_msgs/msg/String")  # a VLA skill; "" cancels
# The running plan's keep-out zones (JSON, ``safety.plan_zones``): planner -> safety node.
PLAN_ZONES = Endpoint("/lang2policy/plan_zones", "std_msgs/msg/String")

# ------------------------------------------------------------------ services
STOP = Endpoint("/lang2policy/stop", "std_srvs/srv/Trigger")
RESUME = Endpoint("/lang2policy/resume", "std_srvs/srv/Trigger")
RESET = Endpoint("/lang2policy_sim/reset", "std_srvs/srv/Trigger")  # the sim node's ~/reset
# The planner's corrections memory: list what is remembered (one line each), forget it all.
MEMORY = Endpoint("/lang2policy/memory", "std_srvs/srv/Trigger")
FORGET = Endpoint("/lang2policy/forget", "std_srvs/srv/Trigger")

TOPICS: tuple[Endpoint, ...] = (
    JOINT_STATES,
    TRAJECTORY,
    SIM_OBJECTS,
    SIM_SCENE,
    CLOCK,
    BRIDGED_JOINT_STATES,
    BRIDGED_TRAJECTORY,
    JOINT_COMMAND,
    OBJECTS,
    INSTRUCTION,
    CORRECTION,
    STATUS,
    SAFETY,
    REWARD_SPEC,
    SKILL,
    PLAN_ZONES,
)
# Topics whose publisher keeps its last message for late joiners (QoS reliable, transient
# local, depth 1; ``ros.qos.LATCHED``): a safety node started after the plan still gets its zones.
LATCHED_TOPICS: tuple[Endpoint, ...] = (PLAN_ZONES, SIM_SCENE)
SERVICES: tuple[Endpoint, ...] = (STOP, RESUME, RESET, MEMORY, FORGET)
TOPIC_TYPES: dict[str, str] = {t.name: t.type for t in TOPICS}

# ------------------------------------------------------------------ status events
PLANNER_NODE, CONTROLLER_NODE, SAFETY_NODE = "planner", "controller", "safety"
VLA_NODE = "vla"
TELEOP_NODE = "teleop"  # its "received" (instruction: the task) and "done" cut demonstrations
PERCEPTION_NODE = "perception"  # "blind" (detail: no image since when), "seeing" again, and
# "unclear" (detail: where a bowl is seen in two colours, not named)
STATUS_NODES = (PLANNER_NODE, CONTROLLER_NODE, SAFETY_NODE, VLA_NODE, TELEOP_NODE, PERCEPTION_NODE)
PLANNER_STATES = (
    "starting",  # detail: what start-up waits for ("warming the planner's prompts: 3 of 7")
    "ready",  # detail: {"llm": how warming went, "warm_s", "prompts"}: instructions are fast now
    "received",  # detail: {"route": ...}
    "planning",  # detail: a progress line while the plan is being made (the LLM writes it)
    "running",  # detail: a progress line while the plan runs
    "plan",  # detail: the plan about to run: {"route": "code", "code", "goal"} or the spec
    "said",  # detail: one line the robot says
    "remembered",  # detail: the remembered corrections applied
    "correction",  # detail: {"text", "kind", "edit", "action", "notes"[, "error"]}
    "done",  # ``detail.verdict``: goal_reached (verified from the scene), answered, or
    # done_not_verified (no checkable goal could be read from the words: it only moved)
    "failed",  # detail: "verdict", "outcome", "message" (the reason and the shortfall)
    "rejected",  # the instruction was bad, or cannot be planned now (perception is blind);
    # nothing ran
    "busy",  # another instruction runs
    "stopped",  # detail: the reason (a stop); a plan the stop ended: its final line's state
)
FINAL_PLANNER_STATES = ("done", "failed", "stopped", "rejected", "busy")
# The VLA node's states that end a skill (its last status line of a run): the skill route and
# the bench's probe wait for one of these.
FINAL_SKILL_STATES = ("success", "timeout", "failed", "stopped", "cancelled", "rejected")


@dataclass(frozen=True)
class StatusEvent:
    """One status line: who says it (``node``), what happened (``state``), for which
    instruction, and a detail (text or a JSON-able dict). ``extra`` holds node-specific
    top-level fields (the controller's ``task``, ``stats``)."""

    node: str
    state: str
    instruction: str = ""
    detail: Any = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.node not in STATUS_NODES:
            raise ValueError(f"status node {self.node!r} is not one of {list(STATUS_NODES)}")
        if not isinstance(self.state, str) or not self.state:
            raise ValueError(f"a status state must be non-empty text, got {self.state!r}")

    @property
    def final(self) -> bool:
        """True for the planner's last line about an instruction."""
        return self.node == PLANNER_NODE and self.state in FINAL_PLANNER_STATES

    def to_dict(self) -> dict[str, Any]:
        """The JSON object published on the status topic."""
        line = {"node": self.node, "state": self.state, "instruction": self.instruction}
        line["detail"] = self.detail
        return {**line, **self.extra}


def status_node(line: dict[str, Any]) -> str:
    """Who said a decoded status line; lines from before every line named its node (recorded
    bags) are the planner's."""
    node = line.get("node", PLANNER_NODE)
    return node if isinstance(node, str) else PLANNER_NODE


def planner_phase(line: dict[str, Any]) -> str:
    """What a ``planning`` or ``running`` status says the planner is doing (its first words:
    "planning", "checking the program on a simulated copy of the scene", "running the program
    ..."); "" for other states. The bench's timeline shows where the time before the motion
    goes."""
    detail = line.get("detail")
    if line.get("state") not in ("planning", "running") or not isinstance(detail, str):
        return ""
    return detail.split(":", 1)[0].split(" (", 1)[0][:60]
