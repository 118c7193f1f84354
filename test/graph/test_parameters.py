"""lang2policy.graph.parameters: every node parameter's default is written once.

The nodes (``lang2policy/ros/``) declare exactly the rows of their executable and pass no
default of their own (but for a row whose default they compute); nothing in ``lang2policy/ros/``
or ``launch/`` calls ``declare_parameter`` itself; the params files restate no default; the
graph's options take a node parameter's default from its row; docs/graph.md's table is the
table's rendering. Pure: no ROS needed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lang2policy.errors import ConfigError
from lang2policy.graph import nodes as graph
from lang2policy.graph import options
from lang2policy.graph.parameter import Parameter, number
from lang2policy.graph.parameters import PARAMETERS, markdown, names, parameter, params_problems

REPO = Path(__file__).resolve().parents[2]
ROS = REPO / "lang2policy" / "ros"
# A node's own helpers that declare its parameters (mixins apart from the node's file).
HELPERS = {"vla_node": ("vla_params",)}
# Helpers of lang2policy.ros.params that declare named parameters.
SHARED = {"_realism": ("realism",), "command_deadline": ("command_deadline", "stream_timeout")}


def _calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            yield (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")), node


def declared(executable: str) -> dict[str, int]:
    """``{parameter: number of positional arguments}`` of the node's ``_param`` calls."""
    found: dict[str, int] = {}
    for stem in (executable, *HELPERS.get(executable, ())):
        for name, call in _calls(ROS / f"{stem}.py"):
            if name == "_param":
                assert isinstance(call.args[0], ast.Constant), f"{stem}: a computed name"
                found[call.args[0].value] = len(call.args) + len(call.keywords)
            for shared in SHARED.get(name, ()):
                found[shared] = 1
    return found


@pytest.mark.parametrize("executable", sorted(PARAMETERS))
def test_a_node_declares_exactly_the_rows_of_its_table(executable):
    found = declared(executable)
    assert sorted(found) == sorted(names(executable)), executable
    for name, arguments in found.items():
        computed = parameter(executable, name).default is None
        assert arguments == (2 if computed else 1), f"{executable}.{name}: a default of its own"


def test_every_node_of_the_graph_has_a_table_and_says_which_it_is():
    assert set(graph.NODES) <= set(PARAMETERS)
    for executable in PARAMETERS:
        assert f'executable = "{executable}"' in (ROS / f"{executable}.py").read_text()


def test_nothing_declares_a_parameter_but_the_table_helper():
    sources = [*ROS.glob("*.py"), *(REPO / "launch").glob("*.py")]
    for path in sources:
        if path.name == "params.py":
            continue
        calls = [name for name, _ in _calls(path)]
        assert "declare_parameter" not in calls, f"{path.name} declares a parameter itself"
        assert "DeclareLaunchArgument" not in calls or path.name == "launch_description.py"


def test_params_files_restate_no_default():
    for executable, (name, _) in graph.NODES.items():
        path = graph.params_file(executable)
        assert params_problems(executable, params_file_values(path, name), path.name) == []
    problems = params_problems("sim_node", {"seed": 0, "sedd": 1, "camera_rate": "x"}, "f")
    assert len(problems) == 3 and "restates the default" in problems[0]


def params_file_values(path: Path, name: str) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())[name]["ros__parameters"]


def test_graph_options_take_node_defaults_from_the_table():
    pairs = {"llm": ("planner_node", "llm"), "route": ("planner_node", "route"),
             "grounding": ("planner_node", "grounding"), "vla": ("planner_node", "vla"),
             "controller": ("controller_node", "backend"), "seed": ("sim_node", "seed"),
             "vla_backend": ("vla_node", "backend"), "rtf": ("sim_node", "real_time_factor"),
             "realism": ("sim_node", "realism"), "record_mode": ("recorder_node", "mode"),
    }  # fmt: skip
    for option, (executable, name) in pairs.items():
        assert options.OPTION[option].default == parameter(executable, name).default, option


def test_docs_table_is_the_tables_rendering():
    text = (REPO / "docs" / "graph.md").read_text()
    begin, end = "<!-- parameters:begin -->\n", "<!-- parameters:end -->"
    assert begin in text and end in text, "docs/graph.md lost its parameter table markers"
    shown = text.split(begin)[1].split(end)[0]
    assert shown == markdown(), (
        "docs/graph.md's node parameters differ from lang2policy.graph.parameters: regenerate "
        "with python -c 'from lang2policy.graph.parameters import markdown; print(markdown())'"
    )


def test_rows_check_values_and_computed_defaults():
    rate = number("rate", 10.0, "Hz")
    assert rate.check(5) == 5.0
    with pytest.raises(ConfigError, match="must be a number > 0, got 0"):
        rate.check(0)
    with pytest.raises(ConfigError, match="must be an integer >= 0"):
        number("n", 0, "count", zero=True, whole=True).check(1.5)
    computed = number("rate", None, "Hz", computed="the model's fps")
    assert computed.declared(30.0) == 30.0
    with pytest.raises(ConfigError, match="must compute its default"):
        computed.declared()
    with pytest.raises(ConfigError, match="has a default in the table"):
        rate.declared(3.0)
    with pytest.raises(ValueError, match="needs `computed`"):
        Parameter("x", None, "no default")
    with pytest.raises(ConfigError, match="has no parameter 'nope'"):
        parameter("sim_node", "nope")
