"""The graph's options, written once: ``OPTIONS`` is the table from which the ``GraphOptions``
dataclass, the launch arguments of ``launch/sim.launch.py`` and ``launch/robot.launch.py``
(``LAUNCH_ARGUMENTS``, parsed back by ``options_from_strings``) and the flags of
``lang2policy sim`` (``add_arguments``) are all made, so that a new option is one row.

A row says the option's field name and default, its kind (how a launch-argument string or a
command-line value becomes the field's value), its allowed values, which launch files declare
it, and its ``lang2policy sim`` flag (none: not on the command line). The checks that span
options live in ``lang2policy.graph.rules``. An option that sets a node parameter takes its
default from that parameter's row (``lang2policy.graph.parameters``). Pure: no ROS import.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from lang2policy import cli_types
from lang2policy.errors import ConfigError
from lang2policy.graph import topics
from lang2policy.graph.parameters import default
from lang2policy.graph.rules import (
    CONTROLLERS,
    DRIVERS,
    GROUNDING,
    MODES,
    PERCEPTION_MODES,
    RECORD_MODES,
    ROUTES,
    GraphOptionRules,
    choice,
)

HARDWARE = "--robot so101-hw"  # the `lang2policy sim` spelling of mode robot, driver so101
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _bool(name: str, text: str) -> bool:
    word = text.strip().lower()
    if word not in _TRUE + _FALSE:
        raise ConfigError(f"{name} must be true or false, got {text!r}")
    return word in _TRUE


def _parsed(kind: type, what: str) -> Callable[[str, str], object]:
    def parse(name: str, text: str) -> object:
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{name} must be {what}, got {text!r}") from None

    return parse


def names(text: str) -> tuple[str, ...]:
    """``"a, b,"`` -> ``("a", "b")``: a comma-separated list of names."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


@dataclass(frozen=True)
class Kind:
    """How an option's value is typed and read: from a launch-argument string (``parse``),
    from a command-line word (``cli``; None for an on/off flag)."""

    type: object
    parse: Callable[[str, str], object]
    cli: Callable[[str], object] | None = str


TEXT = Kind(str, lambda _name, text: text)
OPTIONAL = Kind(str | None, lambda _name, text: text or None)  # "": not given
FLAG = Kind(bool, _bool, cli=None)
NUMBER = Kind(float, _parsed(float, "a number"), cli=float)
SEED = Kind(int, _parsed(int, "an integer"), cli=cli_types.seed)
NAMES = Kind(
    tuple[str, ...], lambda _name, text: names(text), cli=lambda t: names(cli_types.text(t))
)


@dataclass(frozen=True)
class Option:
    """One row of the table (see the module docstring)."""

    name: str
    default: bool | int | float | str | tuple[str, ...] | None
    help: str
    kind: Kind = TEXT
    choices: tuple[str, ...] = ()
    launch: tuple[str, ...] = MODES  # the launch files that declare it
    launch_default: str | None = None  # when the launch file's default differs
    flag: str | None = None  # `lang2policy sim` flag; None: not on the command line
    flag_help: str = ""  # when the command line says it otherwise
    metavar: str | None = None

    def launch_text(self) -> str:
        """The launch argument's default string."""
        if self.launch_default is not None:
            return self.launch_default
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if isinstance(self.default, tuple):
            return ",".join(self.default)
        return "" if self.default is None else str(self.default)


_SO101 = "so101-hw"
OPTIONS: tuple[Option, ...] = (
    Option("mode", "sim", "sim (the MuJoCo simulation) | robot (a real arm)", choices=MODES,
           launch=()),
    Option("robot", default("sim_node", "robot"),
           "robot description (config/robots/<name>.yaml): so101 | panda",
           flag="--robot", flag_help=f"so101 | panda (simulated) | {_SO101} (a real SO-101 on "
           "--port, or the emulated one with --emulate)"),
    Option("terminal", True, "true: start the terminal node (in terminal_prefix, it needs a TTY)",
           FLAG, launch_default="false", flag="--headless",
           flag_help="no terminal node; run until Ctrl-C or --duration"),
    Option("record", None, "directory for MCAP recordings; empty: no recorder node", OPTIONAL,
           flag="--record", flag_help="record MCAP files into DIR", metavar="DIR"),
    Option("record_mode", default("recorder_node", "mode"),
           "episode (a file per instruction) | session (one file)",
           choices=RECORD_MODES, flag="--record-mode"),
    Option("record_cameras", (), "comma-separated cameras whose images are recorded too", NAMES,
           flag="--record-cameras", metavar="NAMES"),
    Option("perception", None, "ground_truth (default in sim and on the emulated SO-101) | "
           "camera (default on a robot)", OPTIONAL, choices=PERCEPTION_MODES,
           flag="--perception"),
    Option("llm", default("planner_node", "llm"),
           "planner LLM: local | openai | replay:FILE | record:FILE | cache:FILE",
           flag="--llm"),
    Option("route", default("planner_node", "route"),
           "plan kind: auto (chosen per instruction) | code (policy code) | "
           "reward (reward parameters) | skill (the VLA; needs vla)", choices=ROUTES,
           flag="--route"),
    Option("grounding", default("planner_node", "grounding"),
           "code plans: on (grammar, scored candidates, retrieved examples, a "
           "dry run before moving) | off (free decoding; the goal is checked either way)",
           choices=GROUNDING, flag="--grounding"),
    Option("controller", default("controller_node", "backend"),
           "reward plans: mpc (the sampling MPC) | rl (the shipped RL "
           "policies for the task families they serve, the MPC for the rest)",
           choices=CONTROLLERS, flag="--controller"),
    Option("vla", default("planner_node", "vla"),
           "true: start the VLA node (language skills on /lang2policy/skill)",
           FLAG, flag="--vla", flag_help="start the VLA node (skills on /lang2policy/skill)"),
    Option("vla_backend", default("vla_node", "backend"),
           "VLA policy: local (models/vla-so101-tiny) | "
           "openpi://HOST:PORT | openvla://HOST:PORT | lerobot://HOST:PORT",
           flag="--vla-backend"),
    Option("vla_lerobot_checkpoint", default("vla_node", "lerobot_checkpoint"),
           "lerobot:// backend: the LeRobot policy's "
           "pretrained_model directory (lang2policy vla-serve --lerobot DIR serves it)",
           flag="--vla-lerobot-checkpoint"),
    Option("vla_lerobot_calibration", default("vla_node", "lerobot_calibration"),
           "lerobot:// backend: the arm's calibration when the "
           "policy was trained on a LeRobot recording (its units)",
           flag="--vla-lerobot-calibration"),
    Option("rtf", default("sim_node", "real_time_factor"),
           "real-time factor of the simulation", NUMBER, launch=("sim",),
           flag="--rtf"),
    Option("cameras", True, "false: the sim renders no camera images", FLAG, launch=("sim",),
           flag="--no-cameras", flag_help="the sim renders no images"),
    Option("realism", default("sim_node", "realism"),
           "realism profile of the simulated world (sim, emulate): off | mild "
           "| hard | a YAML file (config/realism/): light, shades, camera error, sensor noise, "
           "servo imperfections", flag="--realism"),
    Option("seed", default("sim_node", "seed"),
           "scene seed: the objects and their layout (sim, emulate)", SEED,
           flag="--seed", flag_help=f"scene seed (0 to {cli_types.MAX_SEED})"),
    Option("objects", (), "comma-separated objects on the simulated table, e.g. 'red block,blue "
           "bowl' (default: chosen by the seed)", NAMES, launch=(), flag="--objects",
           metavar="NAMES"),
    Option("driver", "ros2_control", "ros2_control | so101 (the serial SO-101 driver)",
           choices=DRIVERS, launch=("robot",)),
    Option("trajectory_topic", topics.TRAJECTORY.name,
           "the arm controller's JointTrajectory input", launch=("robot",)),
    Option("joint_states_topic", topics.JOINT_STATES.name, "the arm's JointState topic",
           launch=("robot",)),
    Option("joint_map", default("joint_map_bridge_node", "joint_map"),
           "ros2_control: hardware/<arm>.yaml (panda, ...) or a path; empty: "
           "the arm already uses the robot description's joint names", launch=("robot",)),
    Option("port", default("so101_driver_node", "port"),
           "driver so101: the servo bus's serial port, e.g. /dev/ttyACM0",
           launch=("robot",), flag="--port", flag_help=f"{_SO101}: the servo bus's port"),
    Option("emulate", False, "driver so101: an emulated SO-101 (servo bus on a pty, MuJoCo "
           "arm) on port", FLAG, launch=("robot",), flag="--emulate"),
    Option("camera_device", "", "a USB camera to start: index, /dev/videoN or a video file",
           launch=("robot",), flag="--camera-device"),
    Option("camera_name", default("usb_camera_node", "name"),
           "the camera's name: topics /camera/<name>/...",
           launch=("robot",), flag="--camera-name"),
    Option("camera_intrinsics", default("usb_camera_node", "intrinsics"),
           'the camera\'s ROS calibration YAML ("": a default pinhole)',
           launch=("robot",), flag="--camera-intrinsics"),
    Option("camera_pose", "", "camera pose YAML from `lang2policy calibrate camera`",
           launch=("robot",), flag="--camera-pose"),
    Option("arms", (), "a fleet: comma-separated arm names, each arm's graph under its "
           "namespace (/arm1/...), one terminal for all ('arm2: put ...'); empty: one arm in "
           "the root namespace. On a robot one name: this arm's namespace", NAMES,
           flag="--arms", metavar="NAMES"),
    Option("domain_id", "", "ROS_DOMAIN_ID of every node of this launch (empty: as set in "
           "the environment); an arm with a domain of its own is isolated from the others",
           flag="--domain-id", metavar="ID"),
    Option("params", "", "a ROS 2 parameters YAML for the graph's nodes (sections "
           "'/arm2/safety_node', 'planner_node', '/**/safety_node', '/**'): per-arm settings "
           "of a fleet; its values win over the flags'", flag="--params", metavar="FILE"),
    Option("palette", default("perception_node", "palette_file"),
           "camera perception's colours: a palette YAML from `lang2policy "
           "calibrate colors` (\"\": the scene's)", launch=("sim", "robot"), flag="--palette"),
)  # fmt: skip
OPTION: dict[str, Option] = {option.name: option for option in OPTIONS}
# The launch files' own argument: the command that gives the terminal node a TTY.
TERMINAL_PREFIX = ("terminal_prefix", "xterm -e", "command that gives the terminal node a TTY")

GraphOptions = dataclasses.make_dataclass(
    "GraphOptions",
    [(o.name, o.kind.type, dataclasses.field(default=o.default)) for o in OPTIONS],
    bases=(GraphOptionRules,),
    frozen=True,
    namespace={
        "__module__": __name__,
        "__doc__": "What a user chooses (one field per row of ``OPTIONS``); validated on "
        "construction by ``GraphOptionRules``, errors naming the allowed values.",
    },
)

LAUNCH_ARGUMENTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    mode: (
        *((o.name, o.launch_text(), o.help) for o in OPTIONS if mode in o.launch),
        TERMINAL_PREFIX,
    )
    for mode in MODES
}


def options_from_strings(mode: str, values: dict[str, str]) -> GraphOptions:
    """``GraphOptions`` from launch-argument strings (``LAUNCH_ARGUMENTS[mode]``; the
    ``terminal_prefix`` argument is for the launch file itself)."""
    choice("mode", mode, MODES)
    known = {name for name, _, _ in LAUNCH_ARGUMENTS[mode]}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown launch arguments {unknown}; known: {sorted(known)}")
    declared = [o for o in OPTIONS if mode in o.launch]
    given = {o.name: values.get(o.name, o.launch_text()) for o in declared}
    parsed = {o.name: o.kind.parse(o.name, given[o.name]) for o in declared}
    return GraphOptions(mode=mode, **parsed)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``lang2policy sim`` flags of ``OPTIONS`` (dest: the option's name; the robot's
    own options in a group of their own)."""
    robot_only = parser.add_argument_group(f"a real or emulated SO-101 ({HARDWARE})")
    for option in OPTIONS:
        if option.flag is None:
            continue
        target = robot_only if option.launch == ("robot",) else parser
        text = option.flag_help or option.help
        if option.kind.cli is None:  # an on/off flag that turns the default around
            action = "store_false" if option.default else "store_true"
            target.add_argument(option.flag, dest=option.name, action=action, help=text)
            continue
        target.add_argument(
            option.flag,
            dest=option.name,
            type=option.kind.cli,
            default=option.default,
            choices=option.choices or None,
            metavar=option.metavar,
            help=text,
        )


def values_from_args(args: argparse.Namespace) -> dict[str, object]:
    """``{option: value}`` of the command-line flags ``add_arguments`` made."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if o.flag is not None}
