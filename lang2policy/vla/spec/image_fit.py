"""A camera image made the size a model takes, at run time and when a dataset is read.

``fit_image``: a centred square crop (a wider camera loses its sides rather than squashing the
scene), then ``cv2.INTER_AREA``. The VLA node fits each camera image this way, and ``train
vla`` fits a dataset's frames the same way (a LeRobot dataset's 640 x 480 cameras), so a model
sees the same pixels in training and in the graph. The sim node renders 224 px; the local
model was trained on 96 px frames rendered directly (``render_twin``); on the sim's scenes the
two differ by about 1-2 grey levels per pixel.
"""

from __future__ import annotations

import cv2
import numpy as np

METHOD = "centre square crop, then cv2.INTER_AREA"


def fit_image(image: np.ndarray, size: int | None) -> np.ndarray:
    """``image`` (uint8 H x W x 3) cropped to a centred square and resized to ``size``
    (``cv2.INTER_AREA``); unchanged when ``size`` is None or it already fits."""
    height, width = image.shape[:2]
    if size is None or (height == width == size):
        return image
    side = min(height, width)
    top, left = (height - side) // 2, (width - side) // 2
    square = image[top : top + side, left : left + side]
    return cv2.resize(square, (size, size), interpolation=cv2.INTER_AREA)


def describe_fit(height: int, width: int, size: int) -> str:
    """What ``fit_image`` does to ``height x width`` frames, in words a model's config keeps."""
    if height == width == size:
        return f"{width}x{height} as recorded"
    side = min(height, width)
    return f"{width}x{height} -> {METHOD} ({side}x{side}) -> {size}x{size}"
