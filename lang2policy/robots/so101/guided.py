"""``lang2policy calibrate so101 --port PORT``: the guided calibration of a physical SO-101.

The torque goes off so the arm can be moved by hand. Step 1: the person puts the arm in the
middle pose (the pose the simulation calls 0 rad for every joint: upper arm and forearm
straight up-and-forward as in the MJCF, wrist straight, gripper closed) and confirms; the ticks
read there are each joint's zero. Step 2: the person moves every joint through its whole range
while the ticks are sampled (a live table shows each joint's range growing). The calibration
(``guided_calibration``) is validated and written as YAML (default
``hardware/so101/calibration.yaml`` in the package data, or ``--out``).
"""

from __future__ import annotations

import argparse
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
    ids = [DEFAULT_SERVO_IDS[name] for name in JOINTS]
    with bus:
        bus.check_servos(ids)
        bus.torque(ids, False)
        say(f"[calibrate] servos {ids} answer on {port}; torque is off: move the arm by hand")
        confirm(
            "Put the arm in the middle pose (every joint at 0 rad, gripper closed), then "
            "press Enter"
        )
        zero = dict(zip(JOINTS, (bus.read_positions(ids)[i] for i in ids), strict=True))
        say(f"[calibrate] zero ticks: {zero}")
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


def main(argv: list[str]) -> int:
    """``lang2policy calibrate so101 --port PORT [--out FILE] [--seconds S] [--yes]``."""
    parser = argparse.ArgumentParser(
        prog="lang2policy calibrate so101", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--port", required=True, help="serial port, e.g. /dev/ttyACM0")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="calibration YAML to write (default: the packaged one)",
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="time to move the joints")
    parser.add_argument("--yes", action="store_true", help="do not wait for Enter (scripts)")
    args = parser.parse_args(argv)
    if not args.seconds > 0:
        parser.error("--seconds must be positive")

    def confirm(text: str) -> None:
        if args.yes:
            print(f"[calibrate] {text} (--yes: going on)")
        else:
            input(f"{text} ")

    try:
        calibrate(args.port, args.out or default_calibration_path(), args.seconds, confirm)
    except (Lang2PolicyError, KeyboardInterrupt, EOFError) as exc:
        print(f"lang2policy calibrate: {exc or 'cancelled'}; nothing was written", file=sys.stderr)
        return 1
    return 0
