"""Console entry points for the nodes: init, spin until Ctrl-C or shutdown, clean up
(``entry_point`` makes a node module's ``main``).

Configuration errors (bad parameters, unknown robots) end the process with a one-line message
and status 1 instead of a traceback.

Stopping in order: SIGINT or SIGTERM ends the spin, then the node is destroyed (its threads
stopped, its last messages sent: the safety node's hold, a recorder's file) while the ROS
context is still valid, and only then is the context shut down. rclpy's own signal handler is
not installed: it shuts the context down at once from a thread of its own, under callbacks and
threads that are still publishing ("publisher's context is invalid" on every Ctrl-C). The
spin wakes at least every ``SIGNAL_POLL`` s to notice a signal even when no message arrives.

The executor is rclpy's events executor unless ``LANG2POLICY_EXECUTOR=single`` asks for the
single-threaded one (``make_executor``): an idle graph is mostly executor overhead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from lang2policy.errors import ConfigError, Lang2PolicyError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SIGNAL_POLL = 0.25  # s: the longest a spinning node takes to notice a stop signal
EXECUTOR = "LANG2POLICY_EXECUTOR"  # events (default) | single: see make_executor


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


class StopRequest:
    """The SIGINT/SIGTERM handler of a node process. While the node is being built (which may
    take long: models, an LLM server) a signal interrupts at once (``KeyboardInterrupt``);
    once it spins, a signal only sets ``requested``, so that no callback is cut in half, and
    the spin loop ends at its next wake-up. A second signal interrupts whatever runs."""

    def __init__(self) -> None:
        self.requested = False
        self.spinning = False

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self)

    def __call__(self, _signum, _frame) -> None:
        first = not self.requested
        self.requested = True
        if not (self.spinning and first):
            raise KeyboardInterrupt


def make_executor(context=None) -> Executor:
    """rclpy's events executor (``LANG2POLICY_EXECUTOR`` unset or ``events``), else the
    single-threaded one (``single``). The events executor waits and dispatches in C++: a node
    that only hears ``/clock`` and ``/joint_states`` at 50 Hz costs a third to a half of the
    CPU time of ``SingleThreadedExecutor``'s Python wait-set loop (``lang2policy bench idle``).
    """
    choice = os.environ.get(EXECUTOR, "events")
    if choice not in ("events", "single"):
        raise ConfigError(f"{EXECUTOR} must be 'events' or 'single', got {choice!r}")
    if choice == "events":
        with contextlib.suppress(ImportError):  # rclpy before Jazzy has none
            from rclpy.experimental import EventsExecutor

            return EventsExecutor(context=context)
    return SingleThreadedExecutor(context=context)


def spin_node(make_node: Callable[[], Node], name: str, args=None) -> int:
    """Run the node ``make_node()`` builds until Ctrl-C, SIGTERM or ROS shutdown; returns the
    exit code (see the module docstring for the order of the clean-up)."""
    accept_stop_signals()
    stop = StopRequest()
    stop.install()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = executor = None
    try:
        node = make_node()
        executor = make_executor()
        executor.add_node(node)
        stop.spinning = True
        while not stop.requested and rclpy.ok():
            executor.spin_once(timeout_sec=SIGNAL_POLL)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (Lang2PolicyError, ParameterException) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except Exception:
        if rclpy.ok():
            raise
        # The context was shut down from outside under a running callback (a publish on the
        # now invalid context fails): that is a requested stop, not a crash.
    finally:
        stop.spinning = False
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
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
