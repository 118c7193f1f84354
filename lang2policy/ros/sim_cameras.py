"""The simulated cameras of the sim node: rendered and published in a thread of their own.

A GL context belongs to the thread that created it, and rendering must not stall the control
loop: ``SimCameras`` takes the latest copy of the simulation state, renders the cameras someone
listens to, and publishes image and camera_info; when rendering falls behind, frames are
dropped. Under a realism profile each frame gets the sensor's exposure, blur and noise, and
camera_info carries the calibrated intrinsics (the model's field of view is off by the drawn
error, as a real camera is off its calibration).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from sensor_msgs.msg import CameraInfo, Image

from lang2policy.errors import ConfigError
from lang2policy.graph import topics
from lang2policy.realism.image_effects import apply_image_effects
from lang2policy.ros import convert
from lang2policy.scene.render import CameraRenderer


def camera_topics(name: str) -> tuple[str, str]:
    return topics.camera_topics(name)


class SimCameras:
    """Renders and publishes camera frames in one thread, which owns the GL context."""

    def __init__(self, node, cameras: list[str], width: int, height: int) -> None:
        self._node, self._cameras, self._size = node, cameras, (width, height)
        self._pubs = {}
        for camera in cameras:
            image_topic, info_topic = camera_topics(camera)
            self._pubs[camera] = (
                node.create_publisher(Image, image_topic, 2),
                node.create_publisher(CameraInfo, info_topic, 2),
            )
        self._pending = None  # the latest (MjData copy or None, stamp, wanted) not yet rendered
        self._closed = False
        self._wake = threading.Condition()
        self.dropped = 0
        self.rendered = dict.fromkeys(cameras, 0)
        self._ready = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="sim_cameras", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise ConfigError(f"cannot render cameras {cameras}: {self._error}") from self._error

    def wanted(self) -> dict[str, tuple[bool, bool]]:
        """The cameras someone listens to: name -> (image wanted, camera_info wanted)."""
        found = {}
        for camera, (image_pub, info_pub) in self._pubs.items():
            image = image_pub.get_subscription_count() > 0
            info = info_pub.get_subscription_count() > 0
            if image or info:
                found[camera] = (image, info)
        return found

    def offer(self, snapshot: Callable[[], object], stamp: float) -> None:
        """A frame for the cameras someone listens to; ``snapshot()`` (a copy of MjData) is
        taken only when an image is wanted (nothing at all when nobody listens)."""
        wanted = self.wanted()
        if not wanted:
            return
        images = any(image for image, _info in wanted.values())
        self.submit(snapshot() if images else None, stamp, wanted)

    def submit(self, data, stamp: float, wanted: dict[str, tuple[bool, bool]]) -> None:
        """Hand over a frame (a copy of MjData, None when only camera_info is wanted) for the
        cameras of ``wanted``; replaces a frame not rendered yet."""
        with self._wake:
            self.dropped += self._pending is not None
            self._pending = (data, stamp, wanted)
            self._wake.notify()

    def _next(self):
        with self._wake:
            self._wake.wait_for(lambda: self._closed or self._pending is not None)
            item, self._pending = self._pending, None
            return None if self._closed else item

    def _run(self) -> None:
        try:
            renderer = CameraRenderer(self._node.world.model, *self._size)
        except Exception as exc:  # no usable GL backend: reported by __init__
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        world = self._node.world  # camera_info: what a calibration knows, not the drawn error
        infos = {c: renderer.intrinsics(c, world.calibrated_fovy(c)) for c in self._cameras}
        try:
            while (item := self._next()) is not None:
                self._publish(renderer, infos, *item)
        except Exception as exc:  # keep the control loop alive; say why the images stopped
            if self._node.context.ok() and not self._closed:  # else: shutting down, no error
                self._node.get_logger().error(f"camera rendering stopped: {exc!r}")
        finally:
            renderer.close()

    def _publish(self, renderer: CameraRenderer, infos: dict, data, stamp: float, wanted) -> None:
        """One frame of the cameras in ``wanted``: the image where it is wanted (rendered),
        the camera_info always (cheap; it goes with every image)."""
        for camera, (image, _info) in wanted.items():
            frame = f"camera_{camera}_optical_frame"
            image_pub, info_pub = self._pubs[camera]
            if image and data is not None:
                pixels = self._sensor(renderer.render(data, camera), camera)
                self.rendered[camera] += 1
                image_pub.publish(convert.image(pixels, stamp, frame))
            info_pub.publish(convert.camera_info(infos[camera], *self._size, frame, stamp))

    def _sensor(self, pixels: np.ndarray, camera: str) -> np.ndarray:
        """The frame as the realism profile's sensor records it (noise seeded per frame)."""
        look = self._node.world.look
        if look is None:
            return pixels
        rng = np.random.default_rng([self._node.seed, self.rendered[camera], len(camera)])
        return apply_image_effects(pixels, look.image, rng)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=10)
