"""Headless camera rendering and MP4 recording.

Rendering on a machine without a GPU uses EGL with Mesa's llvmpipe: ``MUJOCO_GL=egl`` must be
set before mujoco is imported, which importing ``lang2policy`` does when nothing chose a backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lang2policy.errors import ConfigError


class CameraRenderer:
    """Renders named cameras of a model at one resolution; one GL context per instance/thread."""

    def __init__(self, model, width: int = 224, height: int = 224) -> None:
        import mujoco

        self.model = model
        self.width, self.height = width, height
        self.camera_names = [model.camera(i).name for i in range(model.ncam)]
        self._renderer = mujoco.Renderer(model, height=height, width=width)

    def render(self, data, camera: str) -> np.ndarray:
        """An RGB image (height, width, 3) uint8 from ``camera``."""
        if camera not in self.camera_names:
            raise ConfigError(f"unknown camera '{camera}'; the scene has {self.camera_names}")
        self._renderer.update_scene(data, camera=camera)
        return self._renderer.render()

    def intrinsics(self, camera: str, fovy: float | None = None) -> np.ndarray:
        """3x3 pinhole matrix K of ``camera`` at this resolution (square pixels, centred);
        ``fovy`` (degrees) instead of the model's (a calibration's, under a realism look).

        ROS/OpenCV convention: pixel centres sit on whole coordinates, so the image centre is
        ((w - 1) / 2, (h - 1) / 2), not (w / 2, h / 2) (half a pixel, about 1.5 mm on the table
        for the 224-pixel top camera)."""
        fovy = np.deg2rad(self.model.camera(camera).fovy[0] if fovy is None else fovy)
        focal = 0.5 * self.height / np.tan(fovy / 2)
        cx, cy = (self.width - 1) / 2, (self.height - 1) / 2
        return np.array([[focal, 0, cx], [0, focal, cy], [0, 0, 1.0]])

    def close(self) -> None:
        self._renderer.close()


class VideoRecorder:
    """Collects frames from one camera and writes an H.264 MP4 (imageio-ffmpeg's bundled ffmpeg)."""

    def __init__(self, renderer: CameraRenderer, camera: str, fps: int = 30) -> None:
        if camera not in renderer.camera_names:
            raise ConfigError(f"unknown camera '{camera}'; the scene has {renderer.camera_names}")
        self.renderer, self.camera, self.fps = renderer, camera, fps
        self.frames: list[np.ndarray] = []
        self._next_time = 0.0

    def maybe_capture(self, data) -> None:
        """Capture a frame if a frame period has passed in simulated time."""
        if data.time + 1e-9 >= self._next_time:
            self.frames.append(self.renderer.render(data, self.camera))
            self._next_time = data.time + 1.0 / self.fps

    def save(self, path: str | Path) -> Path:
        if not self.frames:
            raise ConfigError("no frames were recorded; nothing to save")
        return write_mp4(self.frames, path, self.fps)


def write_mp4(frames: list[np.ndarray], path: str | Path, fps: int) -> Path:
    """Write RGB frames (all of one size) as an H.264 MP4 (imageio-ffmpeg's bundled ffmpeg)."""
    import imageio_ffmpeg

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames[0].shape[:2]
    writer = imageio_ffmpeg.write_frames(
        str(path),
        (width, height),
        fps=fps,
        codec="libx264",
        pix_fmt_out="yuv420p",
        macro_block_size=1,
        quality=7,
    )
    writer.send(None)
    for frame in frames:
        writer.send(np.ascontiguousarray(frame))
    writer.close()
    return path
