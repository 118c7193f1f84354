"""What a real sensor adds to a rendered frame: exposure gain, blur and pixel noise.

``apply_image_effects(rgb, effects, rng)`` returns a new uint8 image (the input is untouched);
with ``ImageEffects()`` (realism off) it returns the input itself, unchanged. The noise is drawn
from ``rng``: the caller seeds it per frame (episode seed and frame number), so a replay sees
the same frames.
"""

from __future__ import annotations

import cv2
import numpy as np

from lang2policy.realism.scene_look import ImageEffects


def apply_image_effects(
    rgb: np.ndarray, effects: ImageEffects, rng: np.random.Generator
) -> np.ndarray:
    """``rgb`` (H, W, 3 uint8) as the sensor of ``effects`` records it."""
    if effects.is_off:
        return rgb
    image = rgb.astype(np.float32) * effects.exposure
    if effects.blur_px > 0:
        image = cv2.GaussianBlur(image, (0, 0), effects.blur_px)
    if effects.noise > 0:
        image += rng.normal(0.0, effects.noise, size=image.shape).astype(np.float32)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)
