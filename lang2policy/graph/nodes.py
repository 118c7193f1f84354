"""The ROS 2 node graph as data: which nodes run, with which parameters and remaps.

One description shared by ``launch/sim.launch.py``, ``launch/robot.launch.py`` (ROS 2 installs)
and ``lang2policy sim`` (``lang2policy.graph.launcher``, pip installs), so the three cannot drift.
Pure: no ROS import. Each node's parameters come from its params file
(``config/nodes/<executable>.yaml``, ROS 2 params-file format, found through
``lang2policy.paths``) plus the overrides the chosen options imply.

Two modes:
  * ``sim``: sim_node, perception_node, planner_node, controller_node, safety_node,
    [recorder_node], [terminal_node]; every node but the sim node runs on sim time (``/clock``).
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

import math
from dataclasses import dataclass, field
from pathlib import Path

from lang2policy import paths
from lang2policy.errors import ConfigError

MODES = ("sim", "robot")
PERCEPTION_MODES = ("ground_truth", "camera")
RECORD_MODES = ("episode", "session")
DRIVERS = ("ros2_control", "so101")
DEFAULT_PORT = "/tmp/lang2policy-so101"  # the emulator's port link when none is given
EMULATOR_PORT_WAIT = 60.0  # s the driver waits for the emulator's port to appear
EMULATOR_BUS_TIMEOUT = 0.1  # s per reply: the emulator shares the CPU with physics and the graph
LLM_KINDS = ("local", "openai")
PLANNERS = ("auto", "code", "reward")  # the plan kind: chosen per instruction, or fixed
LLM_FILE_KINDS = ("replay", "record", "cache")

JOINT_STATES_TOPIC = "/joint_states"
TRAJECTORY_TOPIC = "/arm_controller/joint_trajectory"
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
    "planner_node": ("lang2policy_planner", "lang2policy.ros.planner_node"),
    "recorder_node": ("lang2policy_recorder", "lang2policy.ros.recorder_node"),
    "terminal_node": ("lang2policy_terminal", "lang2policy.ros.terminal_node"),
}

# The nodes that are the robot (hardware time, never /clock).
WALL_TIME_NODES = (
    "sim_node",
    "so101_driver_node",
    "so101_emulator_node",
    "joint_map_bridge_node",
    "usb_camera_node",
)
# With a joint map, the graph's side of the bridge (the arm keeps /joint_states and its topics).
BRIDGED_STATES_TOPIC = "/lang2policy/joint_states"
BRIDGED_TRAJECTORY_TOPIC = "/lang2policy/arm_trajectory"
# The nodes that load a robot description (parameter ``robot``).
ROBOT_NODES = ("sim_node", "perception_node", "safety_node", "controller_node", "planner_node")


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph: how ``ros2 launch`` or ``lang2policy sim`` starts it."""

    executable: str
    name: str
    params_file: Path
    overrides: dict[str, object] = field(default_factory=dict)
    remaps: tuple[tuple[str, str], ...] = ()

    @property
    def module(self) -> str:
        """The Python module whose ``main()`` is this executable's entry point."""
        return NODES[self.executable][1]


@dataclass(frozen=True)
class GraphOptions:
    """What a user chooses; validated on construction (errors name the allowed values)."""

    mode: str = "sim"
    robot: str = "so101"
    terminal: bool = True
    record: str | None = None
    record_mode: str = "episode"
    record_cameras: tuple[str, ...] = ()
    perception: str | None = None  # None: ground_truth in sim, camera on a robot
    llm: str = "local"
    planner: str = "auto"
    rtf: float = 1.0
    cameras: bool = True
    seed: int = 0
    driver: str = "ros2_control"
    trajectory_topic: str = TRAJECTORY_TOPIC
    joint_states_topic: str = JOINT_STATES_TOPIC
    objects: tuple[str, ...] = ()  # the simulated table's objects (sim, emulate); () = by seed
    joint_map: str = ""  # driver "ros2_control": hardware/<arm>.yaml (or a path) to bridge to
    port: str = ""  # driver "so101": the servo bus's serial port
    emulate: bool = False  # driver "so101": an emulated arm on ``port``
    camera_device: str = ""  # robot: a USB camera (index, /dev/videoN or a file) to start
    camera_name: str = "front"  # its topics /camera/<name>/...; perception reads that camera
    camera_intrinsics: str = ""  # its ROS camera calibration YAML ("" = a default pinhole)
    camera_pose: str = ""  # robot: the camera pose YAML from `lang2policy calibrate camera`

    def __post_init__(self) -> None:
        _choice("mode", self.mode, MODES)
        _choice("robot", self.robot, available_robots())
        _choice("perception", self.perception_mode, PERCEPTION_MODES)
        _choice("record_mode", self.record_mode, RECORD_MODES)
        _choice("planner", self.planner, PLANNERS)
        check_llm(self.llm)
        if self.record is not None and not str(self.record).strip():
            raise ConfigError("record: give an output directory, or None to not record")
        if not (isinstance(self.rtf, int | float) and math.isfinite(self.rtf) and self.rtf > 0):
            raise ConfigError(f"rtf (real-time factor) must be a number > 0, got {self.rtf!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, got {self.seed!r}")
        for name in self.objects:
            if not isinstance(name, str) or not name.strip() or "," in name:
                raise ConfigError(f"objects: {name!r} is not an object name like 'red block'")
        for camera in self.record_cameras:
            if not camera or "/" in camera:
                raise ConfigError(f"record_cameras: {camera!r} is not a camera name")
        if self.mode == "sim":
            self._check_sim()
        else:
            self._check_robot()

    @property
    def perception_mode(self) -> str:
        if self.perception is not None:
            return self.perception
        return "ground_truth" if self.mode == "sim" or self.emulate else "camera"

    def _check_camera(self) -> None:
        if not self.camera_name or "/" in self.camera_name or " " in self.camera_name:
            raise ConfigError(f"camera_name: {self.camera_name!r} is not a camera name")
        for name in ("camera_intrinsics", "camera_pose"):
            path = getattr(self, name)
            if path and not Path(path).is_file():
                raise ConfigError(f"{name}: file not found: {path}")

    def _check_joint_map(self) -> None:
        from lang2policy.hardware import load_joint_map  # compiles the robot model: lazily

        if self.driver != "ros2_control":
            raise ConfigError("joint_map belongs to driver 'ros2_control'")
        if (self.trajectory_topic, self.joint_states_topic) != (
            TRAJECTORY_TOPIC,
            JOINT_STATES_TOPIC,
        ):
            raise ConfigError(
                "give either joint_map or trajectory_topic/joint_states_topic: the joint map "
                "names the arm's topics"
            )
        joint_map = load_joint_map(self.joint_map)
        if joint_map.robot != self.robot:
            raise ConfigError(
                f"joint map {self.joint_map!r} is for robot {joint_map.robot!r}, not "
                f"{self.robot!r}; pass robot {joint_map.robot!r}"
            )

    def _check_so101(self) -> None:
        if self.robot != "so101":
            raise ConfigError(f"driver 'so101' drives the so101 robot, not {self.robot!r}")
        if not self.port and not self.emulate:
            raise ConfigError(
                "driver 'so101' needs port: the servo bus's serial port (e.g. /dev/ttyACM0), "
                "or emulate to run on the emulated arm"
            )
        if self.port and not self.port.startswith("/"):
            raise ConfigError(f"port must be an absolute device path, got {self.port!r}")

    @property
    def so101_port(self) -> str:
        """The port the SO-101 driver opens (the emulator's link by default)."""
        return self.port or DEFAULT_PORT

    def _check_sim(self) -> None:
        if self.perception_mode == "camera" and not self.cameras:
            raise ConfigError("perception 'camera' needs the sim cameras; do not turn them off")

    def _check_robot(self) -> None:
        _choice("driver", self.driver, DRIVERS)
        if self.driver == "so101":
            self._check_so101()
        elif self.port or self.emulate:
            raise ConfigError("port and emulate belong to driver 'so101' (the serial SO-101)")
        if self.joint_map:
            self._check_joint_map()
        self._check_camera()
        if self.perception_mode == "ground_truth" and not self.emulate:
            raise ConfigError(
                "perception 'ground_truth' exists only in simulation (or on the emulated "
                "SO-101); a robot uses 'camera'"
            )
        for name in ("trajectory_topic", "joint_states_topic"):
            topic = getattr(self, name)
            if not topic.startswith("/") or " " in topic:
                raise ConfigError(f"{name} must be an absolute topic name, got {topic!r}")


def graph(mode: str = "sim", **options) -> list[NodeSpec]:
    """The nodes of the graph for ``mode`` (``sim`` | ``robot``) and the options of
    ``GraphOptions`` (robot, terminal, record, record_mode, record_cameras, perception, llm,
    rtf, cameras, seed, driver, trajectory_topic, joint_states_topic), in start order."""
    return build(GraphOptions(mode=mode, **options))


def build(options: GraphOptions) -> list[NodeSpec]:
    """The graph for already validated ``options``."""
    sim_time = options.mode == "sim"
    overrides = {
        "so101_emulator_node": {
            "link": options.so101_port,
            "seed": options.seed,
            **_objects_override(options),
        },
        "so101_driver_node": _driver_overrides(options),
        "joint_map_bridge_node": {
            "joint_map": options.joint_map,
            "command_topic": BRIDGED_TRAJECTORY_TOPIC,
            "state_topic": BRIDGED_STATES_TOPIC,
        },
        "sim_node": _sim_overrides(options),
        "usb_camera_node": {
            "device": options.camera_device,
            "name": options.camera_name,
            "intrinsics": options.camera_intrinsics,
        },
        "perception_node": _perception_overrides(options),
        "safety_node": {},
        "controller_node": {},
        "planner_node": {"llm": options.llm, "planner": options.planner},
        "recorder_node": _recorder_overrides(options),
        "terminal_node": {},
    }
    specs = []
    for executable in NODES:
        if not _included(executable, options):
            continue
        common: dict[str, object] = {"use_sim_time": sim_time}
        if executable in WALL_TIME_NODES:
            common["use_sim_time"] = False
        if executable in ROBOT_NODES:
            common["robot"] = options.robot
        specs.append(
            NodeSpec(
                executable=executable,
                name=NODES[executable][0],
                params_file=params_file(executable),
                overrides={**common, **overrides[executable]},
                remaps=() if executable == "joint_map_bridge_node" else _remaps(options),
            )
        )
    return specs


def params_file(executable: str) -> Path:
    """``config/nodes/<executable>.yaml`` of the source checkout or the install."""
    _choice("executable", executable, tuple(NODES))
    return paths.config_dir() / "nodes" / f"{executable}.yaml"


def available_robots() -> tuple[str, ...]:
    """Robot descriptions under config/robots/."""
    return tuple(sorted(p.stem for p in (paths.config_dir() / "robots").glob("*.yaml")))


def check_llm(llm: str) -> None:
    """``local``, ``openai`` or ``replay|record|cache:FILE``; a replay file must exist."""
    kind, colon, path = str(llm).partition(":")
    valid = f"valid: {', '.join(LLM_KINDS)}, " + ", ".join(f"{k}:FILE" for k in LLM_FILE_KINDS)
    if kind in LLM_KINDS and not colon:
        return
    if kind not in LLM_FILE_KINDS or not path:
        raise ConfigError(f"unknown llm {llm!r}; {valid}")
    if kind == "replay" and not Path(path).is_file():
        raise ConfigError(f"llm {llm!r}: replay file not found: {path}")


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
    return True


def _sim_overrides(options: GraphOptions) -> dict[str, object]:
    found = {"real_time_factor": float(options.rtf), "seed": options.seed}
    found |= _objects_override(options)
    if not options.cameras:
        found["camera_rate"] = 0.0
    return found


def _perception_overrides(options: GraphOptions) -> dict[str, object]:
    found: dict[str, object] = {PERCEPTION_MODE_PARAM: options.perception_mode}
    if options.mode == "robot" and options.perception_mode == "camera" and options.camera_pose:
        found |= {"camera": options.camera_name, "camera_pose": options.camera_pose}
    return found


def _driver_overrides(options: GraphOptions) -> dict[str, object]:
    found: dict[str, object] = {"port": options.so101_port}
    if options.emulate:  # its port appears once the emulator is up; it answers from a busy CPU
        found |= {"port_wait": EMULATOR_PORT_WAIT, "bus_timeout": EMULATOR_BUS_TIMEOUT}
    return found


def _objects_override(options: GraphOptions) -> dict[str, object]:
    return {"objects": ",".join(options.objects)} if options.objects else {}


def _recorder_overrides(options: GraphOptions) -> dict[str, object]:
    found: dict[str, object] = {"mode": options.record_mode}
    if options.record is not None:
        found["output_dir"] = str(options.record)
    if options.record_cameras:
        found["cameras"] = ",".join(options.record_cameras)
    return found


def _remaps(options: GraphOptions) -> tuple[tuple[str, str], ...]:
    """Robot mode: the arm's topics where they differ from the contract's (on every node)."""
    if options.mode != "robot":
        return ()
    if options.joint_map:  # the bridge speaks to the arm; the nodes to the bridge
        return (
            (JOINT_STATES_TOPIC, BRIDGED_STATES_TOPIC),
            (TRAJECTORY_TOPIC, BRIDGED_TRAJECTORY_TOPIC),
        )
    pairs = (
        (JOINT_STATES_TOPIC, options.joint_states_topic),
        (TRAJECTORY_TOPIC, options.trajectory_topic),
    )
    return tuple((old, new) for old, new in pairs if old != new)


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {list(allowed)}, got {value!r}")


# ----------------------------------------------------------------- launch-file arguments
_COMMON_ARGUMENTS = (
    ("robot", "so101", "robot description (config/robots/<name>.yaml): so101 | panda"),
    ("llm", "local", "planner LLM: local | openai | replay:FILE | record:FILE | cache:FILE"),
    ("planner", "auto", "plan kind: auto (per instruction) | code | reward"),
    ("terminal", "false", "true: start the terminal node (in terminal_prefix, it needs a TTY)"),
    ("terminal_prefix", "xterm -e", "command that gives the terminal node a TTY"),
    ("record", "", "directory for MCAP recordings; empty: no recorder node"),
    ("record_mode", "episode", "episode (a file per instruction) | session (one file)"),
    ("record_cameras", "", "comma-separated cameras whose images are recorded too"),
)
LAUNCH_ARGUMENTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "sim": (
        *_COMMON_ARGUMENTS,
        ("perception", "ground_truth", "ground_truth (sim poses) | camera (from the images)"),
        ("rtf", "1.0", "real-time factor of the simulation"),
        ("cameras", "true", "false: the sim renders no camera images"),
        ("seed", "0", "scene seed (objects and their layout)"),
    ),
    "robot": (
        *_COMMON_ARGUMENTS,
        ("perception", "", "camera (default) | ground_truth (the emulated SO-101 only)"),
        ("driver", "ros2_control", "ros2_control | so101 (the serial SO-101 driver)"),
        (
            "joint_map",
            "",
            "ros2_control: hardware/<arm>.yaml (panda, ...) or a path; empty: "
            "the arm already uses the robot description's joint names",
        ),
        ("port", "", "driver so101: the servo bus's serial port, e.g. /dev/ttyACM0"),
        ("emulate", "false", "driver so101: true runs an emulated SO-101 on port"),
        ("seed", "0", "emulate: scene seed of the emulated table"),
        ("camera_device", "", "a USB camera to start: index, /dev/videoN or a video file"),
        ("camera_name", "front", "the camera's name: /camera/<name>/image_raw"),
        ("camera_intrinsics", "", 'the camera\'s ROS calibration YAML ("": default pinhole)'),
        ("camera_pose", "", "camera pose YAML (lang2policy calibrate camera); perception camera"),
        ("trajectory_topic", TRAJECTORY_TOPIC, "the arm controller's JointTrajectory input"),
        ("joint_states_topic", JOINT_STATES_TOPIC, "the arm's JointState topic"),
    ),
}
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def options_from_strings(mode: str, values: dict[str, str]) -> GraphOptions:
    """``GraphOptions`` from launch-argument strings (``LAUNCH_ARGUMENTS[mode]``; the
    ``terminal_prefix`` argument is for the launch file itself)."""
    _choice("mode", mode, MODES)
    known = {name for name, _, _ in LAUNCH_ARGUMENTS[mode]}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown launch arguments {unknown}; known: {sorted(known)}")
    given = {name: default for name, default, _ in LAUNCH_ARGUMENTS[mode]} | values
    options: dict[str, object] = {
        "robot": given["robot"],
        "llm": given["llm"],
        "planner": given["planner"],
        "terminal": _bool("terminal", given["terminal"]),
        "record": given["record"] or None,
        "record_mode": given["record_mode"],
        "record_cameras": _names(given["record_cameras"]),
        "perception": given["perception"] or None,
    }
    if mode == "sim":
        options |= {
            "rtf": _parse("rtf", given["rtf"], float, "a number"),
            "cameras": _bool("cameras", given["cameras"]),
            "seed": _parse("seed", given["seed"], int, "an integer"),
        }
    else:
        options |= {k: given[k] for k in ("driver", "trajectory_topic", "joint_states_topic")}
        options |= {
            "joint_map": given["joint_map"],
            "port": given["port"],
            "emulate": _bool("emulate", given["emulate"]),
            "seed": _parse("seed", given["seed"], int, "an integer"),
        }
        options |= {k: given[k] for k in ("camera_device", "camera_name")}
        options |= {k: given[k] for k in ("camera_intrinsics", "camera_pose")}
    return GraphOptions(mode=mode, **options)


def _bool(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word not in _TRUE + _FALSE:
        raise ConfigError(f"{name} must be true or false, got {text!r}")
    return word in _TRUE


def _parse(name: str, text: str, kind: type, what: str):
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"{name} must be {what}, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())
