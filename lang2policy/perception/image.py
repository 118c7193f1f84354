"""Raw image buffers (as sensor_msgs/Image carries them) to checked RGB arrays."""

from __future__ import annotations

import numpy as np

from lang2policy.errors import ConfigError

# encoding -> (channels, indices of R, G, B)
_ENCODINGS = {
    "rgb8": (3, (0, 1, 2)),
    "bgr8": (3, (2, 1, 0)),
    "rgba8": (4, (0, 1, 2)),
    "bgra8": (4, (2, 1, 0)),
}
ENCODINGS = tuple(_ENCODINGS)


def decode_image(data: bytes, width: int, height: int, step: int, encoding: str) -> np.ndarray:
    """An (height, width, 3) uint8 RGB array from a raw row-major buffer.

    Raises ConfigError for an unsupported encoding (colour segmentation needs colour: mono and
    Bayer images are refused), an empty image, or a buffer whose size or row step does not match.
    """
    if encoding not in _ENCODINGS:
        raise ConfigError(
            f"unsupported image encoding '{encoding}'; colour segmentation needs one of "
            f"{list(ENCODINGS)}"
        )
    channels, order = _ENCODINGS[encoding]
    if width <= 0 or height <= 0:
        raise ConfigError(f"empty image: {width}x{height}")
    if step < width * channels:
        raise ConfigError(
            f"image step {step} is shorter than a row of {width} {encoding} pixels "
            f"({width * channels} bytes)"
        )
    if len(data) != step * height:
        raise ConfigError(
            f"image buffer has {len(data)} bytes; {height} rows of step {step} need {step * height}"
        )
    rows = np.frombuffer(bytes(data), np.uint8).reshape(height, step)
    pixels = rows[:, : width * channels].reshape(height, width, channels)
    return np.ascontiguousarray(pixels[:, :, list(order)])


def check_rgb(image: np.ndarray) -> np.ndarray:
    """``image`` if it is an (H, W, 3) uint8 array with H, W > 0, else a ConfigError."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or 0 in image.shape:
        raise ConfigError(
            f"expected an (H, W, 3) uint8 RGB image, got {image.dtype} array of shape {image.shape}"
        )
    return image
