"""The USB camera node on a video file: the sim cameras' topics, types and frame conventions.

Real rclpy in a private Context on a domain of its own (ROS_DOMAIN_ID from the pid, loopback
discovery). The "camera" is an MJPG .avi of solid-colour frames written into tmp_path, so
the image content can be checked; the capture loop's failure handling runs on a fake source.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402
from support.ros import ros_env, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.perception.video_source import Device  # noqa: E402
from lang2policy.ros.usb_camera_node import CaptureLoop  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 37) % 200
WIDTH, HEIGHT = 160, 120
COLOURS_RGB = [(220, 30, 30), (30, 200, 40), (40, 50, 210)]  # one per frame, in a loop
LENS = """image_width: 320
image_height: 240
camera_name: front
camera_matrix: {rows: 3, cols: 3, data: [300.0, 0.0, 159.5, 0.0, 300.0, 119.5, 0.0, 0.0, 1.0]}
distortion_model: plumb_bob
distortion_coefficients: {rows: 1, cols: 5, data: [-0.1, 0.01, 0.0, 0.0, 0.0]}
"""


@pytest.fixture()
def video(tmp_path: Path) -> Path:
    path = tmp_path / "colours.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (WIDTH, HEIGHT))
    assert writer.isOpened()
    for rgb in COLOURS_RGB:
        writer.write(np.full((HEIGHT, WIDTH, 3), rgb[::-1], np.uint8))  # the writer takes BGR
    writer.release()
    return path


class Probe:
    """Records the messages on one camera's topics."""

    def __init__(self, context, name: str) -> None:
        self.node = rclpy.create_node("usb_camera_probe", context=context)
        self.lock = threading.Lock()
        self.images: list[Image] = []
        self.infos: list[CameraInfo] = []
        self.node.create_subscription(Image, f"/camera/{name}/image_raw", self._image, 10)
        self.node.create_subscription(CameraInfo, f"/camera/{name}/camera_info", self._info, 10)

    def _image(self, msg: Image) -> None:
        with self.lock:
            self.images.append(msg)

    def _info(self, msg: CameraInfo) -> None:
        with self.lock:
            self.infos.append(msg)


def test_video_file_on_the_camera_topics(video, tmp_path):
    from lang2policy.ros.usb_camera_node import UsbCameraNode

    lens = tmp_path / "lens.yaml"
    lens.write_text(LENS)  # 320x240: scaled to the 160x120 frames (same aspect ratio)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env(DOMAIN_ID).items():
            mp.setenv(key, value)
        context = rclpy.Context()
        rclpy.init(context=context)
        overrides = [
            Parameter("device", value=str(video)),
            Parameter("name", value="wrist2"),
            Parameter("rate", value=20.0),
            Parameter("intrinsics", value=str(lens)),
        ]
        camera = UsbCameraNode(context=context, parameter_overrides=overrides)
        probe = Probe(context, "wrist2")
        with spinning(context, (camera, probe.node)):
            # More images than the file has frames: it loops (default).
            wait_for(lambda: len(probe.images) >= 8 and probe.infos, 15.0, "images and info")
            with probe.lock:
                images, info = list(probe.images), probe.infos[-1]
    image = images[-1]
    assert (image.width, image.height, image.encoding, image.step) == (
        WIDTH,
        HEIGHT,
        "rgb8",
        3 * WIDTH,
    )
    assert image.header.frame_id == info.header.frame_id == "camera_wrist2_optical_frame"
    seen = set()
    for msg in images:
        pixels = np.frombuffer(bytes(msg.data), np.uint8).reshape(HEIGHT, WIDTH, 3)
        mean = pixels.reshape(-1, 3).mean(axis=0)
        nearest = min(range(3), key=lambda i: np.abs(mean - COLOURS_RGB[i]).sum())
        assert np.abs(mean - COLOURS_RGB[nearest]).max() < 20, mean  # RGB, not BGR
        seen.add(nearest)
    assert seen == {0, 1, 2}
    assert (info.width, info.height, info.distortion_model) == (WIDTH, HEIGHT, "plumb_bob")
    assert np.allclose(np.reshape(info.k, (3, 3)), [[150, 0, 79.75], [0, 150, 59.75], [0, 0, 1]])
    assert list(info.d) == pytest.approx([-0.1, 0.01, 0.0, 0.0, 0.0])
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in images]
    assert stamps == sorted(stamps) and stamps[0] > 1e9  # the node's (wall) clock


def run_entry(*ros_args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **ros_env(1 + (DOMAIN_ID + 1) % 200))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "lang2policy.ros.usb_camera_node", "--ros-args", *ros_args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_device_exits_with_the_reason():
    result = run_entry("-p", "device:=/dev/video97")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "cannot open camera '/dev/video97'; video devices present:" in output, output
    assert "Traceback" not in output, output


def test_other_aspect_ratio_than_the_intrinsics_ends_the_node(video, tmp_path):
    lens = tmp_path / "lens.yaml"
    lens.write_text(LENS.replace("image_height: 240", "image_height: 180").replace("119.5", "89.5"))
    result = run_entry("-p", f"device:={video}", "-p", f"intrinsics:={lens}")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "another aspect ratio" in output and "Traceback" not in output, output


class FlakySource:
    """A live camera that delivers ``good`` frames, then fails every read."""

    def __init__(self, good: int) -> None:
        self.device, self.ended, self.good, self.closed = Device(index=7), False, good, False

    def read(self):
        if self.good <= 0:
            return None
        self.good -= 1
        return np.zeros((4, 4, 3), np.uint8)

    def close(self) -> None:
        self.closed = True


def test_capture_loop_gives_up_after_consecutive_failures():
    warnings: list[str] = []
    source = FlakySource(good=3)
    loop = CaptureLoop(source, 1000.0, lambda rgb: None, warnings.append, max_failures=5)
    loop.start()
    wait_for(lambda: not loop.running, 10.0, "the capture loop to give up")
    # A live camera faster than ``rate`` has frames dropped; at least the first goes out.
    assert 1 <= loop.published <= 3 and source.closed
    expected = f"camera '7': 5 reads failed in a row (after {loop.published} frames)"
    assert expected in str(loop.error)
    assert len(warnings) == 4 and "giving up at 5" in warnings[0]
