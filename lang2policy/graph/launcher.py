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
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from lang2policy import cli_types
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph import nodes as graph

PREFIX = "[lang2policy]"
HARDWARE_SO101 = "so101-hw"  # --robot value: the SO-101 serial driver instead of the sim node
POLL = 0.1  # s between checks on the children
TERMINAL_GRACE = 1.0  # s before the terminal node gets the SIGINT the keyboard may have sent
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
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


# ----------------------------------------------------------------- commands
def param_value(value: object) -> str:
    """A ``-p name:=value`` value that rcl parses back to the same type (YAML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value if _plain_string(value) else "'" + value.replace("'", "''") + "'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(param_value(v) for v in value) + "]"
    raise ConfigError(f"cannot pass a {type(value).__name__} as a ROS parameter: {value!r}")


def _plain_string(text: str) -> bool:
    """True when YAML reads ``text`` unquoted back as the same string (not true, 1, null...)."""
    try:
        return bool(text) and yaml.safe_load(text) == text and "#" not in text
    except yaml.YAMLError:
        return False


def node_command(spec: graph.NodeSpec, python: str = sys.executable) -> list[str]:
    """The argv that starts ``spec`` as ``ros2 run`` would, through this Python."""
    code = f"import sys; from {spec.module} import main; sys.exit(main())"
    command = [python, "-c", code, "--ros-args", "--params-file", str(spec.params_file)]
    for name, value in spec.overrides.items():
        command += ["-p", f"{name}:={param_value(value)}"]
    for old, new in spec.remaps:
        command += ["-r", f"{old}:={new}"]
    return [*command, "-r", f"__node:={spec.name}"]


def check_installed(specs: list[graph.NodeSpec]) -> None:
    """Every node's module and params file exist, or one error naming all that do not."""
    problems = []
    for spec in specs:
        if importlib.util.find_spec(spec.module) is None:
            problems.append(f"{spec.executable}: module {spec.module} is not installed")
        if not spec.params_file.is_file():
            problems.append(f"{spec.executable}: params file {spec.params_file} is missing")
    if problems:
        raise ConfigError("cannot start the graph: " + "; ".join(problems))


def select(specs: list[graph.NodeSpec], only: str | None) -> list[graph.NodeSpec]:
    """The nodes named in ``only`` (comma-separated; ``sim`` means ``sim_node``), or all."""
    if not only:
        return specs
    wanted = {
        n.strip() if n.strip().endswith("_node") else f"{n.strip()}_node"
        for n in only.split(",")
        if n.strip()
    }
    available = [s.executable for s in specs]
    unknown = sorted(wanted - set(available))
    if unknown or not wanted:
        hints = {"recorder_node": " (--record adds it)", "terminal_node": " (--headless drops it)"}
        hint = "".join(hints.get(n, "") for n in unknown)
        raise ConfigError(f"--only: unknown nodes {unknown}; this graph has {available}{hint}")
    return [s for s in specs if s.executable in wanted]


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
        background = [s for s in self.specs if s.executable != "terminal_node"]
        foreground = [s for s in self.specs if s.executable == "terminal_node"]
        for spec in background:
            self._start(spec, foreground=False)
        for spec in foreground:
            say(f"{spec.executable} takes this terminal; the other nodes log to {self.log_dir}")
            self._start(spec, foreground=True)
        if not foreground:
            say("all nodes started; Ctrl-C stops them")

    def _start(self, spec: graph.NodeSpec, foreground: bool) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), path]))
        log = None if foreground or self.log_dir is None else self.log_dir / f"{spec.name}.log"
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
        say(f"{spec.executable} ({spec.name}) started, pid {process.pid}{where}")

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
    parser = argparse.ArgumentParser(
        prog="lang2policy sim",
        description="Start the lang2policy ROS 2 graph on the MuJoCo simulation "
        "(sim, perception, safety, controller, planner nodes; a terminal unless --headless), "
        f"or with --robot {HARDWARE_SO101} on an SO-101 (real on --port, or --emulate).",
    )
    parser.add_argument(
        "--headless", action="store_true", help="no terminal node; run until Ctrl-C or --duration"
    )
    parser.add_argument(
        "--robot",
        default="so101",
        help=f"so101 | panda (simulated) | {HARDWARE_SO101} (a real SO-101 on --port, or the "
        "emulated one with --emulate)",
    )
    parser.add_argument("--port", default="", help=f"{HARDWARE_SO101}: the servo bus's port")
    parser.add_argument(
        "--emulate",
        action="store_true",
        help=f"{HARDWARE_SO101}: run on an emulated SO-101 (servo bus on a pty, MuJoCo arm)",
    )
    camera = parser.add_argument_group(f"a real camera (--robot {HARDWARE_SO101})")
    camera.add_argument("--camera-device", default="", help="index, /dev/videoN or a video file")
    camera.add_argument("--camera-name", default="front", help="topics /camera/<name>/...")
    camera.add_argument("--camera-intrinsics", default="", help="ROS camera calibration YAML")
    camera.add_argument("--camera-pose", default="", help="from `lang2policy calibrate camera`")
    parser.add_argument(
        "--llm", default="local", help="local | openai | replay:FILE | record:FILE | cache:FILE"
    )
    parser.add_argument(
        "--perception",
        choices=graph.PERCEPTION_MODES,
        help="ground_truth (default in sim and on the emulated arm) | camera",
    )
    parser.add_argument(
        "--planner",
        choices=graph.PLANNERS,
        default="auto",
        help="plan kind: chosen per instruction (auto), policy code, or reward parameters",
    )
    parser.add_argument("--rtf", type=float, default=1.0, help="real-time factor of the sim")
    parser.add_argument(
        "--seed", type=cli_types.seed, default=0, help=f"scene seed (0 to {cli_types.MAX_SEED})"
    )
    parser.add_argument(
        "--objects",
        type=cli_types.text,
        default="",
        metavar="NAMES",
        help="comma-separated objects on the simulated table, e.g. 'red block,blue bowl' "
        "(default: chosen by the seed)",
    )
    parser.add_argument("--no-cameras", action="store_true", help="the sim renders no images")
    parser.add_argument("--record", metavar="DIR", help="record MCAP files into DIR")
    parser.add_argument(
        "--record-mode",
        choices=graph.RECORD_MODES,
        default="episode",
        help="a file per instruction (episode) or one file (session)",
    )
    parser.add_argument(
        "--record-cameras",
        default="",
        metavar="NAMES",
        help="comma-separated cameras whose images are recorded too",
    )
    parser.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    parser.add_argument(
        "--only", metavar="NODES", help="start only these nodes (comma-separated, e.g. sim,planner)"
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        help="node logs (default: headless: this output; else ~/.ros/log/...)",
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


def options_from_args(args: argparse.Namespace) -> graph.GraphOptions:
    """The graph options the command line asks for."""
    if args.duration is not None and args.duration <= 0:
        raise ConfigError(f"--duration must be > 0 seconds, got {args.duration:g}")
    if args.shutdown_timeout <= 0:
        raise ConfigError(f"--shutdown-timeout must be > 0 seconds, got {args.shutdown_timeout}")
    record = str(Path(args.record).expanduser().resolve()) if args.record else None
    hardware = args.robot == HARDWARE_SO101
    if (args.port or args.emulate) and not hardware:
        raise ConfigError(f"--port and --emulate go with --robot {HARDWARE_SO101}")
    port = str(Path(args.port).expanduser().absolute()) if args.port else ""
    so101 = {"driver": "so101", "port": port, "emulate": args.emulate} if hardware else {}
    cameras = {
        "camera_device": args.camera_device,
        "camera_name": args.camera_name,
        "camera_intrinsics": _absolute(args.camera_intrinsics),
        "camera_pose": _absolute(args.camera_pose),
    }
    if args.camera_device and not hardware:
        raise ConfigError(f"--camera-device goes with --robot {HARDWARE_SO101}; the sim renders")
    if hardware:
        so101 |= cameras
    return graph.GraphOptions(
        mode="robot" if hardware else "sim",
        robot="so101" if hardware else args.robot,
        **so101,
        terminal=not args.headless,
        record=record,
        record_mode=args.record_mode,
        record_cameras=tuple(c.strip() for c in args.record_cameras.split(",") if c.strip()),
        perception=args.perception,
        llm=_absolute_llm_path(args.llm),
        planner=args.planner,
        rtf=args.rtf,
        cameras=not args.no_cameras,
        seed=args.seed,
        objects=tuple(o.strip() for o in args.objects.split(",") if o.strip()),
    )


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
            print(shlex.join(node_command(spec)))
        return 0
    log_dir = args.log_dir or (None if args.headless else default_log_dir())
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    launcher = Launcher(specs, log_dir=log_dir, sigint_timeout=args.shutdown_timeout)
    try:
        return launcher.run(args.duration)
    except OSError as exc:  # a node could not be started (the others were stopped)
        print(f"lang2policy sim: error: {exc}", file=sys.stderr)
        return 1


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve()) if path else ""


def _absolute_llm_path(llm: str) -> str:
    kind, colon, path = llm.partition(":")
    if colon and path and kind in graph.LLM_FILE_KINDS:
        return f"{kind}:{Path(path).expanduser().resolve()}"
    return llm


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
