"""The ROS 2 node graph as data: which nodes run, with which parameters and remaps.

One description shared by ``launch/sim.launch.py``, ``launch/robot.launch.py`` (ROS 2 installs)
and ``lang2policy sim`` (``lang2policy.graph.launcher``, pip installs), so the three cannot drift.
Pure: no ROS import. Each node's parameters come from its params file
(``config/nodes/<executable>.yaml``, ROS 2 params-file format, found through
``lang2policy.paths``) plus the overrides the chosen options imply.

Two modes:
  * ``sim``: sim_node, perception_node, planner_node, controller_node, safety_node,
    [vla_node], [recorder_node], [terminal_node]; every node but the sim node runs on sim time
    (``/clock``).
  * ``robot``: the same without the sim node, on wall time, perception from cameras. The arm is
    reached through ros2_control topics (``driver="ros2_control"``): ``/joint_states`` and
    ``/arm_controller/joint_trajectory`` are already the contract's names, and other names are
    remapped on every node; with ``joint_map`` (``hardware/<arm>.yaml``) a bridge node renames
    the arm's joints and topics onto ours. ``driver="so101"`` starts the SO-101 serial driver
    on ``port``; with ``emulate`` an emulated SO-101 (servo bus on a pty, arm and table in
    MuJoCo) stands in for the arm at ``port`` and publishes ground-truth object poses, so
    perception can be ``ground_truth`` (its default then).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from lang2policy import paths
from lang2policy.graph import topics, user_params
from lang2policy.graph.options import GraphOptions
from lang2policy.graph.rules import choice

EMULATOR_PORT_WAIT = 60.0  # s the driver waits for the emulator's port to appear
EMULATOR_BUS_TIMEOUT = 0.1  # s per reply: the emulator shares the CPU with physics and the graph
# s the planner waits, the arm out of the view, for camera perception to see a goal's objects again
# (a block confirmed again takes 3 frames at 10 Hz; a loaded machine renders slower)
CAMERA_VIEW_TIMEOUT = 3.0
# The perception node's parameter that picks ground truth or cameras (perception helper's name).
PERCEPTION_MODE_PARAM = "source"

# Executable (console script) -> (node name, module holding ``main``), in start order.
NODES: dict[str, tuple[str, str]] = {
    "joint_map_bridge_node": (
        "lang2policy_joint_map_bridge",
        "lang2policy.ros.joint_map_bridge_node",
    ),
    "so101_emulator_node": ("lang2policy_so101_emulator", "lang2policy.ros.so101_emulator_node"),
    "sim_node": ("lang2policy_sim", "lang2policy.ros.sim_node"),
    "usb_camera_node": ("lang2policy_usb_camera", "lang2policy.ros.usb_camera_node"),
    "so101_driver_node": ("lang2policy_so101", "lang2policy.ros.so101_driver_node"),
    "perception_node": ("lang2policy_perception", "lang2policy.ros.perception_node"),
    "safety_node": ("lang2policy_safety", "lang2policy.ros.safety_node"),
    "controller_node": ("lang2policy_controller", "lang2policy.ros.controller_node"),
    "vla_node": ("lang2policy_vla", "lang2policy.ros.vla_node"),
    "planner_node": ("lang2policy_planner", "lang2policy.ros.planner_node"),
    "recorder_node": ("lang2policy_recorder", "lang2policy.ros.recorder_node"),
    "terminal_node": ("lang2policy_terminal", "lang2policy.ros.terminal_node"),
    "teleop_node": ("lang2policy_teleop", "lang2policy.ros.teleop_node"),
}

# The nodes that are the robot (hardware time, never /clock).
WALL_TIME_NODES = (
    "sim_node",
    "so101_driver_node",
    "so101_emulator_node",
    "joint_map_bridge_node",
    "usb_camera_node",
)
# Nodes that time everything by steady clocks and stamp from the messages they get: they
# never subscribe /clock (in a simulated graph each of its 50 Hz messages woke every node on
# sim time, most of the idle graph's CPU; the sim node still publishes it for everyone else).
CLOCK_FREE_NODES = ("perception_node", "safety_node", "controller_node", "planner_node")
# The nodes that load a robot description (parameter ``robot``).
ROBOT_NODES = ("sim_node", "perception_node", "safety_node", "controller_node", "planner_node")


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph: how ``ros2 launch`` or ``lang2policy sim`` starts it."""

    executable: str
    name: str
    params_file: Path
    overrides: dict[str, bool | int | float | str] = field(default_factory=dict)  # -p k:=v
    remaps: tuple[tuple[str, str], ...] = ()
    namespace: str = ""  # an arm of a fleet: "arm1" (-r __ns:=/arm1); "": the root namespace
    env: dict[str, str] = field(default_factory=dict)  # set for its process (ROS_DOMAIN_ID)

    @property
    def label(self) -> str:
        """Who it is in messages and log file names: its name, after its arm's."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def module(self) -> str:
        """The Python module whose ``main()`` is this executable's entry point."""
        return NODES[self.executable][1]


def graph(mode: str = "sim", **options) -> list[NodeSpec]:
    """The nodes of the graph for ``mode`` (``sim`` | ``robot``) and the options of
    ``GraphOptions`` (the rows of ``lang2policy.graph.options.OPTIONS``), in start order."""
    return build(GraphOptions(mode=mode, **options))


def build(options: GraphOptions) -> list[NodeSpec]:
    """The graph for already validated ``options``: one arm in the root namespace, or with
    ``arms`` each arm's graph under its namespace and one terminal (root namespace) that
    addresses them by name."""
    specs = _fleet(options) if options.arms else _arm_graph(options, "")
    return user_params.apply(options.params, specs) if options.params else specs


def _fleet(options: GraphOptions) -> list[NodeSpec]:
    specs = [
        spec
        for arm in options.arms
        for spec in _arm_graph(options, arm)
        if spec.executable != "terminal_node"
    ]
    if options.terminal:
        terminal = next(s for s in _arm_graph(options, "") if s.executable == "terminal_node")
        # No arm's clock is the root's /clock: the terminal times nothing by ROS time.
        overrides = {**terminal.overrides, "use_sim_time": False, "arms": ",".join(options.arms)}
        specs.append(replace(terminal, overrides=overrides))
    return specs


def _arm_graph(options: GraphOptions, namespace: str) -> list[NodeSpec]:
    """One arm's graph, its nodes under ``namespace`` ("" for the root namespace: the graph
    exactly as without a fleet)."""
    sim_time = options.mode == "sim"
    overrides = {
        "so101_emulator_node": {
            "link": options.so101_port,
            "seed": options.seed,
            **_realism_override(options),
            **_objects_override(options),
        },
        "so101_driver_node": _driver_overrides(options),
        "joint_map_bridge_node": {
            "joint_map": options.joint_map,
            "command_topic": _topic(topics.BRIDGED_TRAJECTORY, namespace),
            "state_topic": _topic(topics.BRIDGED_JOINT_STATES, namespace),
        },
        "sim_node": _sim_overrides(options),
        "usb_camera_node": {
            "device": options.camera_device,
            "name": options.camera_name,
            "intrinsics": options.camera_intrinsics,
        },
        "perception_node": _perception_overrides(options),
        "safety_node": {},
        "controller_node": {"backend": options.controller},
        "vla_node": _vla_overrides(options),
        "planner_node": _planner_overrides(options),
        "recorder_node": _recorder_overrides(options, namespace),
        "terminal_node": {},
        "teleop_node": {},
    }
    specs = []
    env = {"ROS_DOMAIN_ID": str(int(options.domain_id))} if str(options.domain_id).strip() else {}
    for executable in NODES:
        if not _included(executable, options):
            continue
        common: dict[str, object] = {"use_sim_time": sim_time}
        if executable in WALL_TIME_NODES or executable in CLOCK_FREE_NODES:
            common["use_sim_time"] = False
        if executable in ROBOT_NODES:
            common["robot"] = options.robot
        specs.append(
            NodeSpec(
                executable=executable,
                name=NODES[executable][0],
                params_file=params_file(executable),
                overrides={**common, **overrides[executable]},
                remaps=_node_remaps(executable, options, namespace),
                namespace=namespace,
                env=dict(env),
            )
        )
    return specs


def params_file(executable: str) -> Path:
    """``config/nodes/<executable>.yaml`` of the source checkout or the install."""
    choice("executable", executable, tuple(NODES))
    return paths.config_dir() / "nodes" / f"{executable}.yaml"


def _included(executable: str, options: GraphOptions) -> bool:
    if executable == "sim_node":
        return options.mode == "sim"
    if executable == "so101_driver_node":
        return options.mode == "robot" and options.driver == "so101"
    if executable == "usb_camera_node":
        return options.mode == "robot" and bool(options.camera_device)
    if executable == "joint_map_bridge_node":
        return options.mode == "robot" and bool(options.joint_map)
    if executable == "so101_emulator_node":
        return options.mode == "robot" and options.driver == "so101" and options.emulate
    if executable == "recorder_node":
        return options.record is not None
    if executable == "terminal_node":
        return options.terminal
    if executable == "vla_node":
        return options.vla
    return executable != "teleop_node"  # `lang2policy teleop` (commands.teleop) adds it


def _vla_overrides(options) -> dict[str, object]:
    """The VLA node's backend, and a LeRobot policy's checkpoint and calibration when given."""
    chosen: dict[str, object] = {"backend": options.vla_backend}
    if options.vla_lerobot_checkpoint:
        chosen["lerobot_checkpoint"] = options.vla_lerobot_checkpoint
    if options.vla_lerobot_calibration:
        chosen["lerobot_calibration"] = options.vla_lerobot_calibration
    return chosen


def _sim_overrides(options: GraphOptions) -> dict[str, object]:
    found = {"real_time_factor": float(options.rtf), "seed": options.seed}
    found |= _realism_override(options)
    found |= _objects_override(options)
    if not options.cameras:
        found["camera_rate"] = 0.0
    return found


def _perception_overrides(options: GraphOptions) -> dict[str, object]:
    found: dict[str, object] = {PERCEPTION_MODE_PARAM: options.perception_mode}
    if options.mode == "robot" and options.perception_mode == "camera" and options.camera_pose:
        found |= {"camera": options.camera_name, "camera_pose": options.camera_pose}
    if options.palette:  # only with camera perception (``GraphOptionRules``)
        found["palette_file"] = options.palette
    return found


def _planner_overrides(options: GraphOptions) -> dict[str, object]:
    found: dict[str, object] = {
        "llm": options.llm,
        "route": options.route,
        "grounding": options.grounding,
        "vla": options.vla,
    }
    if options.perception_mode == "camera":  # the arm hides what it placed: look from above it
        found["view_timeout"] = CAMERA_VIEW_TIMEOUT
    return found


def _driver_overrides(options: GraphOptions) -> dict[str, object]:
    found: dict[str, object] = {"port": options.so101_port}
    if options.emulate:  # its port appears once the emulator is up; it answers from a busy CPU
        found |= {"port_wait": EMULATOR_PORT_WAIT, "bus_timeout": EMULATOR_BUS_TIMEOUT}
    return found


def _realism_override(options: GraphOptions) -> dict[str, object]:
    """The realism profile for the nodes that simulate (none when off: the params file's)."""
    return {} if options.realism == "off" else {"realism": options.realism}


def _objects_override(options: GraphOptions) -> dict[str, object]:
    return {"objects": ",".join(options.objects)} if options.objects else {}


def _recorder_overrides(options: GraphOptions, namespace: str) -> dict[str, object]:
    found: dict[str, object] = {"mode": options.record_mode}
    if options.record is not None:  # an arm of a fleet records into a folder of its own
        found["output_dir"] = (
            str(Path(options.record) / namespace) if namespace else str(options.record)
        )
    if options.record_cameras:
        found["cameras"] = ",".join(options.record_cameras)
    return found


def _topic(endpoint: topics.Endpoint, namespace: str) -> str:
    """A topic name given to a node as a parameter or remap: the contract's in the root
    namespace, relative (resolved in the node's namespace) in an arm's."""
    return endpoint.relative if namespace else endpoint.name


def _node_remaps(
    executable: str, options: GraphOptions, namespace: str
) -> tuple[tuple[str, str], ...]:
    """The arm's topics (``_remaps``), and in an arm's namespace its own clock: each arm's sim
    node publishes ``/<arm>/clock`` (two on ``/clock`` would fight), and rclpy's time source,
    which reads the absolute ``/clock``, is remapped onto it."""
    found = () if executable == "joint_map_bridge_node" else _remaps(options, namespace)
    if namespace:
        found += ((topics.CLOCK.name, topics.CLOCK.relative),)
    return found


def _remaps(options: GraphOptions, namespace: str = "") -> tuple[tuple[str, str], ...]:
    """Robot mode: the arm's topics where they differ from the contract's (on every node). In
    an arm's namespace the rules match the nodes' relative names (a rule's match is resolved in
    the node's namespace)."""
    if options.mode != "robot":
        return ()
    states, trajectory = (_topic(e, namespace) for e in (topics.JOINT_STATES, topics.TRAJECTORY))
    if options.joint_map:  # the bridge speaks to the arm; the nodes to the bridge
        return (
            (states, _topic(topics.BRIDGED_JOINT_STATES, namespace)),
            (trajectory, _topic(topics.BRIDGED_TRAJECTORY, namespace)),
        )
    pairs = (
        (states, options.joint_states_topic, topics.JOINT_STATES.name),
        (trajectory, options.trajectory_topic, topics.TRAJECTORY.name),
    )
    return tuple((old, new) for old, new, contract in pairs if new != contract)
