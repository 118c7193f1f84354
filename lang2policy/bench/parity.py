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
import os
from pathlib import Path

from lang2policy import cli_types
from lang2policy.bench.parity_analysis import DEFAULT_ARM_BOUND, DEFAULT_GRIPPER_BOUND
from lang2policy.bench.parity_processes import status
from lang2policy.bench.parity_report import build_report, format_text, plot
from lang2policy.bench.parity_scenario import Timings, record
from lang2policy.errors import Lang2PolicyError

__all__ = ["add_arguments", "exit_code", "format_text", "run_args"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "One scripted trajectory on the sim node and on the SO-101 driver + emulator: topics, "
        "types, rates, joint names and the joint trajectories compared."
    )
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
    cli_types.add_seed(parser, "scene seed of both back-ends")
    parser.add_argument(
        "--domain",
        type=int,
        help="ROS_DOMAIN_ID of the sim run (the hw run uses the next one); default from the pid",
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=120.0, help="s to wait for a back-end"
    )
    parser.add_argument("--out", type=Path, help="save a PNG plot of the trajectories here")


def run_args(args: argparse.Namespace) -> dict:
    """Record both back-ends and compare them; ``args.open_probe`` opens the ROS probe (the
    command line passes it: bench/ imports no ROS)."""
    if args.duration_scale <= 0:
        raise Lang2PolicyError("--duration-scale must be > 0")
    timings = Timings(startup=args.startup_timeout).scaled(args.duration_scale)
    base = args.domain if args.domain is not None else 1 + (os.getpid() % 100) * 2
    results = {}
    for offset, backend in enumerate(("sim", "hw")):
        results[backend] = record(backend, base + offset, args.seed, timings, args.open_probe)
        status(f"{backend}: done, {len(results[backend]['recording'].stamps)} joint states")
    sim, hw = results["sim"], results["hw"]
    report = build_report(sim, hw, args.bound, args.gripper_bound)
    if args.out is not None:
        if plot(sim["recording"], hw["recording"], args.out):
            status(f"plot saved to {args.out}")
            report["plot"] = str(args.out)
        else:
            status("matplotlib is not installed: no plot")
    return report


def exit_code(report: dict) -> int:
    """0 parity PASS, 1 FAIL (a setup error is 2, a Ctrl-C 130, from the command line)."""
    return 0 if report["verdict"] == "PASS" else 1
