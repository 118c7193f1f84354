"""``lang2policy sim``: the node graph of ``lang2policy.graph.nodes`` started from Python.

For pip installs, where ``ros2 launch`` does not exist. Each node runs as a process of its own
(``python -c "from lang2policy.ros.<node> import main; ..." --ros-args --params-file ...
-p k:=v -r a:=b -r __node:=<name>``, the same parameters and remaps as the launch files), in a
session of its own so that a Ctrl-C typed at the terminal reaches only this launcher and the
terminal node. One status line per node says when it started (pid) and how it exited.

Stopping: Ctrl-C (SIGINT), SIGTERM, SIGHUP, ``--duration`` running out or the terminal node
closing ends the graph cleanly: SIGINT to every node (the terminal node a second later, when
the keyboard did not already reach it), a bounded wait, then SIGTERM and at last SIGKILL for
stragglers; a second Ctrl-C skips to the next step. A node that exits on its own while the graph
runs is named, and the others are stopped (exit status 1).

Without ``--headless`` the terminal node runs in the foreground (it inherits the TTY) and the
other nodes log to files (``--log-dir``); headless, their logs go to this process's output.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph import nodes as graph
from lang2policy.graph import options
from lang2policy.graph.node_command import check_installed, node_command, select
from lang2policy.graph.rules import LLM_FILE_KINDS

PREFIX = "[lang2policy]"
HARDWARE_SO101 = "so101-hw"  # --robot value: the SO-101 serial driver instead of the sim node
POLL = 0.1  # s between checks on the children
TERMINAL_GRACE = 1.0  # s before the terminal node gets the SIGINT the keyboard may have sent
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FOREGROUND_NODES = ("terminal_node", "teleop_node")  # they read the keyboard: they get the TTY
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Child:
    """One started node process."""

    spec: graph.NodeSpec
    process: subprocess.Popen
    foreground: bool
    log: Path | None = None
    reported: bool = False


# ----------------------------------------------------------------- processes
class Launcher:
    """Starts the nodes, watches them, and stops them all (see the module docstring)."""

    def __init__(
        self,
        specs: list[graph.NodeSpec],
        log_dir: Path | None = None,
        sigint_timeout: float = 10.0,
        sigterm_timeout: float = 5.0,
    ) -> None:
        self.specs = specs
        self.log_dir = log_dir
        self.sigint_timeout = sigint_timeout
        self.sigterm_timeout = sigterm_timeout
        self.children: list[Child] = []
        self.signals = 0  # stop signals received
        self.clean = True

    def run(self, duration: float | None = None) -> int:
        """Start the graph, wait for a reason to stop, stop it; the exit status."""
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            self._start_all()
            status = self._supervise(duration)
        finally:
            self.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return status if self.clean else max(status, 1)

    def _on_signal(self, signum, frame) -> None:
        self.signals += 1

    def _start_all(self) -> None:
        background = [s for s in self.specs if s.executable not in FOREGROUND_NODES]
        foreground = [s for s in self.specs if s.executable in FOREGROUND_NODES]
        for spec in background:
            self._start(spec, foreground=False)
        for spec in foreground:
            say(f"{spec.executable} takes this terminal; the other nodes log to {self.log_dir}")
            self._start(spec, foreground=True)
        if not foreground:
            say("all nodes started; Ctrl-C stops them")

    def _start(self, spec: graph.NodeSpec, foreground: bool) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", **spec.env)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), path]))
        file = spec.label.replace("/", "-")  # an arm's nodes: arm1-lang2policy_sim.log
        log = None if foreground or self.log_dir is None else self.log_dir / f"{file}.log"
        output = open(log, "ab") if log else None  # noqa: SIM115 - the child holds it
        try:
            process = subprocess.Popen(
                node_command(spec),
                env=env,
                stdin=None if foreground else subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT if output else None,
                start_new_session=not foreground,  # keyboard signals reach the launcher only
                preexec_fn=_die_with_parent,
            )
        finally:
            if output:
                output.close()
        self.children.append(Child(spec, process, foreground, log))
        where = f", log {log}" if log else ""
        say(f"{spec.executable} ({spec.label}) started, pid {process.pid}{where}")

    def _supervise(self, duration: float | None) -> int:
        deadline = None if duration is None else time.monotonic() + duration
        while True:
            if self.signals:
                say("stop requested; stopping the graph")
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                say(f"--duration {duration:g} s is over; stopping the graph")
                return 0
            for child in self.children:
                code = child.process.poll()
                if code is not None:
                    return self._exited_early(child, code)
            time.sleep(POLL)

    def _exited_early(self, child: Child, code: int) -> int:
        self._report(child)
        if child.foreground:
            say("the terminal closed; stopping the graph")
            return 0 if code == 0 else 1
        log = f" (see {child.log})" if child.log else ""
        say(f"{child.spec.executable} stopped unexpectedly{log}; stopping the other nodes")
        return 1

    def shutdown(self) -> None:
        """SIGINT, wait, SIGTERM, wait, SIGKILL: every child is gone when this returns."""
        steps = (
            (signal.SIGINT, self.sigint_timeout),
            (signal.SIGTERM, self.sigterm_timeout),
            (signal.SIGKILL, self.sigterm_timeout),
        )
        for number, (sig, timeout) in enumerate(steps):
            alive = self._alive()
            if not alive:
                return
            if number:
                self.clean = False
                names = ", ".join(c.spec.executable for c in alive)
                say(f"{names} still running; sending {sig.name}")
            self._signal_all(alive, sig)
            self._wait(timeout, foreground_signal=sig if sig == signal.SIGINT else None)

    def _signal_all(self, children: list[Child], sig: signal.Signals) -> None:
        for child in children:
            if child.foreground and sig == signal.SIGINT:
                continue  # after TERMINAL_GRACE, in _wait: the keyboard may have sent it
            _send(child, sig)

    def _wait(self, timeout: float, foreground_signal: signal.Signals | None) -> None:
        signals, start = self.signals, time.monotonic()
        while self._alive() and time.monotonic() - start < timeout:
            if self.signals > signals:
                say("stopping faster (second signal)")
                return
            if foreground_signal and time.monotonic() - start >= TERMINAL_GRACE:
                for child in self._alive():
                    if child.foreground:
                        _send(child, foreground_signal)
                foreground_signal = None
            time.sleep(POLL)
        self._alive()

    def _alive(self) -> list[Child]:
        """Children still running; reports the ones that have exited."""
        alive = []
        for child in self.children:
            if child.process.poll() is None:
                alive.append(child)
            else:
                self._report(child)
        return alive

    def _report(self, child: Child) -> None:
        if child.reported:
            return
        child.reported = True
        code = child.process.returncode
        if code < 0:
            how = f"was stopped by {signal.Signals(-code).name}"
            self.clean &= -code == signal.SIGINT
        else:
            how = f"exited with code {code}"
            self.clean &= code == 0
        say(f"{child.spec.executable} (pid {child.process.pid}) {how}")


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the launcher dies without stopping it
    (SIGKILL), so no node is left running on its own."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _send(child: Child, sig: signal.Signals) -> None:
    try:
        if child.foreground:
            os.kill(child.process.pid, sig)
        else:  # its whole session: helpers it started (an LLM server) go too
            os.killpg(child.process.pid, sig)
    except ProcessLookupError:
        pass


def say(text: str) -> None:
    """A status line. Never raises: the terminal may be gone (SIGHUP) while nodes still run."""
    with contextlib.suppress(OSError, ValueError):
        print(f"{PREFIX} {text}", flush=True)


# ----------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    """``lang2policy sim``: the graph's options (``lang2policy.graph.options``) and the
    launcher's own flags."""
    parser = argparse.ArgumentParser(
        prog="lang2policy sim",
        description="Start the lang2policy ROS 2 graph on the MuJoCo simulation "
        "(sim, perception, safety, controller, planner nodes; a terminal unless --headless), "
        f"or with --robot {HARDWARE_SO101} on an SO-101 (real on --port, or --emulate).",
    )
    options.add_arguments(parser)
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument(
        "--only", metavar="NODES", help="start only these nodes (comma-separated, e.g. sim,planner)"
    )
    parser.add_argument(
        "--log-dir", type=Path, help="node logs (default: headless: this output; else ~/.ros/log)"
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="s the nodes get to exit after Ctrl-C before SIGTERM",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the node commands only")
    return parser


def options_from_args(args: argparse.Namespace) -> options.GraphOptions:
    """The graph options the command line asks for: ``--robot so101-hw`` is mode robot with the
    SO-101 driver, and file paths are made absolute (the nodes run in other directories)."""
    if args.duration is not None and args.duration <= 0:
        raise ConfigError(f"--duration must be > 0 seconds, got {args.duration:g}")
    if args.shutdown_timeout <= 0:
        raise ConfigError(f"--shutdown-timeout must be > 0 seconds, got {args.shutdown_timeout}")
    values = options.values_from_args(args)
    hardware = values["robot"] == HARDWARE_SO101
    if (values["port"] or values["emulate"]) and not hardware:
        raise ConfigError(f"--port and --emulate go with --robot {HARDWARE_SO101}")
    if values["camera_device"] and not hardware:
        raise ConfigError(f"--camera-device goes with --robot {HARDWARE_SO101}; the sim renders")
    if hardware:
        values |= {"mode": "robot", "robot": "so101", "driver": "so101"}
    for name in ("record", "camera_intrinsics", "camera_pose", "palette"):
        values[name] = str(Path(values[name]).expanduser().resolve()) if values[name] else ""
    values["record"] = values["record"] or None
    if values["port"]:  # not resolved: the emulator's port is a link that comes and goes
        values["port"] = str(Path(values["port"]).expanduser().absolute())
    values["llm"] = _absolute_llm_path(values["llm"])
    return options.GraphOptions(**values)


def default_log_dir() -> Path:
    """``$ROS_LOG_DIR`` or ``$ROS_HOME/log`` or ``~/.ros/log``, then ``lang2policy-<time>``."""
    base = (
        os.environ.get("ROS_LOG_DIR")
        or Path(os.environ.get("ROS_HOME") or Path.home() / ".ros") / "log"
    )
    return Path(base) / f"lang2policy-{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}"


def main(argv: list[str] | None = None) -> int:
    """``lang2policy sim``: run the graph until Ctrl-C; 0 when it stopped cleanly."""
    args = build_parser().parse_args(argv)
    try:
        specs = select(graph.build(options_from_args(args)), args.only)
        check_installed(specs)
    except Lang2PolicyError as exc:
        print(f"lang2policy sim: error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        for spec in specs:
            env = [f"{k}={v}" for k, v in spec.env.items()]
            print(shlex.join([*(["env", *env] if env else []), *node_command(spec)]))
        return 0
    log_dir = args.log_dir or (default_log_dir() if args.terminal else None)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    launcher = Launcher(specs, log_dir=log_dir, sigint_timeout=args.shutdown_timeout)
    try:
        return launcher.run(args.duration)
    except OSError as exc:  # a node could not be started (the others were stopped)
        print(f"lang2policy sim: error: {exc}", file=sys.stderr)
        return 1


def _absolute_llm_path(llm: str) -> str:
    kind, colon, path = llm.partition(":")
    if colon and path and kind in LLM_FILE_KINDS:
        return f"{kind}:{Path(path).expanduser().resolve()}"
    return llm


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
