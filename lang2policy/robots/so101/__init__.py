"""SO-101 hardware backend: servo calibration and a ``Robot`` over the Feetech bus.

The MuJoCo-backed servo plant for the emulator is in ``lang2policy.robots.so101.mujoco_plant``.
"""

from lang2policy.robots.so101.backend import SO101Robot, so101_limits
from lang2policy.robots.so101.calibration import (
    JOINTS,
    Calibration,
    JointCalibration,
    default_calibration_path,
    guided_calibration,
)

__all__ = [
    "JOINTS",
    "Calibration",
    "JointCalibration",
    "SO101Robot",
    "default_calibration_path",
    "guided_calibration",
    "so101_limits",
]
