"""The physical path's flags, shared by the benchmarks that take them.

``--perception camera`` runs a benchmark's episodes from camera perception only, of a world
under ``--realism``; ``--robot so101-hw --emulate`` puts the real SO-101 driver on an emulated
servo bus in the decision path too (``session.bus_camera``). Success is always judged from the
simulated table, and the ground-truth run of the same episodes is reported beside.
"""

from __future__ import annotations

import argparse

from lang2policy.errors import Lang2PolicyError
from lang2policy.graph.launcher import HARDWARE_SO101

PERCEPTION = ("ground_truth", "camera")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--perception``, ``--realism`` and ``--emulate`` (``--robot`` is the command's)."""
    parser.add_argument(
        "--perception",
        choices=PERCEPTION,
        default="ground_truth",
        help="where object poses come from (camera: beside ground truth)",
    )
    parser.add_argument(
        "--realism", default="off", help="off | mild | hard | FILE: the world a camera sees"
    )
    parser.add_argument(
        "--emulate",
        action="store_true",
        help=f"with --robot {HARDWARE_SO101} --perception camera: the SO-101 driver on an "
        "emulated servo bus (the profile's servo imperfections), in wall time",
    )


def emulated_bus(args: argparse.Namespace) -> bool:
    """Whether the episodes run on the SO-101 driver over the emulated bus; refuses flags
    that do not go together, saying what does."""
    hardware = args.robot == HARDWARE_SO101
    if hardware != args.emulate:
        raise Lang2PolicyError(
            f"--robot {HARDWARE_SO101} and --emulate go together: a benchmark judges success "
            "from the simulated table, so the arm it drives is the emulated one"
        )
    if hardware and args.perception != "camera":
        raise Lang2PolicyError(
            f"--robot {HARDWARE_SO101} --emulate needs --perception camera: a physical arm has "
            "no ground truth to read objects from"
        )
    if args.perception != "camera" and args.realism != "off":
        raise Lang2PolicyError("--realism changes what a camera sees: use --perception camera")
    return hardware


def description(args: argparse.Namespace) -> str:
    """The robot description the episodes use (``so101-hw`` drives an SO-101)."""
    return "so101" if args.robot == HARDWARE_SO101 else args.robot


def camera_session(robot: str, profile, bus: bool):
    """The camera session of the physical path under the realism ``profile``: the simulated
    arm, or the SO-101 driver on the emulated bus (``bus``)."""
    from lang2policy.session.bus_camera import BusCameraSession
    from lang2policy.session.camera import CameraSession

    return (BusCameraSession if bus else CameraSession)(robot, realism=profile)


def route_fields(profile, bus: bool) -> dict:
    """What a report records about the route: perception, the realism profile, the arm."""
    return {
        "perception": "camera",
        "realism": profile.to_dict(),
        "arm": "the SO-101 driver on an emulated servo bus" if bus else "the simulated arm",
    }


def route_text(report: dict) -> str:
    """``camera perception at realism mild, the simulated arm`` for a report's first line."""
    level = report["realism"].get("name", "?")
    return f"camera perception at realism {level}, {report.get('arm', 'the simulated arm')}"
