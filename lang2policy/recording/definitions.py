"""Complete ROS 2 message definitions (``ros2msg``), built the way rosbag2 builds them.

An MCAP schema of encoding ``ros2msg`` holds the top-level ``.msg`` text followed by every type
it uses, recursively, each once, after a delimiter line of 80 ``=`` and ``MSG: <pkg>/<Type>``
(rosbag2_cpp's ``LocalMessageDefinitionSource``; documented in rosbag2's
docs/message_definition_encoding.md). Readers (Foxglove, mcap-ros2-support, rosbags) build
their decoders from it, so a file is readable without the message packages installed.

The ``.msg`` files are found as rosbag2 finds them, under ``<prefix>/share/<pkg>/msg/``, for
every prefix on ``AMENT_PREFIX_PATH`` and then ``sys.prefix`` (where the ROS wheels from PyPI
install them). Pure file reading: no ROS import.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from lang2policy.errors import ConfigError

DELIMITER = "=" * 80
PRIMITIVE_TYPES = frozenset(
    {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16"}
    | {"int32", "uint32", "int64", "uint64", "string", "wstring"}
)
# A field's type at the start of a line ("foo_msgs/Bar" in "foo_msgs/Bar[] bar"), as rosbag2.
_FIELD_TYPE = re.compile(r"(?:^|\n)\s*([a-zA-Z0-9_/]+)(?:\[[^\]]*\])?\s+")
_NAME = r"[a-zA-Z][a-zA-Z0-9_]*"
_TYPE_NAME = re.compile(rf"^({_NAME})/(?:({_NAME})/)?({_NAME})$")
_MAX_DEPTH = 50


class MessageDefinitionError(ConfigError):
    """A message type name is malformed or its ``.msg`` file is not installed."""


def share_prefixes() -> list[Path]:
    """Install prefixes searched for ``share/<pkg>/msg/*.msg``: AMENT_PREFIX_PATH, sys.prefix."""
    found = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return [*found, Path(sys.prefix)]


def split_type(type_name: str) -> tuple[str, str, str]:
    """``("sensor_msgs", "msg", "JointState")`` from ``sensor_msgs/msg/JointState`` (or the
    short form ``sensor_msgs/JointState``)."""
    match = _TYPE_NAME.match(type_name)
    if match is None:
        raise MessageDefinitionError(
            f"message type {type_name!r} is not of the form <package>/msg/<Type>"
        )
    package, namespace, name = match.groups()
    return package, namespace or "msg", name


def msg_file(type_name: str, prefixes: Sequence[Path] | None = None) -> Path:
    """The installed ``.msg`` file of ``type_name``."""
    package, namespace, name = split_type(type_name)
    prefixes = share_prefixes() if prefixes is None else prefixes
    for prefix in prefixes:
        path = Path(prefix) / "share" / package / namespace / f"{name}.msg"
        if path.is_file():
            return path
    looked = ", ".join(str(Path(p) / "share" / package / namespace) for p in prefixes)
    raise MessageDefinitionError(f"no definition of {type_name} ({name}.msg) in: {looked}")


def dependencies(text: str, package: str) -> list[str]:
    """Non-primitive field types used by a ``.msg`` text, sorted; bare names get ``package``."""
    found = set()
    for match in _FIELD_TYPE.finditer(text):
        field_type = match.group(1)
        if field_type in PRIMITIVE_TYPES:
            continue
        found.add(field_type if "/" in field_type else f"{package}/{field_type}")
    return sorted(found)


def message_definition(type_name: str, prefixes: Sequence[Path] | None = None) -> str:
    """The complete ``ros2msg`` definition of ``type_name`` (e.g. ``sensor_msgs/msg/Image``)."""
    prefixes = share_prefixes() if prefixes is None else list(prefixes)
    seen: set[str] = set()

    def expand(name: str, depth: int) -> str:
        if depth > _MAX_DEPTH:
            raise MessageDefinitionError(f"definition of {type_name} nests too deeply")
        text = msg_file(name, prefixes).read_text()
        result = text
        for dependency in dependencies(text, split_type(name)[0]):
            if dependency not in seen:
                seen.add(dependency)
                result += f"\n{DELIMITER}\nMSG: {dependency}\n" + expand(dependency, depth + 1)
        return result

    return expand(type_name, 0)
