"""Console entry points for the nodes: init, spin until Ctrl-C or shutdown, clean up
(``entry_point`` makes a node module's ``main``).

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
    """Hear SIGINT and SIGTERM whatever the parent left: a shell without job control starts
    background commands (``lang2policy sim --headless &`` in a script, a CI step) with SIGINT
    ignored, and an ignored or blocked signal is inherited, so a node would never hear Ctrl-C
    or the launcher's stop. SIGINT gets Python's KeyboardInterrupt back; both are unblocked."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
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
    except Exception:
        if rclpy.ok():
            raise
        # Ctrl-C shut the context down under a running callback (a publish on the now
        # invalid context fails): that is the requested stop, not a crash.
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def entry_point(make_node: Callable[[], Node], name: str, what: str) -> Callable[..., int]:
    """The ``main(args=None)`` of console script ``name``: ``spin_node(make_node, ...)``;
    ``what`` is said in its docstring."""

    def main(args=None) -> int:
        return spin_node(make_node, name, args)

    main.__doc__ = f"Console entry ``{name}``: {what}; the exit code."
    return main
