"""What every lang2policy node shares: read-only, validated parameters, and bad messages
dropped with a warning instead of ending the node."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

from lang2policy.control.command_deadline import (
    DEFAULT_DEADLINE,
    DEFAULT_STREAM_TIMEOUT,
    CommandDeadline,
)
from lang2policy.errors import ConfigError

Message = TypeVar("Message")
Value = TypeVar("Value")


class ReadOnlyParameters(Node):
    """A ``Node`` whose parameters are declared read-only, numbers checked on the way in."""

    def _param(self, name: str, default, description: str):
        descriptor = ParameterDescriptor(description=description, read_only=True)
        return self.declare_parameter(name, default, descriptor).value

    def _switch(self, name: str, default, description: str):
        """A read-only parameter that may arrive as text or as a boolean (a bare ``on``/``off``
        on the command line is YAML for true/false)."""
        descriptor = ParameterDescriptor(
            description=description, read_only=True, dynamic_typing=True
        )
        return self.declare_parameter(name, default, descriptor).value

    def _realism(self, description: str):
        """``realism``: off | mild | hard | a YAML file, as a ``realism.RealismProfile`` (a bare
        off on the command line is YAML for false: taken as off)."""
        from lang2policy.realism import load_realism

        value = self._switch("realism", "off", description)
        if isinstance(value, bool):
            if value:
                raise ConfigError("parameter 'realism' must be off, mild, hard or a YAML file")
            value = "off"
        return load_realism(str(value))

    def _robot(self) -> str:
        """The read-only ``robot`` parameter: the robot description the node loads."""
        return self._param("robot", "so101", "robot description (config/robots/<name>.yaml)")

    def _number(self, name, default, description, zero=False, integer=False) -> float:
        """A read-only numeric parameter (int or float accepted), > 0 (>= 0 with ``zero``)."""
        descriptor = ParameterDescriptor(
            description=description, read_only=True, dynamic_typing=True
        )
        value = self.declare_parameter(name, default, descriptor).value
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and (value >= 0 if zero else value > 0) and (not integer or value == int(value))
        if not ok:
            kind = "an integer" if integer else "a number"
            raise ConfigError(
                f"parameter '{name}' must be {kind} {'>= 0' if zero else '> 0'}, got {value!r}"
            )
        return float(value)

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
    return CommandDeadline(
        node._number("command_deadline", DEFAULT_DEADLINE, "s: older stamped trajectories brake"),
        node._number(
            "stream_timeout",
            DEFAULT_STREAM_TIMEOUT,
            "s of silence in a stamped stream while the arm moves before it brakes",
        ),
    )
