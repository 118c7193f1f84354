"""Console entry points for the nodes: init, spin until Ctrl-C or shutdown, clean up.

Configuration errors (bad parameters, unknown robots) end the process with a one-line message
and status 1 instead of a traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from lang2policy.errors import Lang2PolicyError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def accept_stop_signals() -> None:
    """Unblock SIGINT and SIGTERM: a blocked signal mask is inherited from the parent process
    (a launcher, a test runner, a thread that blocked them), and a node started under it would
    never hear Ctrl-C or a stop from ``lang2policy sim``/``ros2 launch``."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def spin_node(make_node: Callable[[], Node], name: str, args=None) -> int:
    """Run the node ``make_node()`` builds until Ctrl-C or ROS shutdown; returns the exit code."""
    accept_stop_signals()
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
