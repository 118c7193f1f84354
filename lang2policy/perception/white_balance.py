"""White balance against the table: the light's colour taken out of an image before its pixels
are classified.

A lamp's colour temperature scales each channel of every surface alike (a 4000 K bulb leaves
red, takes a fifth of green and a third of blue away against daylight), which moves a grey
block towards brown and a yellow one towards orange, beyond any tolerance that still tells the
palette's colours apart. The table fills most of a workspace camera's view and its colour is
known (the scene's material, or measured by ``lang2policy calibrate colors`` under the user's
light), so the ratio of its colour in this image to that reference is the light's colour, and
dividing every pixel by it restores the colours the palette was made for.

The table's colour in the image is the per-channel median of the pixels the robot does not
cover and that are not in deep shadow: objects cover a few percent of a workspace view, far
from the half a median needs to move. Gains are normalised so that the largest is 1 (the
correction only brightens channels, as a camera's white balance does) and bounded, so that a
view that shows no table cannot turn the image into nonsense.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from lang2policy.errors import ConfigError

MIN_VALUE = 0.15  # darker pixels (deep shadow, black parts) say little about the light
MAX_GAIN_RATIO = 2.5  # the strongest channel correction allowed (a 2700 K bulb needs about 2)
_STRIDE = 3  # every third pixel of every third row: a median as good, ten times faster
_MIN_PIXELS = 100  # fewer usable pixels: no estimate, the image is used as it is


@dataclass(frozen=True)
class WhiteBalance:
    """Corrects images against ``reference``: the table's rgb (0..1) under neutral light."""

    reference: tuple[float, float, float]

    def __post_init__(self) -> None:
        values = np.asarray(self.reference, float)
        if values.shape != (3,) or not np.isfinite(values).all() or (values <= 0.02).any():
            raise ConfigError(
                f"the white balance reference (the table's colour) must be 3 numbers in "
                f"0.02..1, got {self.reference}"
            )

    def gains(self, rgb: np.ndarray, ignore: np.ndarray | None = None) -> np.ndarray:
        """The light's rgb gain in ``rgb`` (H, W, 3 uint8), the largest channel 1; ones when
        too few table pixels are in view."""
        table = table_color(rgb, ignore)
        if table is None:
            return np.ones(3)
        gain = table / np.asarray(self.reference, float)
        gain = gain / gain.max()
        return np.maximum(gain, 1.0 / MAX_GAIN_RATIO)

    def correct(self, rgb: np.ndarray, ignore: np.ndarray | None = None) -> np.ndarray:
        """``rgb`` with the light's colour divided out (uint8, saturating)."""
        gain = self.gains(rgb, ignore)
        if np.allclose(gain, 1.0, atol=1e-3):
            return rgb
        return self.scaled(rgb, 1.0 / gain)

    @staticmethod
    def scaled(rgb: np.ndarray, scale) -> np.ndarray:
        """``rgb`` (uint8) with each channel multiplied by ``scale``'s, saturating."""
        return cv2.transform(np.ascontiguousarray(rgb), np.diag(np.asarray(scale, float)))


def table_color(rgb: np.ndarray, ignore: np.ndarray | None = None) -> np.ndarray | None:
    """The table's rgb (0..1) in ``rgb``: the per-channel median of the pixels not ignored and
    not in deep shadow; None when too few such pixels are in view."""
    pixels = rgb[::_STRIDE, ::_STRIDE].reshape(-1, 3)
    usable = pixels.max(axis=1) >= MIN_VALUE * 255
    if ignore is not None:
        usable &= ~np.asarray(ignore, bool)[::_STRIDE, ::_STRIDE].reshape(-1)
    if np.count_nonzero(usable) < _MIN_PIXELS:
        return None
    return (np.median(pixels[usable], axis=0) + 0.5) / 255.0


def white_balance_for(reference: Sequence[float] | None) -> WhiteBalance | None:
    """A ``WhiteBalance`` against ``reference``, or None when the palette names no table."""
    return None if reference is None else WhiteBalance(tuple(float(v) for v in reference))
