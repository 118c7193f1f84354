"""The terminal as a ROS 2 node: type instructions and corrections, watch the robot work.

Node ``lang2policy_terminal`` (console script ``terminal_node``). With parameter ``arms``
(``arm1,arm2``: a fleet, ``lang2policy.terminal.fleet``) it does all of this for each arm under
its namespace (``/arm2/lang2policy/instruction``...) and ``arm2: TEXT`` addresses one; without,
the names below resolve in the node's own namespace (the root: exactly these). Publishes
``/lang2policy/instruction`` and ``/lang2policy/correction`` (std_msgs/String); subscribes
``/lang2policy/status`` and ``/lang2policy/safety`` (std_msgs/String JSON) and shows them as
log lines plus a live bottom toolbar (the plan about to run, what the robot says, the verdict),
and ``/lang2policy/objects`` (visualization_msgs/MarkerArray, perception's objects: printed once
when they first arrive, and on ``:scene``); calls the std_srvs/Trigger services
``/lang2policy/stop``, ``/lang2policy/resume`` (safety node) and ``/lang2policy_sim/reset``
(sim node). What a typed line means is decided by ``lang2policy.terminal`` (``:help`` lists
the commands).

Interactive (a prompt_toolkit prompt; works over ssh and in tmux, no mouse) when stdin is a
terminal, else non-interactive: lines are read from stdin, each instruction waits for its final
planner status (``--no-wait`` to not wait), and the exit status is 0 only if everything
succeeded. The ROS node spins in a background thread; the prompt owns the main thread.
A message is published once someone listens on its topic, or after ``discovery_timeout`` s
with a warning (instructions in non-interactive waiting mode: after the instruction timeout,
since a script may start together with the graph and its first line would otherwise be lost).

    terminal_node                                  # interactive
    printf 'pick up the red block\\nstop\\n' | terminal_node --timeout 60
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

import rclpy
from rclpy.duration import Duration
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from lang2policy.errors import Lang2PolicyError
from lang2policy.graph.topics import (
    CORRECTION,
    FORGET,
    INSTRUCTION,
    MEMORY,
    OBJECTS,
    RESET,
    RESUME,
    SAFETY,
    STATUS,
    STOP,
)
from lang2policy.ros.convert import objects_from_markers
from lang2policy.ros.entry import accept_stop_signals
from lang2policy.ros.params import ReadOnlyParameters
from lang2policy.terminal import (
    Console,
    Fleet,
    ServiceAnswer,
    run_interactive,
    run_non_interactive,
)
from lang2policy.terminal.fleet import ARM_NAME
from lang2policy.text_quote import one_line

SERVICES = {"stop": STOP, "resume": RESUME, "reset": RESET, "memory": MEMORY, "forget": FORGET}
# s the spinner waits for work before it looks at its stop flag: messages wake it at once, so
# this bounds only how long stopping takes, and an idle terminal wakes 4 times a second.
SPIN_TIMEOUT = 0.25


class TerminalNode(ReadOnlyParameters):
    """``lang2policy_terminal``: the ROS side of a ``Console`` (its ``Backend``: one
    ``ArmLink``), or with parameter ``arms`` of a ``Fleet`` (an ``ArmLink`` per arm)."""

    executable = "terminal_node"

    def __init__(self, emit=print, **kwargs) -> None:
        super().__init__("lang2policy_terminal", **kwargs)
        self.service_timeout = self._param("service_timeout")
        self.discovery_timeout = self._param("discovery_timeout")
        self.refresh_interval = self._param("refresh_interval")
        self.wait_timeout = self._param("wait_timeout")
        self.emit = emit
        self.arms = tuple(a.strip() for a in self._param("arms").split(",") if a.strip())
        self.instruction_discovery_timeout = self.discovery_timeout
        if not self.arms:
            self.links = {"": ArmLink(self, "", emit)}
            self.console: Console | Fleet = self.links[""].console
            return
        bad = [arm for arm in self.arms if not ARM_NAME.fullmatch(arm)]
        if bad:
            raise Lang2PolicyError(f"parameter 'arms': {bad} are not arm names (e.g. arm1)")
        self.links = {arm: ArmLink(self, arm, _prefixed(emit, arm)) for arm in self.arms}
        self.console = Fleet({arm: link.console for arm, link in self.links.items()})
        where = ", ".join(self.resolve_topic_name(x.name(INSTRUCTION)) for x in self.links.values())
        emit(f"a fleet of {len(self.arms)} arms: 'NAME: TEXT' addresses one ({where})")

    def flush(self, timeout: float = 1.0) -> None:
        """Give sent messages a moment to be acknowledged before the node goes away."""
        for link in self.links.values():
            link.flush(timeout)


class ArmLink:
    """One arm's topics and services for its ``Console`` (the console's ``Backend``): the
    names relative to the terminal's namespace, under ``arm``'s (``arm2/lang2policy/...``)
    or, for "", the terminal's own graph."""

    def __init__(self, node: TerminalNode, arm: str, emit) -> None:
        self.node, self.arm = node, arm
        self.console = Console(self, emit)
        self._instruction = node.create_publisher(String, self.name(INSTRUCTION), 10)
        self._correction = node.create_publisher(String, self.name(CORRECTION), 10)
        for topic in (STATUS, SAFETY):
            node.create_subscription(String, self.name(topic), self._on_status, 50)
        self._objects_topic = self.name(OBJECTS)
        node.create_subscription(MarkerArray, self._objects_topic, self._on_objects, 1)
        self._bad_objects = ""  # the last refused objects message's problem, said once
        self._triggers = {w: node.create_client(Trigger, self.name(s)) for w, s in SERVICES.items()}

    def name(self, endpoint) -> str:
        """``endpoint``'s name for this arm, relative to the terminal's namespace."""
        return f"{self.arm}/{endpoint.relative}" if self.arm else endpoint.relative

    def _on_status(self, message: String) -> None:
        self.console.on_status(message.data)

    def _on_objects(self, message: MarkerArray) -> None:
        """Perception's objects to the console; a malformed message is skipped and said once
        (perception republishes many times a second)."""
        try:
            objects = objects_from_markers(message)
        except ValueError as exc:
            problem = one_line(str(exc), 200)
            if problem != self._bad_objects:
                topic = self.node.resolve_topic_name(self._objects_topic)
                self.console.emit(f"! an objects message on {topic} was skipped: {problem}")
            self._bad_objects = problem
            return
        self._bad_objects = ""
        self.console.on_objects({name: state.position for name, state in objects.items()})

    def publish_instruction(self, text: str) -> None:
        self._publish(self._instruction, text, self.node.instruction_discovery_timeout)

    def publish_correction(self, text: str) -> None:
        self._publish(self._correction, text, self.node.discovery_timeout)

    def _publish(self, publisher, text: str, timeout: float) -> None:
        """Publish once someone listens (and a status publisher exists to answer), or after
        ``timeout`` s with a warning: a message sent before discovery is lost."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._heard(publisher):
            time.sleep(0.02)
        if publisher.get_subscription_count() == 0:
            self.console.emit(f"! no planner listening on {publisher.topic_name}; sent anyway")
        publisher.publish(String(data=text))

    def _heard(self, publisher) -> bool:
        return (
            publisher.get_subscription_count() > 0
            and self.node.count_publishers(self.name(STATUS)) > 0
        )

    def call_service(self, which: str) -> ServiceAnswer:
        """Call the Trigger service ``which``; unanswered after ``service_timeout`` s counts as
        no server (the request is withdrawn)."""
        client = self._triggers[which]
        timeout = self.node.service_timeout
        if not client.wait_for_service(timeout_sec=timeout):
            return ServiceAnswer(answered=False)
        future = client.call_async(Trigger.Request())
        done = threading.Event()
        future.add_done_callback(lambda _future: done.set())
        if not done.wait(timeout) or future.result() is None:
            client.remove_pending_request(future)
            return ServiceAnswer(answered=False)
        response = future.result()
        return ServiceAnswer(True, bool(response.success), response.message)

    def service_name(self, which: str) -> str:
        return self.node.resolve_service_name(self.name(SERVICES[which]))

    def flush(self, timeout: float = 1.0) -> None:
        for publisher in (self._instruction, self._correction):
            publisher.wait_for_all_acked(Duration(seconds=timeout))


def _prefixed(emit, arm: str):
    """``emit`` with each line prefixed by its arm: ``[arm2] ...``."""
    return lambda line: emit(f"[{arm}] {line}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The terminal's own flags (ROS arguments are removed before)."""
    parser = argparse.ArgumentParser(
        prog="terminal_node",
        description="Command the robot in language: instructions, corrections, stop, resume.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--non-interactive",
        action="store_true",
        help="read lines from stdin (the default when stdin is not a terminal)",
    )
    mode.add_argument(
        "--interactive",
        action="store_true",
        help="use the prompt even when stdin is not a terminal",
    )
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="non-interactive: wait for each instruction's final status "
        "before the next line (default: wait)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive,
        default=None,
        help="non-interactive: s to wait per instruction (default: parameter wait_timeout, 120)",
    )
    return parser.parse_args(argv)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def _line_printer():
    """print, serialised and flushed: lines come from the ROS thread and the main thread."""
    lock = threading.Lock()

    def emit(line: str) -> None:
        with lock:
            print(line, flush=True)

    return emit


def main(args: list[str] | None = None) -> int:
    """Console entry ``terminal_node``; returns the exit status."""
    # Signals stay Python's: Ctrl-C / SIGTERM interrupt the prompt or the stdin read in the main
    # thread (rclpy's own handler would only invalidate the context under the running loop).
    # Installed first: a SIGTERM during start-up must end the process, not just the context.
    signal.signal(signal.SIGTERM, _interrupt)
    accept_stop_signals()
    argv = sys.argv if args is None else args
    options = parse_args(remove_ros_args(argv)[1:])
    interactive = options.interactive or (not options.non_interactive and sys.stdin.isatty())
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = spinner = None
    try:
        node = TerminalNode(emit=print if interactive else _line_printer())
        spinner = Spinner(node)
        if interactive:
            return run_interactive(node.console, node.refresh_interval)
        lenient_stdio(sys.stdin, sys.stdout)
        timeout = options.timeout or node.wait_timeout
        if options.wait:  # a script may start with the graph: give the planner time to come up
            node.instruction_discovery_timeout = max(node.discovery_timeout, timeout)
        return run_non_interactive(node.console, sys.stdin, node.emit, options.wait, timeout)
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0 if interactive else 130
    except (Lang2PolicyError, ParameterException) as exc:
        print(f"terminal_node: {exc}", file=sys.stderr)
        return 1
    finally:
        if node is not None and node.context.ok():
            node.flush()
        if spinner is not None:
            spinner.stop()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def lenient_stdio(stdin, stdout) -> None:
    """Non-interactive mode: a byte of stdin that is not UTF-8 becomes a lone surrogate
    (``surrogateescape``) instead of a ``UnicodeDecodeError`` that would end the node, so the
    console refuses that one line, naming the byte and its offset, and reads on; output
    escapes what it cannot encode (``backslashreplace``; the echo of such a line) instead of
    raising. Streams without ``reconfigure`` (replaced by a caller) are left as they are."""
    for stream, errors in ((stdin, "surrogateescape"), (stdout, "backslashreplace")):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=errors)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


class Spinner:
    """The node's executor in a background thread, stopped (and joined) before the node is
    destroyed: the main thread belongs to the prompt or the stdin loop."""

    def __init__(self, node: TerminalNode) -> None:
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="ros-spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            try:
                self._executor.spin_once(timeout_sec=SPIN_TIMEOUT)
            except ExternalShutdownException:
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._executor.shutdown(timeout_sec=1.0)


if __name__ == "__main__":
    raise SystemExit(main())
