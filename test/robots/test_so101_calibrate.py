"""The guided SO-101 calibration against the servo emulator: a "person" (a thread) holds the
middle pose, then sweeps every joint through a range; the file written converts those ticks
back to the expected angles, and bad input leaves nothing written."""

from __future__ import annotations

import threading
import time

import pytest

from lang2policy.robots.feetech.bus import FeetechBus
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.servo_plant import KinematicPlant
from lang2policy.robots.so101 import guided
from lang2policy.robots.so101.calibration import JOINTS, Calibration

pytestmark = pytest.mark.timeout(60)

IDS = (1, 2, 3, 4, 5, 6)
ZERO = {1: 2000, 2: 2100, 3: 1990, 4: 2050, 5: 2048, 6: 1900}  # the arm's middle pose
SPAN = {
    1: (1200, 2900),
    2: (1300, 3000),
    3: (1100, 2800),
    4: (1250, 2850),
    5: (100, 4000),
    6: (1850, 2900),
}


def sweep(plant: KinematicPlant, stop: threading.Event) -> None:
    """Move each joint by hand (torque is off) back and forth over its span, from its low end
    and resting a moment at each end (as a hand does), so that the recorder's samples see both
    ends however its sampling and this thread's steps line up on a loaded machine."""
    phase = 0.0
    while not stop.is_set():
        triangle = phase if phase <= 1.0 else 2.0 - phase
        fraction = min(1.0, max(0.0, 1.4 * triangle - 0.2))  # held at 0 and 1 for a while
        for joint, servo in enumerate(IDS):
            low, high = SPAN[servo]
            plant._pos[joint] = low + fraction * (high - low)  # the person's hand
        phase = (phase + 0.05) % 2.0
        time.sleep(0.01)


def test_guided_calibration_records_zero_and_ranges(tmp_path):
    plant = KinematicPlant()
    with ServoBusEmulator(IDS, plant=plant, positions=ZERO) as emulator:
        stop = threading.Event()
        steps = []

        def confirm(text: str) -> None:
            steps.append(text)
            if len(steps) == 2:  # after the zero pose: start moving the joints
                threading.Thread(target=sweep, args=(plant, stop), daemon=True).start()

        out = tmp_path / "calibration.yaml"
        lines = []
        try:
            bus = FeetechBus(emulator.port, timeout=0.1)
            calibration = guided.calibrate(emulator.port, out, 1.5, confirm, lines.append, bus)
            assert calibration.names == JOINTS
        finally:
            stop.set()
        assert not any(emulator.servo(i).torque_on for i in IDS)  # moved by hand
    assert "middle pose" in steps[0] and len(steps) == 2
    saved = Calibration.load(out)
    assert saved.names == JOINTS
    for joint in saved.joints:
        servo = joint.servo_id
        assert joint.zero == ZERO[servo]
        low, high = SPAN[servo]
        assert low <= joint.range_min < low + 200 and high - 200 < joint.range_max <= high
    pan = saved["shoulder_pan"]
    assert pan.ticks_to_rad(ZERO[1]) == 0.0
    assert any("wrote" in line for line in lines)


def test_a_joint_that_was_not_moved_is_refused_and_nothing_is_written(tmp_path, capsys):
    with ServoBusEmulator(IDS, plant=KinematicPlant(), positions=ZERO) as emulator:
        out = tmp_path / "calibration.yaml"
        code = guided.main(
            ["--port", emulator.port, "--out", str(out), "--seconds", "0.3", "--yes"]
        )
    assert code == 1 and not out.exists()
    assert "nothing was written" in capsys.readouterr().err


def test_a_missing_port_is_a_clear_error(tmp_path, capsys):
    code = guided.main(["--port", str(tmp_path / "ttyNONE"), "--seconds", "1", "--yes"])
    assert code == 1
    assert "ttyNONE" in capsys.readouterr().err
