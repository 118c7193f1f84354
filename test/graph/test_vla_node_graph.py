"""The VLA node's place in the graph (issue 18): off by default, on with ``vla`` (launch
argument ``vla:=true``, ``lang2policy sim --vla``), its backend passed on, and the options
that cannot work refused with a reason. Pure: no ROS needed."""

from __future__ import annotations

import argparse

import pytest

from lang2policy.errors import ConfigError
from lang2policy.graph import nodes as graph
from lang2policy.graph import options, topics


def executables(**chosen) -> dict[str, graph.NodeSpec]:
    return {spec.executable: spec for spec in graph.graph(terminal=False, **chosen)}


def test_off_by_default_and_on_with_its_backend():
    assert "vla_node" not in executables()
    spec = executables(vla=True, vla_backend="openpi://127.0.0.1:8000")["vla_node"]
    assert spec.name == "lang2policy_vla" and spec.module == "lang2policy.ros.vla_node"
    assert spec.overrides == {"use_sim_time": True, "backend": "openpi://127.0.0.1:8000"}
    lerobot = executables(vla=True, vla_backend="lerobot://127.0.0.1:8080",
                          vla_lerobot_checkpoint="/ckpt")["vla_node"]  # fmt: skip
    assert lerobot.overrides["lerobot_checkpoint"] == "/ckpt"
    robot = executables(mode="robot", vla=True)["vla_node"]
    assert robot.overrides["use_sim_time"] is False  # on the real arm: wall time


def test_launch_arguments_and_cli_flags():
    for mode in ("sim", "robot"):
        declared = {name: default for name, default, _ in options.LAUNCH_ARGUMENTS[mode]}
        assert declared["vla"] == "false" and declared["vla_backend"] == "local"
    parsed = options.options_from_strings("sim", {"vla": "true", "vla_backend": "local"})
    assert parsed.vla is True
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    values = options.values_from_args(parser.parse_args(["--vla", "--vla-backend", "local"]))
    assert values["vla"] is True and values["vla_backend"] == "local"


@pytest.mark.parametrize(
    ("chosen", "message"),
    [
        ({"vla_backend": "tcp://x:1"}, "unknown backend scheme"),
        ({"robot": "panda"}, "drives the so101"),
        ({"cameras": False}, "needs the sim cameras"),
        ({"vla_backend": "lerobot://127.0.0.1:8080"}, "needs the policy's checkpoint"),
    ],
)
def test_options_that_cannot_work_are_refused(chosen, message):
    with pytest.raises(ConfigError, match=message):
        graph.graph(terminal=False, vla=True, **chosen)


def test_the_skill_topic_and_status_node_are_in_the_contract():
    assert topics.TOPIC_TYPES[topics.SKILL.name] == "std_msgs/msg/String"
    line = topics.StatusEvent(topics.VLA_NODE, "running", "lift the red block").to_dict()
    assert line["node"] == "vla"
