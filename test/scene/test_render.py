"""Headless rendering (EGL) and MP4 recording."""

import imageio_ffmpeg
import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.scene.render import CameraRenderer, VideoRecorder


def test_every_camera_renders_a_non_blank_image(world):
    renderer = CameraRenderer(world.model, 224, 224)
    for camera in ("front", "top", "wrist"):
        image = renderer.render(world.data, camera)
        assert image.shape == (224, 224, 3) and image.dtype == np.uint8
        assert image.std() > 5, f"{camera} image is flat"
    with pytest.raises(ConfigError, match="the scene has"):
        renderer.render(world.data, "nope")
    renderer.close()


def test_the_top_camera_sees_the_objects(world):
    """Colour of a block shows up in the top view: the scene is framed."""
    world.reset(0, ["red block", "green bowl"])
    renderer = CameraRenderer(world.model, 224, 224)
    image = renderer.render(world.data, "top").astype(int)
    red = (image[..., 0] > 150) & (image[..., 1] < 80) & (image[..., 2] < 80)
    assert red.sum() > 10
    renderer.close()


def test_intrinsics_match_the_image_size(world):
    renderer = CameraRenderer(world.model, 320, 240)
    k = renderer.intrinsics("front")
    assert k[0, 2] == 159.5 and k[1, 2] == 119.5 and k[0, 0] > 0  # pixel centres on integers
    renderer.close()


def test_recording_writes_a_playable_mp4(world, tmp_path):
    renderer = CameraRenderer(world.model, 160, 120)
    recorder = VideoRecorder(renderer, "front", fps=10)
    for _ in range(20):
        world.step(50)  # 0.1 s
        recorder.maybe_capture(world.data)
    path = recorder.save(tmp_path / "clip.mp4")
    frames = imageio_ffmpeg.read_frames(str(path))
    meta = next(frames)
    assert meta["size"] == (160, 120)
    assert sum(1 for _ in frames) == len(recorder.frames) >= 19
    renderer.close()
