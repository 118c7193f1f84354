"""Frames from a real camera or a file, through ``cv2.VideoCapture``, with clear errors.

A *device* is a camera index (``0``, or the string ``"0"``), a V4L2 device path
(``/dev/video0``), or a file: a video (``.avi``, ``.mp4`` ...), a single image, or an image
sequence pattern (``frames/%04d.png``). Files make the camera node and the calibration testable
without a camera; a file can be rewound at its end (``loop``). Frames come out as RGB uint8.

Pure: no ROS import (used by the USB camera node and by ``lang2policy calibrate camera``).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from lang2policy.errors import Lang2PolicyError


class CameraError(Lang2PolicyError):
    """A camera or video file cannot be opened or stopped delivering frames."""


@dataclass(frozen=True)
class Device:
    """A parsed ``device`` value: a camera index, a device path, or a file."""

    index: int | None = None
    path: str = ""

    @property
    def is_file(self) -> bool:
        return self.index is None and not self.path.startswith("/dev/")

    def __str__(self) -> str:
        return str(self.index) if self.index is not None else self.path


def parse_device(value: int | str) -> Device:
    """``0`` / ``"0"`` -> index 0; ``/dev/video0`` -> a device path; else a file path."""
    if isinstance(value, bool):
        raise CameraError(f"device must be a camera index, a /dev/video* path or a file: {value}")
    if isinstance(value, int) or str(value).strip().isdigit():
        index = int(value)
        if index < 0:
            raise CameraError(f"camera index must be >= 0, got {index}")
        return Device(index=index)
    text = str(value).strip()
    if not text:
        raise CameraError("device is empty: give a camera index (0), /dev/videoN or a file")
    return Device(path=os.path.expanduser(text))


def video_devices() -> list[str]:
    """The V4L2 devices present (``/dev/video*``), sorted."""
    return sorted(glob.glob("/dev/video*"), key=lambda p: (len(p), p))


def _open_error(device: Device) -> CameraError:
    if device.is_file:
        if "%" not in device.path and not Path(device.path).exists():
            return CameraError(f"cannot open '{device}': no such file")
        return CameraError(f"cannot open '{device}': OpenCV cannot read it as a video or image")
    found = video_devices()
    present = ", ".join(found) if found else "none (is the camera plugged in? `ls /dev/video*`)"
    hint = (
        "; the device exists: is another program using it, or does your user lack access "
        "(group 'video')?"
        if (device.path and device.path in found)
        or (device.index is not None and f"/dev/video{device.index}" in found)
        else ""
    )
    return CameraError(f"cannot open camera '{device}'; video devices present: {present}{hint}")


def open_capture(
    device: Device, width: int = 0, height: int = 0, fps: float = 0.0, fourcc: str = ""
) -> cv2.VideoCapture:
    """An opened capture; the size, rate and pixel format are requests (0/"" = the default),
    which a camera may round to a mode it has. Raises CameraError saying why it failed."""
    if device.is_file:
        capture = cv2.VideoCapture(device.path)
    else:
        target = device.index if device.index is not None else device.path
        capture = cv2.VideoCapture(target, cv2.CAP_V4L2)
        if not capture.isOpened():
            capture = cv2.VideoCapture(target)
    if not capture.isOpened():
        capture.release()
        raise _open_error(device)
    if not device.is_file:
        if fourcc:
            if len(fourcc) != 4:
                capture.release()
                raise CameraError(f"fourcc must be 4 characters (e.g. MJPG, YUYV), got {fourcc!r}")
            capture.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter_fourcc(*fourcc))
        if width > 0 and height > 0:
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, width)
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
        if fps > 0:
            capture.set(cv2.CAP_PROP_FPS, fps)
    return capture


class FrameSource:
    """Reads RGB frames from a device or file; rewinds a file at its end when ``loop``."""

    def __init__(
        self,
        device: Device,
        width: int = 0,  # 0: the device's own (as are height, fps and fourcc)
        height: int = 0,
        fps: float = 0.0,
        fourcc: str = "",  # e.g. "MJPG": compressed frames, more of them over USB 2
        loop: bool = False,  # a file starts again at its end
    ) -> None:
        self.device, self.loop = device, loop
        self._request = (width, height, fps, fourcc)
        self._capture: cv2.VideoCapture | None = open_capture(device, *self._request)
        self.frames = 0  # frames delivered
        self.ended = False  # a file reached its end (and does not loop)

    def read(self) -> np.ndarray | None:
        """The next frame (H x W x 3 RGB uint8), or None: a failed read, or the end of a file
        (then ``ended`` is set, unless the file loops and is rewound)."""
        if self._capture is None or self.ended:
            return None
        ok, frame = self._capture.read()
        if not ok and self.device.is_file:
            if not self.loop or self.frames == 0:
                self.ended = True
                return None
            self._capture.release()  # reopening rewinds every kind of file, images included
            self._capture = open_capture(self.device)
            ok, frame = self._capture.read()
        if not ok or frame is None:
            return None
        self.frames += 1
        if frame.ndim == 2:
            return cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB)
        return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)

    def close(self) -> None:
        """Release the device (idempotent)."""
        if self._capture is not None:
            self._capture.release()
            self._capture = None
