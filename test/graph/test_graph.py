"""lang2policy.graph: the one description of the node graph (pure; no ROS needed).

Checks the nodes of each mode and option, the parameters and remaps they get, the validation
errors, and that every executable is a console script of setup.py whose params file exists, is
in ROS 2 params-file format, and names only parameters its node declares, with the right types.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from support.graph import console_scripts, read_params

from lang2policy.errors import ConfigError
from lang2policy.graph import launcher, options, rules, topics
from lang2policy.graph import nodes as graph
from lang2policy.graph.parameters import override_problems, params_problems

REPO = Path(__file__).resolve().parents[2]
SIM_NODES = ["sim_node", "perception_node", "safety_node", "controller_node", "planner_node"]
FIXTURE = REPO / "test" / "fixtures" / "llm" / "cap_session.jsonl"


def by_executable(specs):
    return {spec.executable: spec for spec in specs}


# --------------------------------------------------------------------- which nodes
def test_sim_graph_nodes_in_start_order():
    specs = graph.graph("sim", terminal=False)
    assert [s.executable for s in specs] == SIM_NODES
    assert [s.name for s in specs] == [graph.NODES[s.executable][0] for s in specs]
    with_all = graph.graph("sim", terminal=True, record="/tmp/rec")
    assert [s.executable for s in with_all] == [*SIM_NODES, "recorder_node", "terminal_node"]


def test_robot_graph_drops_the_sim_node_and_uses_cameras():
    specs = by_executable(graph.graph("robot", terminal=False))
    assert sorted(specs) == sorted(set(SIM_NODES) - {"sim_node"})
    assert specs["perception_node"].overrides[graph.PERCEPTION_MODE_PARAM] == "camera"
    assert all(s.remaps == () for s in specs.values())  # ros2_control names are the contract's


def test_so101_driver_graph_on_a_port_and_on_the_emulator():
    real = by_executable(graph.graph("robot", terminal=False, driver="so101", port="/dev/ttyACM0"))
    assert sorted(real) == sorted({*SIM_NODES, "so101_driver_node"} - {"sim_node"})
    assert real["so101_driver_node"].overrides == {"use_sim_time": False, "port": "/dev/ttyACM0"}
    assert real["perception_node"].overrides[graph.PERCEPTION_MODE_PARAM] == "camera"

    specs = graph.graph("robot", terminal=False, driver="so101", emulate=True, seed=2)
    assert specs[0].executable == "so101_emulator_node"  # first: the driver waits for its port
    emulated = by_executable(specs)
    assert emulated["so101_emulator_node"].overrides == {
        "use_sim_time": False,
        "link": rules.DEFAULT_PORT,
        "seed": 2,
    }
    driver = emulated["so101_driver_node"].overrides
    assert driver["port"] == rules.DEFAULT_PORT and driver["port_wait"] > 10
    assert driver["bus_timeout"] > 0.02  # an emulated bus on a shared CPU answers slower
    assert emulated["perception_node"].overrides[graph.PERCEPTION_MODE_PARAM] == "ground_truth"
    assert all(s.overrides["use_sim_time"] is False for s in specs)


def test_a_real_camera_joins_the_robot_graph_and_perception_reads_it(tmp_path):
    pose = tmp_path / "camera_front.yaml"
    pose.write_text("front: {}\n")
    specs = by_executable(
        graph.graph(
            "robot",
            driver="so101",
            port="/dev/ttyACM0",
            camera_device="/dev/video0",
            camera_pose=str(pose),
            terminal=False,
        )
    )
    assert specs["usb_camera_node"].overrides == {
        "use_sim_time": False,
        "device": "/dev/video0",
        "name": "front",
        "intrinsics": "",
    }
    perception = specs["perception_node"].overrides
    assert perception["camera"] == "front" and perception["camera_pose"] == str(pose)
    assert "usb_camera_node" not in by_executable(graph.graph("robot", terminal=False))
    with pytest.raises(ConfigError, match=r"camera_pose: file not found: /no/pose\.yaml"):
        graph.graph("robot", camera_pose="/no/pose.yaml")
    with pytest.raises(ConfigError, match="is not a camera name"):
        graph.graph("robot", camera_name="a/b")


def test_a_joint_map_puts_a_bridge_between_the_graph_and_the_arms_controller():
    specs = by_executable(graph.graph("robot", robot="panda", terminal=False, joint_map="panda"))
    bridge = specs.pop("joint_map_bridge_node")
    assert bridge.remaps == ()  # it speaks the arm's topics (from the map) and the graph's
    assert bridge.overrides == {
        "use_sim_time": False,
        "joint_map": "panda",
        "command_topic": topics.BRIDGED_TRAJECTORY.name,
        "state_topic": topics.BRIDGED_JOINT_STATES.name,
    }
    expected = {
        (topics.JOINT_STATES.name, topics.BRIDGED_JOINT_STATES.name),
        (topics.TRAJECTORY.name, topics.BRIDGED_TRAJECTORY.name),
    }
    assert all(set(s.remaps) == expected for s in specs.values())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"joint_map": "panda"}, "is for robot 'panda', not 'so101'"),
        ({"robot": "panda", "joint_map": "ur5e"}, "ur5e"),
        (
            {"robot": "panda", "joint_map": "panda", "trajectory_topic": "/a/b"},
            "give either joint_map or trajectory_topic",
        ),
        ({"driver": "so101", "port": "/dev/ttyACM0", "joint_map": "panda"}, "ros2_control"),
    ],
)
def test_bad_joint_map_options_are_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        graph.graph("robot", **options)


def test_sim_time_only_where_a_node_reads_the_clock_and_never_on_a_robot():
    sim = by_executable(graph.graph("sim", record="/tmp/r"))
    assert sim.pop("sim_node").overrides["use_sim_time"] is False
    # steady timers and message stamps only: no /clock subscription to wake them 50 times a second
    for name in graph.CLOCK_FREE_NODES:
        assert sim.pop(name).overrides["use_sim_time"] is False
    assert sim and all(s.overrides["use_sim_time"] is True for s in sim.values())
    robot = graph.graph("robot", record="/tmp/r")
    assert all(s.overrides["use_sim_time"] is False for s in robot)


def test_a_realism_profile_reaches_the_simulating_nodes_and_a_bad_one_stops_the_start(tmp_path):
    sim = by_executable(graph.graph("sim", realism="mild", terminal=False))
    assert sim["sim_node"].overrides["realism"] == "mild"
    emulated = by_executable(
        graph.graph("robot", driver="so101", emulate=True, realism="hard",
                    terminal=False)
    )  # fmt: skip
    assert emulated["so101_emulator_node"].overrides["realism"] == "hard"
    assert "realism" not in by_executable(graph.graph("sim"))["sim_node"].overrides
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ncamera: {noise: 99}\n")
    with pytest.raises(ConfigError, match=r"camera\.noise must be a number in \[0, 30\]"):
        graph.graph("sim", realism=str(bad))
    with pytest.raises(ConfigError, match="allowed: off, mild, hard"):
        graph.graph("sim", realism="bright")


def test_a_calibrated_palette_reaches_camera_perception_and_a_bad_one_stops_the_start(tmp_path):
    palette = tmp_path / "palette.yaml"
    palette.write_text("colors: {red: [0.8, 0.1, 0.1]}\ntable: [0.5, 0.45, 0.4]\n")
    sim = by_executable(graph.graph("sim", perception="camera", palette=str(palette),
                                    terminal=False))  # fmt: skip
    assert sim["perception_node"].overrides["palette_file"] == str(palette)
    assert "palette_file" not in by_executable(graph.graph("sim"))["perception_node"].overrides
    with pytest.raises(ConfigError, match="add --perception camera"):
        graph.graph("sim", palette=str(palette))
    palette.write_text("colors: {red: [0.8, 0.1, 0.1]}\nshade: 1\n")
    with pytest.raises(ConfigError, match="unknown keys"):
        graph.graph("sim", perception="camera", palette=str(palette))


def test_options_reach_the_nodes_parameters():
    specs = by_executable(
        graph.graph(
            "sim",
            robot="panda",
            llm=f"replay:{FIXTURE}",
            rtf=2,
            seed=3,
            cameras=False,
            perception="ground_truth",
            record="/data/rec",
            record_mode="session",
            record_cameras=("front", "wrist"),
        )
    )
    sim = specs["sim_node"].overrides
    assert sim == {
        "use_sim_time": False,
        "robot": "panda",
        "real_time_factor": 2.0,
        "seed": 3,
        "camera_rate": 0.0,
    }
    assert specs["planner_node"].overrides["llm"] == f"replay:{FIXTURE}"
    assert specs["planner_node"].overrides["route"] == "auto"
    assert specs["perception_node"].overrides[graph.PERCEPTION_MODE_PARAM] == "ground_truth"
    assert specs["recorder_node"].overrides == {
        "use_sim_time": True,
        "mode": "session",
        "output_dir": "/data/rec",
        "cameras": "front,wrist",
    }
    assert all(specs[e].overrides["robot"] == "panda" for e in SIM_NODES)


def test_robot_topics_are_remapped_on_every_node():
    specs = graph.graph(
        "robot",
        terminal=True,
        record="/r",
        trajectory_topic="/joint_trajectory_controller/joint_trajectory",
    )
    expected = ((topics.TRAJECTORY.name, "/joint_trajectory_controller/joint_trajectory"),)
    assert all(s.remaps == expected for s in specs)
    both = graph.graph("robot", joint_states_topic="/arm/joint_states", trajectory_topic="/a/b")
    assert set(both[0].remaps) == {
        ("/joint_states", "/arm/joint_states"),
        ("/arm_controller/joint_trajectory", "/a/b"),
    }


# --------------------------------------------------------------------- a fleet
def test_the_default_graph_is_one_arm_in_the_root_namespace():
    for spec in graph.graph("sim", terminal=True, record="/r"):
        assert spec.namespace == "" and spec.env == {} and spec.label == spec.name
        assert not any(a.startswith("__ns") for a in launcher.node_command(spec))


def test_a_fleet_is_each_arms_graph_under_its_namespace_and_one_terminal():
    specs = graph.graph("sim", arms=("arm1", "arm2"), terminal=True, record="/r", domain_id="9")
    one = graph.graph("sim", record="/r", terminal=False)
    assert [s.executable for s in specs] == [s.executable for s in one] * 2 + ["terminal_node"]
    for arm, arm_specs in (("arm1", specs[: len(one)]), ("arm2", specs[len(one) : -1])):
        for spec, alone in zip(arm_specs, one, strict=True):
            assert (spec.namespace, spec.name, spec.label) == (
                arm,
                alone.name,
                f"{arm}/{alone.name}",
            )
            assert spec.remaps == ((topics.CLOCK.name, topics.CLOCK.relative),)
            assert spec.env == {"ROS_DOMAIN_ID": "9"}
            command = launcher.node_command(spec)
            assert command[-4:] == ["-r", f"__ns:=/{arm}", "-r", f"__node:={alone.name}"]
        recorder = by_executable(arm_specs)["recorder_node"]
        assert recorder.overrides["output_dir"] == f"/r/{arm}"
    terminal = specs[-1]
    assert terminal.namespace == "" and terminal.remaps == ()
    assert terminal.overrides["arms"] == "arm1,arm2" and terminal.overrides["use_sim_time"] is False


def test_one_named_arm_on_a_robot_remaps_relative_names():
    specs = graph.graph("robot", arms=("arm1",), joint_states_topic="/arm1/states", terminal=False)
    expected = {("joint_states", "/arm1/states"), ("/clock", "clock")}
    assert all(set(s.remaps) == expected and s.namespace == "arm1" for s in specs)
    bridged = by_executable(graph.graph("robot", arms=("arm1",), robot="panda", joint_map="panda"))
    assert bridged["joint_map_bridge_node"].overrides["state_topic"] == "lang2policy/joint_states"
    assert ("joint_states", "lang2policy/joint_states") in bridged["safety_node"].remaps


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"arms": ("arm 1",)}, "'arm 1' is not an arm name"),
        ({"arms": ("/arm1",)}, "is not an arm name"),
        ({"arms": ("arm1", "arm1")}, "each arm once"),
        ({"domain_id": "x"}, "domain_id must be empty"),
        ({"domain_id": "300"}, "domain_id must be empty"),
    ],
)
def test_bad_fleet_options_are_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        graph.graph("sim", **options)
    with pytest.raises(ConfigError, match="start one launch per arm"):
        graph.graph("robot", arms=("arm1", "arm2"))


# --------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        ("moon", {}, "mode must be one of ['sim', 'robot']"),
        ("sim", {"robot": "ur5"}, "robot must be one of ['panda', 'so101'], got 'ur5'"),
        ("sim", {"perception": "lidar"}, "perception must be one of ['ground_truth', 'camera']"),
        ("sim", {"llm": "gpt"}, "unknown llm 'gpt'; valid: local, openai, replay:FILE"),
        ("sim", {"route": "vla"}, "route must be one of ['auto', 'code', 'reward', 'skill']"),
        ("sim", {"route": "skill"}, "route 'skill' runs skill plans on the VLA: add vla:=true"),
        ("sim", {"llm": "replay:/no/such.jsonl"}, "replay file not found: /no/such.jsonl"),
        ("sim", {"llm": "openai:x"}, "unknown llm"),
        ("sim", {"rtf": 0}, "rtf (real-time factor) must be a number > 0"),
        ("sim", {"rtf": math.nan}, "must be a number > 0"),
        ("sim", {"seed": -1}, "seed must be an integer >= 0"),
        ("sim", {"record": " "}, "record: give an output directory"),
        ("sim", {"record_mode": "forever"}, "record_mode must be one of ['episode', 'session']"),
        ("sim", {"record_cameras": ("a/b",)}, "is not a camera name"),
        ("sim", {"perception": "camera", "cameras": False}, "needs the sim cameras"),
        ("robot", {"perception": "ground_truth"}, "exists only in simulation"),
        ("robot", {"driver": "so101"}, "driver 'so101' needs port"),
        ("robot", {"driver": "so101", "robot": "panda"}, "drives the so101 robot, not 'panda'"),
        ("robot", {"driver": "so101", "port": "ttyACM0"}, "port must be an absolute device"),
        ("robot", {"port": "/dev/ttyACM0"}, "port and emulate belong to driver 'so101'"),
        ("robot", {"driver": "serial"}, "driver must be one of ['ros2_control', 'so101']"),
        ("robot", {"trajectory_topic": "arm/cmd"}, "trajectory_topic must be an absolute topic"),
    ],
)
def test_bad_options_are_refused_with_what_is_allowed(mode, options, message):
    with pytest.raises(ConfigError) as info:
        graph.graph(mode, **options)
    assert message in str(info.value)


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="robto"):
        graph.graph("sim", robto="panda")


# --------------------------------------------------------------------- executables and files
def test_every_executable_is_a_console_script_of_its_module():
    scripts = console_scripts()
    for executable, (_, module) in graph.NODES.items():
        assert scripts.get(executable) == f"{module}:main", executable


def test_params_files_exist_in_params_file_format_for_every_node():
    for executable, (name, _) in graph.NODES.items():
        path = graph.params_file(executable)
        assert path == REPO / "config" / "nodes" / f"{executable}.yaml"
        params = read_params(path, name)
        assert params["use_sim_time"] is (executable not in graph.WALL_TIME_NODES)


def test_params_files_name_only_parameters_of_the_table_and_restate_no_default():
    for executable, (name, _) in graph.NODES.items():
        path = graph.params_file(executable)
        assert params_problems(executable, read_params(path, name), str(path)) == []


def test_overrides_are_parameters_of_the_table():
    """An override of a parameter the node does not have is probably a typo."""
    for mode, chosen in (("sim", {"record": "/r", "terminal": True, "vla": True}),
                         ("robot", {"driver": "so101", "port": "/dev/ttyACM0", "emulate": True,
                                    "camera_device": "0", "perception": "camera"})):  # fmt: skip
        for spec in graph.graph(mode, **chosen):
            assert override_problems(spec.executable, spec.overrides) == [], spec.executable


def test_params_file_of_unknown_executable():
    with pytest.raises(ConfigError, match="executable must be one of"):
        graph.params_file("so101_driver")


def test_available_robots():
    assert rules.available_robots() == ("panda", "so101")


# --------------------------------------------------------------------- launch arguments
def test_launch_argument_defaults_give_the_default_graph():
    for mode in rules.MODES:
        specs = graph.build(options.options_from_strings(mode, {}))
        assert specs == graph.graph(mode, terminal=False), mode


def test_launch_argument_strings_are_parsed_and_checked():
    parsed = options.options_from_strings(
        "sim",
        {
            "rtf": "0.5",
            "seed": "4",
            "cameras": "False",
            "terminal": "true",
            "record": "/r",
            "record_cameras": "front, top",
        },
    )
    assert (parsed.rtf, parsed.seed, parsed.cameras, parsed.terminal) == (0.5, 4, False, True)
    assert parsed.record_cameras == ("front", "top")
    with pytest.raises(ConfigError, match="cameras must be true or false, got 'maybe'"):
        options.options_from_strings("sim", {"cameras": "maybe"})
    with pytest.raises(ConfigError, match="rtf must be a number, got 'fast'"):
        options.options_from_strings("sim", {"rtf": "fast"})
    with pytest.raises(ConfigError, match=r"unknown launch arguments \['driver'\]"):
        options.options_from_strings("sim", {"driver": "ros2_control"})


def test_one_table_makes_the_dataclass_the_launch_arguments_and_the_flags():
    names = [o.name for o in options.OPTIONS]
    assert [f.name for f in dataclasses.fields(options.GraphOptions)] == names
    for mode in rules.MODES:
        declared = [name for name, _, _ in options.LAUNCH_ARGUMENTS[mode]]
        expected = [o.name for o in options.OPTIONS if mode in o.launch]
        assert declared == [*expected, options.TERMINAL_PREFIX[0]]
    parser = launcher.build_parser()
    flagged = {o.name for o in options.OPTIONS if o.flag is not None}
    assert flagged <= {action.dest for action in parser._actions}
    defaults = launcher.options_from_args(parser.parse_args([]))
    assert defaults == options.GraphOptions()  # the flags' defaults are the table's
    hardware = launcher.options_from_args(parser.parse_args(["--robot", "so101-hw", "--emulate"]))
    assert (hardware.mode, hardware.driver, hardware.emulate) == ("robot", "so101", True)
