"""A real camera (USB/V4L2 through OpenCV) on the same topics as the simulated cameras.

Publishes ``/camera/<name>/image_raw`` (sensor_msgs/Image, rgb8) and
``/camera/<name>/camera_info`` (sensor_msgs/CameraInfo) with frame id
``camera_<name>_optical_frame``, stamped with the node's clock at capture, exactly as the sim
node's cameras do, so the perception node and the VLA take either.

Parameters:

- ``device``: camera index (``0``), a device path (``/dev/video0``) or a file (a video, an image,
  or an image sequence pattern like ``frames/%04d.png``; for tests and replays). ``loop``
  rewinds a file at its end; without it the node stops publishing there (and keeps running).
- ``width``/``height`` (0: the camera's default), ``fourcc`` (e.g. ``MJPG``; "" = default):
  requests to the camera, which may pick its nearest mode; images go out at the size the camera
  delivers. ``rate`` (Hz): images published per second; a live camera is read continuously
  (so no stale frames queue up in its buffer) and frames in between are dropped; a file is
  read at ``rate``.
- ``intrinsics``: a ROS camera calibration YAML (what ``camera_calibration`` writes; format in
  ``lang2policy.perception.intrinsics_file``). When the frames are another size of the same
  aspect ratio the intrinsics are scaled (the sensor mode is resampled); another aspect ratio
  means a cropped sensor mode, where scaling would be wrong: the node ends with an error. Empty:
  a warning, and an undistorted pinhole of horizontal field of view ``fov_deg``.
- ``max_failures``: consecutive failed reads (camera unplugged, USB errors) after which the node
  ends with status 1 and the reason; failures before that are logged, throttled.

Capture runs in a thread of its own (``cv2.VideoCapture.read`` blocks for a frame), which owns
and, at shutdown or end, releases the capture.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import CameraInfo, Image

from lang2policy.errors import Lang2PolicyError
from lang2policy.graph import topics
from lang2policy.perception.camera_pose import resolve_pose_path
from lang2policy.perception.intrinsics_file import (
    CameraCalibration,
    default_calibration,
    load_calibration,
)
from lang2policy.perception.video_source import (
    CameraError,
    FrameSource,
    parse_device,
)
from lang2policy.ros import convert
from lang2policy.ros.entry import entry_point
from lang2policy.ros.params import ReadOnlyParameters


def camera_topics(name: str) -> tuple[str, str]:
    """The image and camera_info topics of camera ``name`` (the sim node's names)."""
    return topics.camera_topics(name)


def camera_info_msg(calibration: CameraCalibration, frame_id: str) -> CameraInfo:
    """CameraInfo with K, distortion (model and coefficients) and P of ``calibration``."""
    intr = calibration.intrinsics
    msg = convert.camera_info(intr.k, intr.width, intr.height, frame_id)
    if intr.distortion:
        msg.distortion_model = calibration.distortion_model or "plumb_bob"
        msg.d = [float(v) for v in intr.distortion]
    msg.p = [float(v) for v in calibration.projection_matrix().ravel()]
    return msg


class CaptureLoop:
    """Reads frames from a source and hands them to ``publish(rgb, capture_time)`` at ``rate``.

    Runs in its own thread until ``stop()``, the end of a file, or ``max_failures`` failed
    reads in a row (then ``error`` says why). Closes the source when it ends.
    """

    def __init__(
        self,
        source: FrameSource,
        rate: float,
        publish: Callable[[np.ndarray], None],
        warn: Callable[[str], None],
        max_failures: int,
    ) -> None:
        self.source, self.period = source, 1.0 / rate
        self._publish, self._warn, self.max_failures = publish, warn, max_failures
        self.error: CameraError | None = None
        self.published = 0
        self.failures = 0  # in a row
        self.total_failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="usb_camera", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        next_due = time.monotonic()
        try:
            while not self._stop.is_set():
                if self.source.device.is_file and self._stop.wait(next_due - time.monotonic()):
                    break
                frame = self.source.read()
                if frame is None:
                    if self.source.ended:
                        self._warn(
                            f"end of '{self.source.device}' after {self.published} images; no "
                            "more images (loop:=true rewinds a file)"
                        )
                        break
                    if not self._failed():
                        break
                    continue
                self.failures = 0
                now = time.monotonic()
                if now + 1e-4 < next_due:  # a live camera delivers faster than rate: drop
                    continue
                next_due = max(next_due + self.period, now - self.period)
                self._publish(frame)
                self.published += 1
        except Exception as exc:  # report any surprise as the node's end, not a silent stop
            self.error = CameraError(f"camera '{self.source.device}' stopped: {exc}")
        finally:
            self.source.close()

    def _failed(self) -> bool:
        """Count a failed read; False when it is one too many (``error`` is set)."""
        self.failures += 1
        self.total_failures += 1
        if self.failures >= self.max_failures:
            self.error = CameraError(
                f"camera '{self.source.device}': {self.failures} reads failed in a row "
                f"(after {self.published} frames); unplugged or in use elsewhere?"
            )
            return False
        self._warn(
            f"camera '{self.source.device}': read failed ({self.failures} in a row, "
            f"{self.total_failures} in all; giving up at {self.max_failures})"
        )
        self._stop.wait(min(self.period, 0.1))
        return True

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)


class UsbCameraNode(ReadOnlyParameters):
    """``lang2policy_usb_camera``: see the module docstring."""

    executable = "usb_camera_node"

    def __init__(self, **kwargs) -> None:
        super().__init__("lang2policy_usb_camera", **kwargs)
        device = parse_device(self._param("device"))
        self.camera_name = self._param("name")
        width = int(self._param("width"))
        height = int(self._param("height"))
        self.rate = self._param("rate")
        intrinsics = self._param("intrinsics")
        self.fov_deg = self._param("fov_deg")
        loop = self._param("loop")
        fourcc = self._param("fourcc")
        failures = self._param("max_failures")
        self.frame_id = self._param("frame_id")
        self.frame_id = self.frame_id or f"camera_{self.camera_name}_optical_frame"
        self._calibration_file = (
            load_calibration(resolve_pose_path(intrinsics)) if intrinsics else None
        )
        self._info: CameraInfo | None = None
        image_topic, info_topic = camera_topics(self.camera_name)
        self._image_pub = self.create_publisher(Image, image_topic, 2)
        self._info_pub = self.create_publisher(CameraInfo, info_topic, 2)
        source = FrameSource(device, width, height, self.rate, fourcc, bool(loop))
        self.capture = CaptureLoop(source, self.rate, self._publish, self._warn, int(failures))
        self._fatal: Lang2PolicyError | None = None
        self._watch = self.create_timer(
            0.1, self._check, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        if not intrinsics:
            self.get_logger().warning(
                f"no intrinsics file: camera_info carries an undistorted pinhole with a "
                f"{self.fov_deg:g} deg field of view, so positions computed from this camera "
                "will be off; calibrate it (ros2 run camera_calibration cameracalibrator) and "
                "set the parameter 'intrinsics' to the YAML it writes"
            )
        self.get_logger().info(
            f"camera '{self.camera_name}' from {device} ({'file' if device.is_file else 'device'})"
            f" at {self.rate:g} Hz on {image_topic}, {info_topic}; frame {self.frame_id}"
        )
        self.capture.start()

    def _lens(self, width: int, height: int) -> CameraCalibration:
        if self._calibration_file is None:
            return default_calibration(width, height, self.fov_deg)
        scaled = self._calibration_file.scaled(width, height)
        if scaled is not self._calibration_file:
            intr = self._calibration_file.intrinsics
            self.get_logger().warning(
                f"frames are {width}x{height}; intrinsics for {intr.width}x{intr.height} "
                "scaled to them (same aspect ratio)"
            )
        return scaled

    def _publish(self, rgb: np.ndarray) -> None:
        """Called by the capture thread with each frame to publish."""
        stamp = self.get_clock().now().nanoseconds * 1e-9
        height, width = rgb.shape[:2]
        if self._info is None or (self._info.width, self._info.height) != (width, height):
            self._info = camera_info_msg(self._lens(width, height), self.frame_id)
            self.get_logger().info(f"camera '{self.camera_name}': {width}x{height} frames")
        self._image_pub.publish(convert.image(rgb, stamp, self.frame_id))
        self._info.header.stamp = convert.time_msg(stamp)
        self._info_pub.publish(self._info)

    def _warn(self, message: str) -> None:
        self.get_logger().warning(message, throttle_duration_sec=2.0)

    def _check(self) -> None:
        """Executor-side watch: end the node (status 1, the reason) when capture failed."""
        error = self.capture.error
        if error is not None and self._fatal is None:
            self._fatal = error
            self.get_logger().error(str(error))
            raise error

    def destroy_node(self) -> None:
        self.capture.stop()
        super().destroy_node()


main = entry_point(
    UsbCameraNode, "usb_camera_node", "publish camera images until Ctrl-C or an error"
)


if __name__ == "__main__":
    raise SystemExit(main())
