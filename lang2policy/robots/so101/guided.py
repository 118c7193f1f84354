"""``lang2policy calibrate so101 --port PORT``: the guided calibration of a physical SO-101.

The torque goes off so the arm can be moved by hand. Step 1: the person puts the arm in the
middle pose (the pose the simulation calls 0 rad for every joint: upper arm and forearm
straight up-and-forward as in the MJCF, wrist straight, gripper closed) and confirms; the ticks
read there are each joint's zero. Step 2: the person moves every joint through its whole range
while the ticks are sampled (a live table shows each joint's range growing). The calibration
(``guided_calibration``) is validated and written as YAML (default
``hardware/so101/calibration.yaml`` in the package data, or ``--out``).

An arm LeRobot calibrated keeps its calibration: ``--from-lerobot FILE.json --port PORT`` reads
its ids, directions and ranges from LeRobot's file and only step 1 from the arm (the file cannot
say which ticks the model's zero pose reads; ``lerobot_calibration``). ``--to-lerobot FILE.json``
writes ours in LeRobot's format.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lang2policy.errors import Lang2PolicyError
from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.so101.calibration import (
    DEFAULT_SERVO_IDS,
    JOINTS,
    Calibration,
    default_calibration_path,
    guided_calibration,
)
from lang2policy.robots.so101.lerobot_calibration import (
    from_lerobot,
    read_lerobot_calibration,
    to_lerobot,
)

ZERO_POSE_PROMPT = (
    "Put the arm in the middle pose (every joint at 0 rad, gripper closed), then press Enter"
)
SAMPLE_PERIOD = 0.05  # s between position reads while the joints are moved


def record_ranges(
    bus: FeetechBus,
    seconds: float,
    say: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, list[int]]:
    """Sample every joint's ticks for ``seconds``; returns the samples per joint."""
    ids = {name: DEFAULT_SERVO_IDS[name] for name in JOINTS}
    samples: dict[str, list[int]] = {name: [] for name in JOINTS}
    deadline = time.monotonic() + seconds
    next_report = 0.0
    while time.monotonic() < deadline:
        ticks = bus.read_positions(list(ids.values()))
        for name, servo in ids.items():
            samples[name].append(ticks[servo])
        if time.monotonic() >= next_report:
            next_report = time.monotonic() + 1.0
            left = max(0.0, deadline - time.monotonic())
            spans = ", ".join(f"{n} {min(s)}..{max(s)}" for n, s in samples.items())
            say(f"[calibrate] {left:4.1f} s left: {spans}")
        sleep(SAMPLE_PERIOD)
    return samples


def calibrate(
    port: str,
    out: Path,
    seconds: float,
    confirm: Callable[[str], None],
    say: Callable[[str], None] = print,
    bus: FeetechBus | None = None,
) -> Calibration:
    """Run the guided calibration on ``port`` and save it to ``out``; returns it."""
    bus = bus if bus is not None else FeetechBus(port)
    with bus:
        zero = _zero_pose_on(bus, port, confirm, say)
        confirm(f"Press Enter, then move every joint through its whole range for {seconds:g} s")
        samples = record_ranges(bus, seconds, say)
    calibration = guided_calibration(samples, zero)
    calibration.save(out)
    say(f"[calibrate] wrote {out}")
    for joint in calibration.joints:
        say(
            f"  {joint.name:>13}: id {joint.servo_id}, zero {joint.zero}, range "
            f"{joint.range_min}..{joint.range_max} ({joint.lower_rad:+.2f}..{joint.upper_rad:+.2f} "
            "rad)"
        )
    return calibration


def read_zero_pose(
    port: str, confirm: Callable[[str], None], say: Callable[[str], None] = print,
    bus: FeetechBus | None = None,
) -> dict[str, int]:
    """Each joint's tick with the arm held, torque off, in the model's zero pose."""
    bus = bus if bus is not None else FeetechBus(port)
    with bus:
        return _zero_pose_on(bus, port, confirm, say)


def _zero_pose_on(
    bus: FeetechBus, port: str, confirm: Callable[[str], None], say: Callable[[str], None]
) -> dict[str, int]:
    """On an open bus: the torque off, the person holds the zero pose, its ticks by joint."""
    ids = [DEFAULT_SERVO_IDS[name] for name in JOINTS]
    bus.check_servos(ids)
    bus.torque(ids, False)
    say(f"[calibrate] servos {ids} answer on {port}; torque is off: move the arm by hand")
    confirm(ZERO_POSE_PROMPT)
    ticks = bus.read_positions(ids)
    zero = {name: ticks[servo] for name, servo in zip(JOINTS, ids, strict=True)}
    say(f"[calibrate] zero ticks: {zero}")
    return zero


def import_lerobot(
    source: Path, out: Path, zero_ticks: dict[str, int] | None, accept_pose: bool,
    say: Callable[[str], None] = print,
) -> Calibration:
    """``--from-lerobot``: LeRobot's file as our calibration, saved to ``out``."""
    motors = read_lerobot_calibration(source)
    calibration = from_lerobot(motors, zero_ticks, accept_calibration_pose=accept_pose)
    calibration.save(out)
    where = "read from the arm" if zero_ticks else "LeRobot's calibration pose (tick 2047)"
    say(f"[calibrate] wrote {out} from {source}; zero pose: {where}")
    for joint in calibration.joints:
        say(f"  {joint.name:>13}: id {joint.servo_id}, sign {joint.sign:+d}, zero {joint.zero}, "
            f"range {joint.range_min}..{joint.range_max}")  # fmt: skip
    return calibration


def export_lerobot(source: Path | None, out: Path, say: Callable[[str], None] = print) -> None:
    """``--to-lerobot``: our calibration in LeRobot's format (homing offsets 0: see
    ``lerobot_calibration.to_lerobot``)."""
    calibration = Calibration.load(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(to_lerobot(calibration), indent=4) + "\n")
    say(f"[calibrate] wrote {out} (LeRobot's format; homing offsets 0, as this project leaves "
        "the servos)")  # fmt: skip


def main(argv: list[str]) -> int:
    """``lang2policy calibrate so101 --port PORT [--out FILE] [--seconds S] [--yes]``, or
    ``--from-lerobot FILE.json (--port PORT | --assume-calibration-pose)``, or
    ``--to-lerobot FILE.json [--calibration FILE]``."""
    parser = _parser()
    args = parser.parse_args(argv)
    _check_arguments(parser, args)

    def confirm(text: str) -> None:
        if args.yes:
            print(f"[calibrate] {text} (--yes: going on)")
        else:
            input(f"{text} ")

    out = args.out or default_calibration_path()
    try:
        if args.to_lerobot:
            export_lerobot(args.calibration, args.to_lerobot)
        elif args.from_lerobot:
            zero = read_zero_pose(args.port, confirm) if args.port else None
            import_lerobot(args.from_lerobot, out, zero, args.assume_calibration_pose)
        else:
            calibrate(args.port, out, args.seconds, confirm)
    except (Lang2PolicyError, KeyboardInterrupt, EOFError) as exc:
        print(f"lang2policy calibrate: {exc or 'cancelled'}; nothing was written", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lang2policy calibrate so101", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--port", help="serial port, e.g. /dev/ttyACM0")
    parser.add_argument("--out", type=Path, default=None,
                        help="calibration YAML to write (default: the packaged one)")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=20.0, help="time to move the joints")
    parser.add_argument("--yes", action="store_true", help="do not wait for Enter (scripts)")
    parser.add_argument("--from-lerobot", type=Path, metavar="FILE.json",
                        help="import a lerobot-calibrate file (with --port: read the zero pose "
                        "from the arm)")  # fmt: skip
    parser.add_argument("--assume-calibration-pose", action="store_true",
                        help="--from-lerobot without an arm: take LeRobot's calibration pose as "
                        "the model's zero pose")  # fmt: skip
    parser.add_argument("--to-lerobot", type=Path, metavar="FILE.json",
                        help="write our calibration (--calibration, default the packaged one) "
                        "in LeRobot's format")  # fmt: skip
    parser.add_argument("--calibration", type=Path, default=None,
                        help="--to-lerobot: the calibration YAML to export")  # fmt: skip
    return parser


def _check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.from_lerobot and args.to_lerobot:
        parser.error("--from-lerobot and --to-lerobot go one way each: choose one")
    if not (args.port or args.to_lerobot or (args.from_lerobot and args.assume_calibration_pose)):
        parser.error("--port is needed (or --from-lerobot FILE --assume-calibration-pose, or "
                     "--to-lerobot FILE)")  # fmt: skip
    if not args.seconds > 0:
        parser.error("--seconds must be positive")
