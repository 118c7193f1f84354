"""The command line that starts one node of the graph as a process, as ``ros2 run`` would:
``python -c "from <module> import main; ..." --ros-args --params-file <file> -p k:=v -r a:=b
-r __node:=<name>`` and, for an arm of a fleet, ``-r __ns:=/<arm>`` (``lang2policy sim``), and the
checks before a graph is started. Pure."""

from __future__ import annotations

import importlib.util
import sys

import yaml

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError
from lang2policy.graph import nodes as graph
from lang2policy.graph.parameters import override_problems, params_problems


def param_value(value: object) -> str:
    """A ``-p name:=value`` value that rcl parses back to the same type (YAML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value if _plain_string(value) else "'" + value.replace("'", "''") + "'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(param_value(v) for v in value) + "]"
    raise ConfigError(f"cannot pass a {type(value).__name__} as a ROS parameter: {value!r}")


def _plain_string(text: str) -> bool:
    """True when YAML reads ``text`` unquoted back as the same string (not true, 1, null...)."""
    try:
        return bool(text) and yaml.safe_load(text) == text and "#" not in text
    except yaml.YAMLError:
        return False


def node_command(spec: graph.NodeSpec, python: str = sys.executable) -> list[str]:
    """The argv that starts ``spec`` as ``ros2 run`` would, through this Python."""
    code = f"import sys; from {spec.module} import main; sys.exit(main())"
    command = [python, "-c", code, "--ros-args", "--params-file", str(spec.params_file)]
    for name, value in spec.overrides.items():
        command += ["-p", f"{name}:={param_value(value)}"]
    for old, new in spec.remaps:
        command += ["-r", f"{old}:={new}"]
    if spec.namespace:  # one arm of a fleet: every relative name resolves under /<arm>
        command += ["-r", f"__ns:=/{spec.namespace}"]
    return [*command, "-r", f"__node:={spec.name}"]


def check_installed(specs: list[graph.NodeSpec]) -> None:
    """Every node's module and params file exist, and the params file and the overrides name
    the node's parameters (``graph.parameters``) with their types; or one error naming all
    that do not."""
    problems = []
    for spec in specs:
        if importlib.util.find_spec(spec.module) is None:
            problems.append(f"{spec.executable}: module {spec.module} is not installed")
        if not spec.params_file.is_file():
            problems.append(f"{spec.executable}: params file {spec.params_file} is missing")
        else:
            problems += params_problems(spec.executable, file_params(spec), str(spec.params_file))
        problems += override_problems(spec.executable, spec.overrides)
    if problems:
        raise ConfigError("cannot start the graph: " + "; ".join(problems))


def file_params(spec: graph.NodeSpec) -> dict:
    """The ``ros__parameters`` of ``spec``'s node in its params file (ROS 2 params-file
    format: ``<node name>: {ros__parameters: {...}}``)."""
    data = read_yaml(spec.params_file)
    section = data.get(spec.name)
    params = section.get("ros__parameters") if isinstance(section, dict) else None
    if set(data) != {spec.name} or not isinstance(params, dict):
        raise ConfigError(f"{spec.params_file}: expected {spec.name}: {{ros__parameters: {{...}}}}")
    return params


def select(specs: list[graph.NodeSpec], only: str | None) -> list[graph.NodeSpec]:
    """The nodes named in ``only`` (comma-separated; ``sim`` means ``sim_node``), or all."""
    if not only:
        return specs
    wanted = {
        n.strip() if n.strip().endswith("_node") else f"{n.strip()}_node"
        for n in only.split(",")
        if n.strip()
    }
    available = [s.executable for s in specs]
    unknown = sorted(wanted - set(available))
    if unknown or not wanted:
        hints = {"recorder_node": " (--record adds it)", "terminal_node": " (--headless drops it)"}
        hint = "".join(hints.get(n, "") for n in unknown)
        raise ConfigError(f"--only: unknown nodes {unknown}; this graph has {available}{hint}")
    return [s for s in specs if s.executable in wanted]
