"""A user's ROS 2 parameters file for the graph's nodes (``lang2policy sim --params FILE``,
``params:=FILE`` in the launch files): per-arm settings of a fleet, or any node's parameters,
in the format ``ros2 run --params-file`` reads.

Each top-level key names nodes by their fully qualified name, as rcl does: ``/arm2/safety_node``
(one node), ``safety_node`` or ``/safety_node`` (the root namespace's), ``/*/safety_node``
(one namespace level), ``/**/safety_node`` (any namespace, the root's too), ``/**`` (every
node); under it ``ros__parameters:`` holds the values. A node takes the values of every
section that names it, the more specific over the wildcards (``/**`` first, then ``*``
patterns, then exact names; in file order among equals), and they win over the values the
command's flags set. A section that names no node of the graph, a parameter a node does not
have or a value of the wrong type is refused with the section and what is allowed, before any
node starts. Pure.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError
from lang2policy.graph.parameters import override_problems

SECTION_KEY = "ros__parameters"
_NAME = re.compile(r"^/?(\*\*|\*|[A-Za-z_][A-Za-z0-9_]*)(/(\*\*|\*|[A-Za-z_][A-Za-z0-9_]*))*$")


def full_name(spec: Any) -> str:
    """``/ns/name`` or ``/name``: a node's fully qualified name."""
    return f"/{spec.namespace}/{spec.name}" if spec.namespace else f"/{spec.name}"


def pattern(key: str) -> re.Pattern[str]:
    """The fully qualified names a section key names (``*``: one segment, ``**``: any)."""
    if not isinstance(key, str) or not _NAME.match(key):
        raise ConfigError(
            f"{key!r} is not a node name: allowed '/ns/node', 'node', with '*' for one "
            "namespace level and '**' for any ('/**': every node)"
        )
    parts = []
    for segment in key.strip("/").split("/"):
        parts.append({"**": "(/[^/]+)*", "*": "/[^/]+"}.get(segment, "/" + re.escape(segment)))
    return re.compile("^" + "".join(parts) + "$")


def specificity(key: str) -> tuple[int, int]:
    """Sort key: wildcards of ``**`` first, then ``*``, exact names last (applied last)."""
    segments = key.strip("/").split("/")
    return (-segments.count("**"), -segments.count("*"))


def sections(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file's ``(key, parameters)`` sections, checked for shape, in file order."""
    data = read_yaml(Path(path))
    found = []
    for key, body in data.items():
        params = body.get(SECTION_KEY) if isinstance(body, dict) else None
        if not isinstance(body, dict) or set(body) != {SECTION_KEY} or not isinstance(params, dict):
            raise ConfigError(
                f"--params {path}: section {key!r} must be {{{SECTION_KEY}: {{name: value}}}}"
            )
        try:
            pattern(key)
        except ConfigError as exc:
            raise ConfigError(f"--params {path}: {exc}") from exc
        found.append((key, params))
    return found


def apply(path: str | Path, specs: list) -> list:
    """``specs`` with each node's overrides updated from the file at ``path``."""
    found = sorted(sections(Path(path)), key=lambda item: specificity(item[0]))  # stable
    problems, merged = [], {full_name(spec): {} for spec in specs}
    for key, params in found:
        named = [spec for spec in specs if pattern(key).match(full_name(spec))]
        if not named:
            problems.append(f"section {key!r} names no node of this graph (its nodes: "
                            f"{', '.join(sorted(merged))})")  # fmt: skip
        for spec in named:
            wrong = override_problems(spec.executable, params)
            problems += [f"section {key!r}: {problem}" for problem in wrong]
            merged[full_name(spec)].update(params)
    if problems:
        raise ConfigError(f"--params {path}: " + "; ".join(dict.fromkeys(problems)))
    return [
        replace(spec, overrides={**spec.overrides, **merged[full_name(spec)]}) for spec in specs
    ]
