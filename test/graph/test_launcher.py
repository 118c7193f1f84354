"""``lang2policy sim`` (lang2policy.graph.launcher): node commands; real graphs started, stopped.

The real runs start the launcher as a process (real node processes, real rclpy, Fast DDS on
loopback in a domain of their own), hear ``/joint_states`` from this test, then stop it with
Ctrl-C (SIGINT), kill a node to see the graph go down, or close the terminal node's stdin.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support import launcher as launcher_support
from support.waiting import wait_for

from lang2policy.errors import ConfigError
from lang2policy.graph import nodes as graph
from lang2policy.graph import topics
from lang2policy.graph.launcher import main
from lang2policy.graph.node_command import check_installed, node_command, param_value, select

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 91) % 200


# --------------------------------------------------------------------- commands
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (0.5, "0.5"),
        ("so101", "so101"),
        ("replay:/a/b.jsonl", "replay:/a/b.jsonl"),
        ("true", "'true'"),
        ("1", "'1'"),
        ("", "''"),
        ("it's #1", "'it''s #1'"),
        (["a", "b"], "[a, b]"),
    ],
)
def test_param_values_keep_their_type_through_yaml(value, text):
    assert param_value(value) == text


def test_param_value_refuses_what_ros_cannot_hold():
    with pytest.raises(ConfigError, match="cannot pass a dict"):
        param_value({"a": 1})


def test_node_command_is_ros_args_with_params_file_overrides_and_remaps():
    spec = graph.NodeSpec(
        executable="planner_node",
        name="lang2policy_planner",
        params_file=Path("/cfg/planner_node.yaml"),
        overrides={"use_sim_time": True, "llm": "openai"},
        remaps=((topics.JOINT_STATES.name, "/js"),),
    )
    assert node_command(spec, python="py") == [
        "py",
        "-c",
        "import sys; from lang2policy.ros.planner_node import main; sys.exit(main())",
        "--ros-args",
        "--params-file",
        "/cfg/planner_node.yaml",
        "-p",
        "use_sim_time:=true",
        "-p",
        "llm:=openai",
        "-r",
        "/joint_states:=/js",
        "-r",
        "__node:=lang2policy_planner",
    ]


def test_select_nodes_by_short_or_full_name():
    specs = graph.graph("sim", terminal=False)
    assert [s.executable for s in select(specs, "planner, sim_node")] == [
        "sim_node",
        "planner_node",
    ]
    assert select(specs, None) == specs
    with pytest.raises(ConfigError, match=r"unknown nodes \['terminal_node'\]; this graph has"):
        select(specs, "sim,terminal")


def test_missing_params_file_is_named(tmp_path):
    spec = graph.NodeSpec("sim_node", "lang2policy_sim", tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"sim_node: params file .*nope.yaml is missing"):
        check_installed([spec])


def test_dry_run_prints_one_command_per_node(capsys):
    assert (
        main(
            [
                "--dry-run",
                "--headless",
                "--robot",
                "panda",
                "--rtf",
                "2",
                "--record",
                "rec",
                "--only",
                "sim,recorder",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("--ros-args --params-file" in line for line in lines)
    assert "sim_node.yaml" in lines[0] and "-p robot:=panda -p real_time_factor:=2.0" in lines[0]
    assert f"-p output_dir:={Path('rec').resolve()}" in lines[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--robot", "ur5"], "robot must be one of ['panda', 'so101']"),
        (["--llm", "replay:/no/file.jsonl"], "replay file not found"),
        (["--duration", "0"], "--duration must be > 0"),
        (["--perception", "camera", "--no-cameras"], "needs the sim cameras"),
        (["--only", "driver"], "unknown nodes ['driver_node']"),
    ],
)
def test_bad_options_exit_2_with_a_reason(argv, message, capsys):
    assert main(["--headless", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lang2policy sim: error: ") and message in err


# --------------------------------------------------------------------- real graphs
def launched(*args: str, stdin=subprocess.DEVNULL) -> launcher_support.Run:
    """The launcher as a process in this module's ROS domain."""
    return launcher_support.Run(*args, domain_id=DOMAIN_ID, stdin=stdin)


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def _listen_to_joint_states(timeout: float) -> int:
    """Joint states heard from this test process within ``timeout`` s (a private context)."""
    rclpy = pytest.importorskip("rclpy")
    from sensor_msgs.msg import JointState

    old = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    os.environ.update(ROS_DOMAIN_ID=str(DOMAIN_ID), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("launcher_probe", context=context)
        heard: list = []
        node.create_subscription(JointState, topics.JOINT_STATES.name, heard.append, 10)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        wait_for(
            lambda: executor.spin_once(timeout_sec=0.05) or len(heard) >= 5,
            timeout,
            "/joint_states from the launched sim node",
        )
        executor.shutdown()
        node.destroy_node()
        return len(heard)
    finally:
        rclpy.shutdown(context=context)
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _installed(executable: str) -> bool:
    return importlib.util.find_spec(graph.NODES[executable][1]) is not None


@pytest.mark.ros
def test_headless_graph_runs_records_and_stops_cleanly_on_ctrl_c(tmp_path):
    nodes = ["sim_node", "recorder_node"] + (["safety_node"] if _installed("safety_node") else [])
    run = launched(
        "--headless",
        "--no-cameras",
        "--only",
        ",".join(nodes),
        "--record",
        str(tmp_path),
        "--record-mode",
        "session",
    )
    try:
        assert _listen_to_joint_states(timeout=40.0) >= 5, run.output
        assert sorted(run.pids()) == sorted(nodes)
        run.process.send_signal(signal.SIGINT)
    finally:
        code = run.finish()
    output = run.output
    assert code == 0, output
    assert "stop requested; stopping the graph" in output
    for executable, pid in run.pids().items():
        assert f"{executable} (pid {pid}) exited with code 0" in output
        assert _gone(pid), f"{executable} (pid {pid}) is still running"
    assert "Traceback" not in output and "SIGTERM" not in output, output

    # The recorder closed its session file on Ctrl-C: complete and readable.
    (recording,) = tmp_path.iterdir()
    assert recording.name.endswith("_session.mcap")
    from mcap.reader import make_reader

    with open(recording, "rb") as stream:
        summary = make_reader(stream).get_summary()
    found = {
        c.topic: summary.statistics.channel_message_counts[i] for i, c in summary.channels.items()
    }
    assert found[topics.JOINT_STATES.name] >= 5


@pytest.mark.ros
def test_a_node_dying_takes_the_graph_down_with_a_message(tmp_path):
    run = launched(
        "--headless", "--no-cameras", "--only", "sim,recorder", "--record", str(tmp_path)
    )
    try:
        run.wait_for_text("[lang2policy_sim]: so101 on")  # the sim node is up
        wait_for(lambda: "recorder_node" in run.pids(), 10.0, "the recorder's pid")
        victim = run.pids()["recorder_node"]
        os.kill(victim, signal.SIGKILL)
    finally:
        code = run.finish()
    output = run.output
    assert code == 1, output
    assert f"recorder_node (pid {victim}) was stopped by SIGKILL" in output
    assert "recorder_node stopped unexpectedly; stopping the other nodes" in output
    sim = run.pids()["sim_node"]
    assert f"sim_node (pid {sim}) exited with code 0" in output and _gone(sim)


@pytest.mark.ros
@pytest.mark.skipif(not _installed("terminal_node"), reason="terminal_node not written yet")
def test_closing_the_terminal_stops_the_graph(tmp_path):
    """The terminal runs in the foreground; its stdin ending (here: not a TTY) ends the run."""
    run = launched(
        "--no-cameras", "--only", "sim,terminal", "--log-dir", str(tmp_path), stdin=subprocess.PIPE
    )
    log = tmp_path / "lang2policy_sim.log"
    try:
        wait_for(lambda: log.is_file() and "so101 on" in log.read_text(), 40.0, "the sim log")
        run.process.stdin.close()  # the terminal node reads EOF and exits
    finally:
        code = run.finish()
    assert code == 0, run.output
    assert "the terminal closed; stopping the graph" in run.output
    assert f"sim_node (pid {run.pids()['sim_node']}) exited with code 0" in run.output
