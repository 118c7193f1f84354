"""launch/sim.launch.py and launch/robot.launch.py declare the intended graph.

``launch``/``launch_ros`` are not installable here, so each test installs a small stand-in for
the modules the files import (``launch``, ``launch.actions``, ``launch.substitutions``,
``launch.conditions``, ``launch_ros.actions``) into ``sys.modules``, only for that test. The
stand-in records what the files declare and runs them as ``ros2 launch`` would: declared
arguments set their defaults unless given, ``OpaqueFunction``s are called with a context whose
launch configurations those are, and conditions are evaluated. The tests then check the node
set, executables (console scripts of setup.py), params files (exist, parse, hold a section for
the node's name), overrides, remaps and arguments. The params files are also loaded by rcl
itself (real rclpy) to prove the format.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.graph import console_scripts, read_params

from lang2policy.errors import ConfigError
from lang2policy.graph import nodes as graph
from lang2policy.graph import options
from lang2policy.graph.parameters import names as parameter_names

REPO = Path(__file__).resolve().parents[2]
LAUNCH_DIR = REPO / "launch"
SIM_NODES = {"sim_node", "perception_node", "safety_node", "controller_node", "planner_node"}
FIXTURE = REPO / "test" / "fixtures" / "llm" / "cap_session.jsonl"


# --------------------------------------------------------------------- the stand-in
@dataclass
class Context:
    """What ``LaunchContext`` offers the files: the launch configurations."""

    launch_configurations: dict[str, str] = field(default_factory=dict)


class LaunchConfiguration:
    def __init__(self, variable_name, default=None):
        self.name, self.default = variable_name, default

    def perform(self, context: Context) -> str:
        if self.name in context.launch_configurations:
            return context.launch_configurations[self.name]
        if self.default is None:
            raise KeyError(f"launch configuration {self.name!r} is not set")
        return self.default


def _text(value, context: Context) -> str:
    return value.perform(context) if hasattr(value, "perform") else str(value)


class IfCondition:
    def __init__(self, predicate_expression):
        self.expression = predicate_expression

    def evaluate(self, context: Context) -> bool:
        return _text(self.expression, context).strip().lower() in ("true", "1")


class UnlessCondition(IfCondition):
    def evaluate(self, context: Context) -> bool:
        return not super().evaluate(context)


class DeclareLaunchArgument:
    def __init__(self, name, *, default_value=None, description="", choices=None):
        self.name, self.default_value = name, default_value
        self.description, self.choices = description, choices


class OpaqueFunction:
    def __init__(self, *, function, args=None, kwargs=None):
        self.function, self.args, self.kwargs = function, args or [], kwargs or {}


# ExecuteProcess keywords that a launch_ros Node passes on.
_PROCESS_KEYWORDS = {
    "prefix",
    "output",
    "emulate_tty",
    "condition",
    "respawn",
    "respawn_delay",
    "additional_env",
    "cwd",
    "sigterm_timeout",
    "sigkill_timeout",
    "on_exit",
}


class Node:
    def __init__(
        self,
        *,
        executable,
        package=None,
        name=None,
        namespace=None,
        parameters=None,
        remappings=None,
        arguments=None,
        ros_arguments=None,
        **process,
    ):
        unknown = set(process) - _PROCESS_KEYWORDS
        assert not unknown, f"launch_ros Node has no arguments {unknown}"
        self.executable, self.package, self.name = executable, package, name
        self.namespace, self.arguments = namespace, arguments
        self.parameters, self.remappings = list(parameters or []), list(remappings or [])
        self.process = process


class LaunchDescription:
    def __init__(self, initial_entities=None):
        self.entities = list(initial_entities or [])


def stand_in_modules() -> dict[str, types.ModuleType]:
    modules = {}
    for name, members in {
        "launch": {"LaunchDescription": LaunchDescription},
        "launch.actions": {
            "DeclareLaunchArgument": DeclareLaunchArgument,
            "OpaqueFunction": OpaqueFunction,
        },
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
        "launch.conditions": {"IfCondition": IfCondition, "UnlessCondition": UnlessCondition},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node},
    }.items():
        module = types.ModuleType(name)
        module.__dict__.update(members)
        modules[name] = module
    modules["launch"].actions = modules["launch.actions"]
    modules["launch"].substitutions = modules["launch.substitutions"]
    modules["launch"].conditions = modules["launch.conditions"]
    modules["launch_ros"].actions = modules["launch_ros.actions"]
    return modules


@dataclass
class Launched:
    arguments: dict[str, DeclareLaunchArgument]
    nodes: dict[str, Node]  # by executable; an arm's of a fleet by "<arm>/<executable>"
    context: Context


@pytest.fixture
def launch(monkeypatch):
    """``launch(file, **arguments)`` -> what the file starts, as ``ros2 launch`` would."""
    for name, module in stand_in_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    # The launch files' shared module imports launch/launch_ros: import it again, on the stand-in.
    monkeypatch.delitem(sys.modules, "lang2policy.ros.launch_description", raising=False)

    def run(filename: str, **given: str) -> Launched:
        spec = importlib.util.spec_from_file_location(
            filename.replace(".", "_"), LAUNCH_DIR / filename
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
        assert isinstance(description, LaunchDescription)
        context = Context(dict(given))
        arguments, nodes = {}, {}
        pending = list(description.entities)
        while pending:
            entity = pending.pop(0)
            if isinstance(entity, DeclareLaunchArgument):
                arguments[entity.name] = entity
                context.launch_configurations.setdefault(entity.name, entity.default_value)
            elif isinstance(entity, OpaqueFunction):
                produced = entity.function(context, *entity.args, **entity.kwargs) or []
                pending = list(produced) + pending
            elif isinstance(entity, Node):
                condition = entity.process.get("condition")
                if condition is None or condition.evaluate(context):
                    key = entity.executable  # an arm's: "arm1/sim_node"
                    key = f"{entity.namespace}/{key}" if entity.namespace else key
                    assert key not in nodes, f"{key} twice"
                    nodes[key] = entity
            else:
                raise AssertionError(f"unexpected launch entity {entity!r}")
        undeclared = set(given) - set(arguments)
        assert not undeclared, f"{filename} declares no arguments {undeclared}"
        return Launched(arguments, nodes, context)

    return run


# --------------------------------------------------------------------- checks
def check_node(node: Node, use_sim_time: bool) -> tuple[dict, dict]:
    """Package, executable, name, params file and overrides of one node; returns (file
    parameters, overrides)."""
    assert node.package == "lang2policy"
    assert node.executable in console_scripts(), f"{node.executable} is not a console script"
    assert node.name == graph.NODES[node.executable][0]
    params_file, overrides = node.parameters
    path = Path(params_file)
    assert path.is_file() and path.parent == REPO / "config" / "nodes"
    from_file = read_params(path, node.name)
    assert overrides["use_sim_time"] is use_sim_time
    unknown = set(overrides) - {"use_sim_time", *parameter_names(node.executable)}
    assert not unknown, f"{node.executable}: overrides {unknown} are not its parameters"
    return from_file, overrides


def test_sim_launch_default_graph(launch):
    launched = launch("sim.launch.py")
    assert set(launched.nodes) == SIM_NODES
    for executable, node in launched.nodes.items():
        # the sim node is the clock; the steady-timed nodes never subscribe it (graph.nodes)
        on_sim_time = executable != "sim_node" and executable not in graph.CLOCK_FREE_NODES
        check_node(node, use_sim_time=on_sim_time)
        assert node.remappings == []
        assert node.process["output"] == "screen" and node.process.get("prefix") is None
    sim = launched.nodes["sim_node"].parameters[1]
    assert (sim["robot"], sim["real_time_factor"], sim["seed"]) == ("so101", 1.0, 0)
    perception = launched.nodes["perception_node"].parameters[1]
    assert perception[graph.PERCEPTION_MODE_PARAM] == "ground_truth"
    assert launched.nodes["planner_node"].parameters[1]["llm"] == "local"


def test_sim_launch_arguments_are_declared_with_help(launch):
    launched = launch("sim.launch.py")
    expected = {name for name, _, _ in options.LAUNCH_ARGUMENTS["sim"]}
    assert set(launched.arguments) == expected
    assert {"robot", "terminal", "record", "llm", "perception", "rtf"} <= expected
    assert all(a.description for a in launched.arguments.values())


def test_sim_launch_options_reach_the_nodes(launch):
    launched = launch(
        "sim.launch.py",
        robot="panda",
        terminal="true",
        record="/tmp/rec",
        rtf="2.5",
        llm=f"replay:{FIXTURE}",
        cameras="false",
        record_mode="session",
    )
    assert set(launched.nodes) == SIM_NODES | {"terminal_node", "recorder_node"}
    terminal = launched.nodes["terminal_node"]
    assert terminal.process["prefix"] == "xterm -e"
    check_node(terminal, use_sim_time=True)
    _, recorder = check_node(launched.nodes["recorder_node"], use_sim_time=True)
    assert (recorder["output_dir"], recorder["mode"]) == ("/tmp/rec", "session")
    sim = launched.nodes["sim_node"].parameters[1]
    assert (sim["robot"], sim["real_time_factor"], sim["camera_rate"]) == ("panda", 2.5, 0.0)
    assert launched.nodes["planner_node"].parameters[1]["llm"] == f"replay:{FIXTURE}"
    assert launched.nodes["controller_node"].parameters[1]["robot"] == "panda"


def test_sim_launch_a_fleet_puts_each_arms_nodes_in_its_namespace(launch):
    launched = launch("sim.launch.py", arms="arm1,arm2", terminal="true", domain_id="7")
    arms = {f"{arm}/{e}" for arm in ("arm1", "arm2") for e in SIM_NODES}
    assert set(launched.nodes) == arms | {"terminal_node"}
    for key, node in launched.nodes.items():
        assert node.process["additional_env"] == {"ROS_DOMAIN_ID": "7"}
        if key == "terminal_node":
            assert node.namespace is None and node.remappings == []
            assert node.parameters[1]["arms"] == "arm1,arm2"
            assert node.parameters[1]["use_sim_time"] is False
            continue
        assert node.namespace == key.split("/")[0]
        assert node.remappings == [("/clock", "clock")]  # each arm's own clock
    default = launch("sim.launch.py")
    assert all(n.namespace is None for n in default.nodes.values())
    assert all(n.process["additional_env"] is None for n in default.nodes.values())


def test_sim_launch_refuses_bad_arguments(launch):
    with pytest.raises(ConfigError, match="robot must be one of"):
        launch("sim.launch.py", robot="ur5")
    with pytest.raises(ConfigError, match="terminal must be true or false"):
        launch("sim.launch.py", terminal="sometimes")


def test_robot_launch_graph_on_ros2_control(launch):
    launched = launch("robot.launch.py")
    assert set(launched.nodes) == SIM_NODES - {"sim_node"}
    for node in launched.nodes.values():
        check_node(node, use_sim_time=False)
        assert node.remappings == []  # the contract's names are ros2_control's
    perception = launched.nodes["perception_node"].parameters[1]
    assert perception[graph.PERCEPTION_MODE_PARAM] == "camera"
    assert launched.context.launch_configurations["driver"] == "ros2_control"
    expected = {name for name, _, _ in options.LAUNCH_ARGUMENTS["robot"]}
    assert set(launched.arguments) == expected
    assert {"driver", "trajectory_topic", "joint_states_topic"} <= expected


def test_robot_launch_remaps_every_node_onto_the_arms_topics(launch):
    launched = launch(
        "robot.launch.py",
        record="/tmp/rec",
        trajectory_topic="/joint_trajectory_controller/joint_trajectory",
        joint_states_topic="/panda/joint_states",
    )
    expected = {
        ("/joint_states", "/panda/joint_states"),
        ("/arm_controller/joint_trajectory", "/joint_trajectory_controller/joint_trajectory"),
    }
    assert "recorder_node" in launched.nodes
    for node in launched.nodes.values():
        assert set(node.remappings) == expected, node.executable


def test_robot_launch_bridges_a_ros2_control_arm_through_its_joint_map(launch):
    launched = launch("robot.launch.py", robot="panda", joint_map="panda")
    assert set(launched.nodes) == (SIM_NODES - {"sim_node"}) | {"joint_map_bridge_node"}
    bridge = launched.nodes["joint_map_bridge_node"]
    check_node(bridge, use_sim_time=False)
    assert bridge.parameters[1]["joint_map"] == "panda" and bridge.remappings == []
    safety = launched.nodes["safety_node"]
    assert ("/joint_states", "/lang2policy/joint_states") in safety.remappings


def test_robot_launch_drives_the_so101_on_a_port_or_the_emulator(launch):
    launched = launch("robot.launch.py", driver="so101", port="/dev/ttyACM0")
    assert set(launched.nodes) == (SIM_NODES - {"sim_node"}) | {"so101_driver_node"}
    for node in launched.nodes.values():
        check_node(node, use_sim_time=False)
    assert launched.nodes["so101_driver_node"].parameters[1]["port"] == "/dev/ttyACM0"
    emulated = launch("robot.launch.py", driver="so101", emulate="true")
    assert "so101_emulator_node" in emulated.nodes
    perception = emulated.nodes["perception_node"].parameters[1]
    assert perception[graph.PERCEPTION_MODE_PARAM] == "ground_truth"
    with pytest.raises(ConfigError, match="needs port"):
        launch("robot.launch.py", driver="so101")
    with pytest.raises(ConfigError, match="exists only in simulation"):
        launch("robot.launch.py", perception="ground_truth")


def test_launch_files_are_installed_data():
    """setup.py installs launch/ to share/lang2policy/launch (where ros2 launch looks)."""
    assert '"launch"' in (REPO / "setup.py").read_text().split("DATA_DIRS = ")[1].split("\n")[0]
    assert {p.name for p in LAUNCH_DIR.glob("*.launch.py")} == {"sim.launch.py", "robot.launch.py"}


def test_params_files_load_in_rcl():
    """rcl itself parses every params file and hands each node its section, types intact."""
    rclpy = pytest.importorskip("rclpy")
    for executable, (name, _) in graph.NODES.items():
        path = graph.params_file(executable)
        context = rclpy.Context()
        rclpy.init(context=context, args=["--ros-args", "--params-file", str(path)])
        try:
            node = rclpy.create_node(
                name,
                context=context,
                automatically_declare_parameters_from_overrides=True,
                start_parameter_services=False,
                enable_rosout=False,
            )
            loaded = {p: node.get_parameter(p).value for p in read_params(path, name)}
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)
        assert loaded == read_params(path, name), executable
