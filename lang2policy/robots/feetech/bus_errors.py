"""The errors of the Feetech bus: a port that cannot be opened, servos that do not answer, and
servos that refuse a command; each names the servos and says what to check."""

from __future__ import annotations

from lang2policy.errors import Lang2PolicyError


class FeetechError(Lang2PolicyError):
    """Root of the Feetech bus errors."""


class PortError(FeetechError):
    """The serial port cannot be opened or was lost; the message says what to check."""


class ServoTimeout(FeetechError):
    """Servos did not answer (or only with corrupt packets) after every retry."""

    def __init__(self, message: str, servo_ids: tuple[int, ...]) -> None:
        super().__init__(message)
        self.servo_ids = servo_ids


class ServoError(FeetechError):
    """A servo answered but refused a command (e.g. torque while overheated)."""

    def __init__(self, message: str, servo_ids: tuple[int, ...]) -> None:
        super().__init__(message)
        self.servo_ids = servo_ids
