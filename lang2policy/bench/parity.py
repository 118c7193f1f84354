"""``lang2policy bench parity``: the sim node and the SO-101 driver + emulator, side by side.

One scripted scenario runs on each robot back-end, one after the other, each in a private ROS
graph of its own (a fresh ``ROS_DOMAIN_ID``, discovery on localhost only):

- sim: ``lang2policy.ros.sim_node`` with the cameras off (``camera_rate:=0``: rendering is
  not part of the arm's contract and a driver has no rendered cameras; off on both sides);
- hw: ``lang2policy.ros.so101_emulator_node`` (the Feetech bus on a pty, the MuJoCo SO-101
  behind it) and ``lang2policy.ros.so101_driver_node`` on that pty, as on a real arm.

A probe node waits for the first ``/joint_states``, records 1 s at rest, publishes one smooth
five-point trajectory of all five arm joints and the gripper on ``/arm_controller/joint_trajectory``
(offsets from the measured rest pose, 4 s), waits 1.5 s, sends an empty trajectory (hold) and
records 1 s more. Then it compares (``lang2policy.bench.parity_analysis``):

- the topics each back-end's nodes publish and subscribe, with their types (the contract:
  ``/joint_states``, ``/arm_controller/joint_trajectory``, ``/sim/objects``); ``/clock`` and
  camera topics exist only in sim, by design;
- ``/joint_states`` and ``/sim/objects`` rates and jitter (sim: 50 Hz of sim time; driver: 30
  Hz of wall time; emulator objects: 20 Hz; different by design, reported, not judged);
- the joint names and their order;
- the joint trajectories, on the time since the command was published read in each back-end's
  own stamp clock (sim: the last ``/clock``; driver: the ROS system clock it stamps with),
  resampled at 100 Hz: max and RMS |sim - hw| per joint, each side's error against the
  command (linear interpolation of the points, as ``TrajectoryFollower`` does), final error.

The bound (``--bound``, default 0.05 rad on arm joints; ``--gripper-bound`` 0.1 of the
opening): both back-ends drive the same MuJoCo model through the same follower and safety
clamp, so their difference is what the bus adds: commands at 30 Hz instead of 50, the servo
tick resolution (1.5 mrad), a bus round trip of latency. Measured on three runs: max |sim - hw|
0.005-0.013 rad per arm joint (RMS 0.002-0.008), 0.002 of the gripper's opening, while each
back-end lags its own command by 0.03-0.05 rad at up to 0.6 rad/s (one 30 Hz period of lag is
0.02 rad there) and ends within 0.004 of it. 0.05 rad is about four times the worst measured
difference, room for a loaded machine, and well below what a wrong sign, offset, joint order
or calibration would show (the scripted offsets are 0.2-0.5 rad).

Exit status: 0 parity PASS, 1 FAIL, 2 a back-end or the probe could not be set up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lang2policy import cli_types
from lang2policy.bench.parity_analysis import (
    DEFAULT_ARM_BOUND,
    DEFAULT_GRIPPER_BOUND,
    GRIPPER,
    Recording,
    compare_graphs,
    compare_tracking,
    rate_stats,
    resample,
    verdict,
)

if TYPE_CHECKING:  # the ROS side, imported only to run a scenario
    from lang2policy.ros.parity_probe import ParityProbe

REPO = Path(__file__).resolve().parents[2]
TRAJECTORY_TOPIC = "/arm_controller/joint_trajectory"
CONTRACT_TOPICS = ("/joint_states", TRAJECTORY_TOPIC, "/sim/objects", "/clock")
# Offsets (rad; opening for the gripper) from the rest pose at 1/5 .. 5/5 of the move: up to
# 0.6 rad/s; from the home pose the tool stays 8 cm or more above the table (clear of the
# objects) and every joint inside its range (``script`` clips to the calibrated ranges too).
WAYPOINTS: dict[str, tuple[float, ...]] = {
    "shoulder_pan": (0.4, 0.2, -0.2, -0.4, -0.2),
    "shoulder_lift": (-0.3, -0.4, -0.2, 0.0, -0.2),
    "elbow_flex": (0.3, 0.0, -0.3, -0.2, 0.2),
    "wrist_flex": (-0.3, -0.4, 0.0, -0.2, -0.1),
    "wrist_roll": (0.5, 0.0, -0.5, 0.0, 0.3),
    GRIPPER: (0.3, 0.5, 0.2, -0.1, 0.2),
}
LIMIT_MARGIN = 0.05  # rad (opening) kept from the ends of a joint's range


class SetupError(Exception):
    """A back-end or the probe could not be brought up (exit status 2)."""


def _status(text: str) -> None:
    print(f"[parity] {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Timings:
    """Seconds of each phase of the scenario (scaled by ``--duration-scale``)."""

    rest: float = 1.0
    move: float = 4.0
    hold: float = 1.5
    after: float = 1.0
    startup: float = 120.0  # until the first /joint_states (not scaled)

    def scaled(self, factor: float) -> Timings:
        return Timings(
            self.rest * factor,
            self.move * factor,
            self.hold * factor,
            self.after * factor,
            self.startup,
        )


# --------------------------------------------------------------------------- processes
class Child:
    """A node process; its output (stdout and stderr together) kept for error messages."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str]) -> None:
        self.label = label
        self.lines: deque[str] = deque(maxlen=200)
        self.process = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a Ctrl-C on the terminal reaches it only through stop()
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip())

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, count: int = 15) -> str:
        return "\n".join(f"    {line}" for line in list(self.lines)[-count:])

    def stop(self, timeout: float = 15.0) -> None:
        """SIGINT (the node turns torque off, cleans up), then SIGKILL after ``timeout``."""
        if self.alive():
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def _child_env(domain_id: int) -> dict[str, str]:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.setdefault("MUJOCO_GL", "egl")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _node(module: str, *params: str) -> list[str]:
    argv = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args"]
    for param in params:
        argv += ["-p", param]
    return argv


def backend_commands(backend: str, workdir: Path, seed: int) -> list[tuple[str, list[str]]]:
    """(label, argv) of the processes of ``backend`` ("sim" or "hw"), in start order."""
    if backend == "sim":
        return [("sim_node", _node("sim_node", "camera_rate:=0.0", f"seed:={seed}"))]
    port = workdir / "so101"
    return [
        ("so101_emulator", _node("so101_emulator_node", f"link:={port}", f"seed:={seed}")),
        (
            "so101_driver",
            _node("so101_driver_node", f"port:={port}", "port_wait:=30.0", "bus_timeout:=0.1"),
        ),
    ]


@contextlib.contextmanager
def running(backend: str, domain_id: int, seed: int) -> Iterator[list[Child]]:
    """The back-end's processes for the ``with`` block; stopped (and reaped) in every path."""
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="l2p-parity-") as workdir:
        try:
            for label, argv in backend_commands(backend, Path(workdir), seed):
                _status(f"starting {label} (ROS_DOMAIN_ID={domain_id})...")
                children.append(Child(label, argv, _child_env(domain_id)))
            yield children
        finally:
            for child in reversed(children):
                child.stop()


# --------------------------------------------------------------------------- the scenario
def joint_ranges() -> dict[str, tuple[float, float]]:
    """Ranges the scripted points must stay in: the calibrated servo ranges (the driver's
    clamp; the sim model's are no narrower), the gripper's opening 0..1."""
    from lang2policy.robots.so101.calibration import Calibration

    ranges = {j.name: (j.lower_rad, j.upper_rad) for j in Calibration.load(None).arm}
    ranges[GRIPPER] = (0.0, 1.0)
    return ranges


def script(
    names: list[str], rest: np.ndarray, move: float, ranges: dict[str, tuple[float, float]]
) -> list[tuple[float, list[float]]]:
    """The scripted trajectory: WAYPOINTS offsets from ``rest`` at equal steps over ``move``
    s, each joint kept LIMIT_MARGIN inside its range (a clamped command would be tracked
    badly on both sides and say nothing about parity)."""
    count = len(next(iter(WAYPOINTS.values())))
    points = []
    for k in range(count):
        row = rest.copy()
        for j, name in enumerate(names):
            row[j] += WAYPOINTS.get(name, (0.0,) * count)[k]
            if name in ranges:
                low, high = ranges[name]
                row[j] = min(max(row[j], low + LIMIT_MARGIN), high - LIMIT_MARGIN)
        points.append((move * (k + 1) / count, row.tolist()))
    return points


def _check_alive(children: list[Child], when: str) -> None:
    """A node that died is a setup error naming it, ``when`` and its last output."""
    dead = [c for c in children if not c.alive()]
    if dead:
        child = dead[0]
        raise SetupError(
            f"{child.label} exited with status {child.process.returncode} {when}; "
            f"its last output:\n{child.tail()}"
        )


def _wait(predicate, seconds: float, what: str, children: list[Child]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _check_alive(children, f"while waiting for {what}")
        if predicate():
            return
        time.sleep(0.05)
    tails = "\n".join(f"  {c.label}:\n{c.tail()}" for c in children)
    raise SetupError(f"timed out after {seconds:g} s waiting for {what}; last output:\n{tails}")


def _sleep(seconds: float, children: list[Child]) -> None:
    """Sleep ``seconds``; a node that died meanwhile is a setup error."""
    time.sleep(seconds)
    _check_alive(children, "during the scenario")


def record(backend: str, domain_id: int, seed: int, timings: Timings) -> dict:
    """Run the scenario on ``backend``; its Recording, rates, graph and node names."""
    with running(backend, domain_id, seed) as children:
        from lang2policy.ros.parity_probe import ParityProbe

        probe = ParityProbe(domain_id)
        try:
            return _scenario(backend, probe, children, timings)
        finally:
            probe.close()


def _scenario(backend: str, probe: ParityProbe, children: list[Child], timings: Timings) -> dict:
    samples = probe.samples
    _status(f"{backend}: waiting for the first /joint_states...")
    _wait(lambda: samples.joint, timings.startup, "the first /joint_states", children)
    _wait(
        probe.publisher.get_subscription_count, 30, f"a subscriber on {TRAJECTORY_TOPIC}", children
    )
    if backend == "sim":
        _wait(lambda: samples.clock is not None, 10, "/clock", children)
    with samples.lock:
        samples.joint.clear()
        samples.objects.clear()
    _status(f"{backend}: recording {timings.rest:g} s at rest...")
    _sleep(timings.rest, children)
    with samples.lock:
        names = list(samples.joint[-1][2])
        rest = np.mean([row[3] for row in samples.joint], axis=0)
    points = script(names, rest, timings.move, joint_ranges())
    _status(
        f"{backend}: sending the scripted trajectory ({len(points)} points, {timings.move:g} s)"
    )
    command_time = probe.send(names, points)
    _sleep(timings.move + timings.hold, children)
    _status(f"{backend}: holding (empty trajectory), recording {timings.after:g} s more...")
    hold_time = probe.send(names, [])
    _sleep(timings.after, children)
    graph, nodes = probe.graph(), probe.nodes()
    with samples.lock:
        joint, objects = list(samples.joint), list(samples.objects)
    return _result(names, rest, points, command_time, hold_time, joint, objects, graph, nodes)


def _result(names, rest, points, command_time, hold_time, joint, objects, graph, nodes) -> dict:
    recording = Recording(
        names=names,
        stamps=np.array([row[0] for row in joint]),
        received=np.array([row[1] for row in joint]),
        positions=np.array([row[3] for row in joint]),
        command_time=command_time,
        hold_time=hold_time,
        command_times=np.array([0.0] + [t for t, _ in points]),
        command_positions=np.array([rest.tolist()] + [p for _, p in points]),
    )
    return {
        "recording": recording,
        "names_consistent": all(row[2] == names for row in joint),
        "rates": {
            "joint_states_received": rate_stats(recording.received),
            "joint_states_stamps": rate_stats(recording.stamps),
            "objects_received": rate_stats([r for _, r in objects]),
        },
        "graph": graph,
        "nodes": nodes,
    }


# --------------------------------------------------------------------------- report
def build_report(sim: dict, hw: dict, arm_bound: float, gripper_bound: float) -> dict:
    """All figures of the comparison (JSON-ready) and the verdict."""
    rows, graph_failures = compare_graphs(sim["graph"], hw["graph"])
    tracking = compare_tracking(sim["recording"], hw["recording"])
    sim_names, hw_names = sim["recording"].names, hw["recording"].names
    failures = list(graph_failures)
    for label, side in (("sim", sim), ("hw", hw)):
        if not side["names_consistent"]:
            failures.append(f"{label}: joint names change between /joint_states messages")
    ok, reasons = verdict(failures, sim_names, hw_names, tracking, arm_bound, gripper_bound)
    return {
        "verdict": "PASS" if ok else "FAIL",
        "reasons": reasons,
        "bounds": {"arm_rad": arm_bound, "gripper_opening": gripper_bound},
        "nodes": {"sim": sim["nodes"], "hw": hw["nodes"]},
        "topics": [row.__dict__ for row in rows],
        "joint_names": {"sim": sim_names, "hw": hw_names, "identical": sim_names == hw_names},
        "rates": {"sim": sim["rates"], "hw": hw["rates"]},
        "tracking": tracking,
        "alignment": "time since the command was published, in each back-end's stamp clock",
    }


def _figure(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def format_text(report: dict) -> str:
    """The side-by-side table of the report."""
    lines = [f"Parity: sim node vs SO-101 driver + emulator: {report['verdict']}", "", "Topics"]
    lines.append(f"  {'topic':<34}{'sim':<50}{'hw':<50}classification")
    for row in report["topics"]:
        mark = "" if row["ok"] else "  <-- FAIL"
        lines.append(
            f"  {row['topic']:<34}{row['sim']:<50}{row['hw']:<50}{row['classification']}{mark}"
        )
    lines += [f"  nodes: sim {report['nodes']['sim']}, hw {report['nodes']['hw']}", ""]
    names = report["joint_names"]
    same = "identical" if names["identical"] else "DIFFERENT"
    lines += [f"Joint names ({same}): sim {names['sim']}", f"{'':<17}hw  {names['hw']}", ""]
    lines.append(f"Rates{'':<29}{'sim':>24}{'hw':>24}")
    for key, label in (
        ("joint_states_received", "/joint_states (receive times)"),
        ("joint_states_stamps", "/joint_states (stamps)"),
        ("objects_received", "/sim/objects (receive times)"),
    ):
        cells = []
        for side in ("sim", "hw"):
            r = report["rates"][side][key]
            cells.append(f"{r['rate_hz']:.1f} Hz +-{r['jitter_ms']:.1f} ms")
        lines.append(f"  {label:<32}{cells[0]:>24}{cells[1]:>24}")
    tracking = report["tracking"]
    onsets = tracking["onset_s"]
    lines += [
        "",
        f"Tracking over {tracking['window_s']:.2f} s ({tracking['samples']} samples at 100 Hz, "
        f"t = 0 at the command in each back-end's clock; onset sim "
        f"{_figure(onsets.get('sim'), '.3f')} s, hw {_figure(onsets.get('hw'), '.3f')} s)",
        f"  {'joint':<15}{'max|sim-hw|':>12}{'rms':>9}{'at s':>7}"
        f"{'sim max err':>13}{'hw max err':>12}{'sim rms':>9}{'hw rms':>9}"
        f"{'sim final':>11}{'hw final':>10}",
    ]
    for name, f in tracking["joints"].items():
        lines.append(
            f"  {name:<15}{f['max_diff']:>12.4f}{f['rms_diff']:>9.4f}{f['at_s']:>7.2f}"
            f"{f['sim_max_err']:>13.4f}{f['hw_max_err']:>12.4f}{f['sim_rms_err']:>9.4f}"
            f"{f['hw_rms_err']:>9.4f}{f['sim_final_err']:>11.4f}{f['hw_final_err']:>10.4f}"
        )
    bounds = report["bounds"]
    lines += [
        f"  (rad; gripper in opening 0..1; bounds: arm {bounds['arm_rad']:g} rad, gripper "
        f"{bounds['gripper_opening']:g}; errors against the command, linearly interpolated)",
        "",
        f"Verdict: {report['verdict']}",
    ]
    lines += [f"  - {reason}" for reason in report["reasons"]]
    return "\n".join(lines)


def plot(sim: Recording, hw: Recording, path: Path) -> bool:
    """Save the two trajectories and the command per joint as a PNG; False without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    from lang2policy.bench.parity_analysis import commanded

    end = min(sim.relative()[-1], hw.relative()[-1])
    grid = np.arange(min(sim.relative()[0], hw.relative()[0]), end, 0.01)
    a, b = resample(sim, grid), resample(hw, grid)
    command = commanded(sim.command_times, sim.command_positions, np.clip(grid, 0, None))
    figure, axes = plt.subplots(len(sim.names), 1, figsize=(9, 2.2 * len(sim.names)), sharex=True)
    for j, (axis, name) in enumerate(zip(axes, sim.names, strict=True)):
        axis.plot(grid, command[:, j], "k:", label="command (sim rest pose)")
        axis.plot(grid, a[:, j], label="sim")
        axis.plot(grid, b[:, j], "--", label="hw")
        axis.set_ylabel(name)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("s since the command")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return True


# --------------------------------------------------------------------------- the command
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lang2policy bench parity",
        description="One scripted trajectory on the sim node and on the SO-101 driver + "
        "emulator: topics, types, rates, joint names and the joint trajectories compared.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    parser.add_argument(
        "--bound", type=float, default=DEFAULT_ARM_BOUND, help="max |sim - hw| per arm joint (rad)"
    )
    parser.add_argument(
        "--gripper-bound",
        type=float,
        default=DEFAULT_GRIPPER_BOUND,
        help="max |sim - hw| of the gripper (normalised opening)",
    )
    parser.add_argument(
        "--duration-scale",
        type=float,
        default=1.0,
        help="scale the scenario's phases (rest 1 s, move 4 s, hold 1.5 s, after 1 s); "
        ">= 0.5 keeps the joints under the 1.5 rad/s speed limit",
    )
    parser.add_argument(
        "--seed",
        type=cli_types.seed,
        default=0,
        help=f"scene seed of both back-ends (0 to {cli_types.MAX_SEED})",
    )
    parser.add_argument(
        "--domain",
        type=int,
        help="ROS_DOMAIN_ID of the sim run (the hw run uses the next one); default from the pid",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=120.0, help="s to wait for a back-end"
    )
    parser.add_argument("--out", type=Path, help="save a PNG plot of the trajectories here")
    return parser


def run(args: argparse.Namespace) -> tuple[dict, dict, dict]:
    """Record both back-ends; (report, sim result, hw result)."""
    timings = Timings(startup=args.startup_timeout).scaled(args.duration_scale)
    base = args.domain if args.domain is not None else 1 + (os.getpid() % 100) * 2
    results = {}
    for offset, backend in enumerate(("sim", "hw")):
        results[backend] = record(backend, base + offset, args.seed, timings)
        _status(f"{backend}: done, {len(results[backend]['recording'].stamps)} joint states")
    report = build_report(results["sim"], results["hw"], args.bound, args.gripper_bound)
    return report, results["sim"], results["hw"]


def main(argv: list[str] | None = None) -> int:
    """``lang2policy bench parity [flags]``: 0 PASS, 1 FAIL, 2 setup error, 130 Ctrl-C."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.duration_scale <= 0:
        print("lang2policy bench parity: --duration-scale must be > 0", file=sys.stderr)
        return 2
    try:
        report, sim, hw = run(args)
    except SetupError as exc:
        print(f"lang2policy bench parity: setup error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the nodes were stopped on the way out
        print("lang2policy bench parity: interrupted", file=sys.stderr)
        return 130
    if args.out is not None:
        if plot(sim["recording"], hw["recording"], args.out):
            _status(f"plot saved to {args.out}")
            report["plot"] = str(args.out)
        else:
            _status("matplotlib is not installed: no plot")
    print(json.dumps(report, indent=2) if args.json else format_text(report))
    return 0 if report["verdict"] == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
