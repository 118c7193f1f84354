"""``--params FILE`` (``graph.user_params``): a ROS 2 parameters file sets node parameters
per node, per arm of a fleet or for all, over the flags; a bad file is refused naming the
section and what is allowed."""

from __future__ import annotations

import pytest
import yaml

from lang2policy.errors import ConfigError
from lang2policy.graph.nodes import build
from lang2policy.graph.options import GraphOptions
from lang2policy.graph.user_params import pattern

FLEET = {"arms": ("arm1", "arm2"), "terminal": True, "cameras": False}


def params_file(tmp_path, sections: dict) -> str:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(sections))
    return str(path)


def section(**values) -> dict:
    return {"ros__parameters": values}


def overrides(specs, executable: str) -> dict[str, dict]:
    return {s.namespace: s.overrides for s in specs if s.executable == executable}


@pytest.mark.parametrize(
    ("key", "name", "matches"),
    [
        ("/arm2/lang2policy_safety", "/arm2/lang2policy_safety", True),
        ("/arm2/lang2policy_safety", "/arm1/lang2policy_safety", False),
        ("lang2policy_safety", "/lang2policy_safety", True),
        ("lang2policy_safety", "/arm1/lang2policy_safety", False),
        ("/*/lang2policy_safety", "/arm1/lang2policy_safety", True),
        ("/*/lang2policy_safety", "/lang2policy_safety", False),
        ("/**/lang2policy_safety", "/lang2policy_safety", True),
        ("/**/lang2policy_safety", "/arm1/lang2policy_safety", True),
        ("/**", "/arm1/lang2policy_sim", True),
        ("/arm1/**", "/arm2/lang2policy_sim", False),
    ],
)
def test_section_keys_name_nodes_as_rcl_does(key, name, matches):
    assert bool(pattern(key).match(name)) is matches


def test_the_most_specific_section_wins_and_the_file_wins_over_the_flags(tmp_path):
    path = params_file(tmp_path, {
        "/arm2/lang2policy_safety": section(state_timeout=3.0),  # before the wildcard: still wins
        "/**/lang2policy_safety": section(state_timeout=2.0),
        "/arm1/lang2policy_controller": section(backend="ik"),
    })  # fmt: skip
    specs = build(GraphOptions(**FLEET, controller="mpc", params=path))
    safety = overrides(specs, "safety_node")
    assert safety["arm1"]["state_timeout"] == 2.0
    assert safety["arm2"]["state_timeout"] == 3.0
    controller = overrides(specs, "controller_node")
    assert controller["arm1"]["backend"] == "ik"  # the file over --controller mpc
    assert controller["arm2"]["backend"] == "mpc"
    without = build(GraphOptions(**FLEET, controller="mpc"))
    untouched = {"sim_node", "planner_node", "terminal_node", "perception_node"}
    assert [s for s in specs if s.executable in untouched] == [
        s for s in without if s.executable in untouched
    ]


@pytest.mark.parametrize(
    ("sections", "said"),
    [
        ({"/arm3/lang2policy_safety": section(state_timeout=1.0)},
         "section '/arm3/lang2policy_safety' names no node of this graph (its nodes: "),
        ({"/arm1/lang2policy_sim": section(bogus=1)},
         "section '/arm1/lang2policy_sim': sim_node has no parameter 'bogus'; it has ["),
        ({"/**/lang2policy_sim": section(seed="x")},
         "sim_node: seed must be integer >= 0, got 'x'"),
        ({"/arm1/lang2policy_sim": {"seed": 3}},
         "section '/arm1/lang2policy_sim' must be {ros__parameters: {name: value}}"),
        ({"/arm 1/sim": section(seed=3)}, "'/arm 1/sim' is not a node name: allowed '/ns/node'"),
    ],
)  # fmt: skip
def test_a_bad_params_file_is_refused_naming_the_section(tmp_path, sections, said):
    path = params_file(tmp_path, sections)
    with pytest.raises(ConfigError) as error:
        build(GraphOptions(**FLEET, params=path))
    assert f"--params {path}: " in str(error.value)
    assert said in str(error.value)


def test_a_missing_params_file_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"nothing\.yaml"):
        build(GraphOptions(**FLEET, params=str(tmp_path / "nothing.yaml")))
