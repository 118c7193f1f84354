"""What every lang2policy node shares: read-only, validated parameters, and bad messages
dropped with a warning instead of ending the node.

A node's parameters are the rows of its executable in ``lang2policy.graph.parameters`` (the
one place their defaults, kinds and descriptions are written): ``_param(name)`` declares one
read-only and checks its value; only a row whose default the node computes takes one here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

from lang2policy.control.command_deadline import CommandDeadline
from lang2policy.errors import ConfigError
from lang2policy.graph.parameters import parameter

Message = TypeVar("Message")
Value = TypeVar("Value")


class ReadOnlyParameters(Node):
    """A ``Node`` whose parameters are declared read-only from the table, values checked."""

    executable: ClassVar[str] = ""  # the node's key in graph.parameters.PARAMETERS

    def _param(self, name: str, computed: Any = None) -> Any:
        """Parameter ``name`` of this node's table: declared read-only with the table's
        default (``computed`` only for a row whose default the node computes), its value
        checked (numbers as float)."""
        row = parameter(self.executable, name)
        descriptor = ParameterDescriptor(
            description=row.help, read_only=True, dynamic_typing=row.dynamic
        )
        return row.check(self.declare_parameter(name, row.declared(computed), descriptor).value)

    def _realism(self):
        """``realism``: off | mild | hard | a YAML file, as a ``realism.RealismProfile`` (a bare
        off on the command line is YAML for false: taken as off)."""
        from lang2policy.realism import load_realism

        value = self._param("realism")
        if isinstance(value, bool):
            if value:
                raise ConfigError("parameter 'realism' must be off, mild, hard or a YAML file")
            value = "off"
        return load_realism(str(value))

    def _decoded(
        self, decode: Callable[[Message], Value], message: Message, topic: str
    ) -> Value | None:
        """``decode(message)``; None, with a throttled warning naming ``topic``, when the
        message is malformed (``ValueError``): a bad message never ends the node."""
        try:
            return decode(message)
        except ValueError as exc:
            self.get_logger().warning(f"ignored {topic}: {exc}", throttle_duration_sec=2.0)
            return None


def command_deadline(node: ReadOnlyParameters) -> CommandDeadline:
    """A robot node's ``CommandDeadline`` from its ``command_deadline`` and ``stream_timeout``
    parameters (the sim node and the SO-101 driver read the same two)."""
    return CommandDeadline(node._param("command_deadline"), node._param("stream_timeout"))
