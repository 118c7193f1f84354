"""What the graph tests read from the repository: setup.py's console scripts and the nodes'
params files."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def console_scripts() -> dict[str, str]:
    """setup.py's CONSOLE_SCRIPTS (read, not executed)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CONSOLE_SCRIPTS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no CONSOLE_SCRIPTS")


def read_params(path: Path, node_name: str) -> dict:
    """The ros__parameters of ``node_name`` in a params file, checking the format on the way."""
    data = yaml.safe_load(path.read_text())
    assert list(data) == [node_name], f"{path}: top-level key must be the node name {node_name}"
    assert list(data[node_name]) == ["ros__parameters"], f"{path}: expected ros__parameters"
    params = data[node_name]["ros__parameters"]
    assert isinstance(params, dict) and params, f"{path}: no parameters"
    return params
