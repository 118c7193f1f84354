"""Console entry points for the nodes: init, spin until Ctrl-C or shutdown, clean up.

Configuration errors (bad parameters, unknown robots) end the process with a one-line message
and status 1 instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from lang2policy.errors import Lang2PolicyError


def spin_node(make_node: Callable[[], Node], name: str, args=None) -> int:
    """Run the node ``make_node()`` builds until Ctrl-C or ROS shutdown; returns the exit code."""
    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (Lang2PolicyError, ParameterException) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
