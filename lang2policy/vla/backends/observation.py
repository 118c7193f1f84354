"""Checks on the observation handed to a backend, and the resize a remote model expects.

The checks run before anything is sent, so a wrong image or a NaN in the state is reported
here as a ``PolicyBackendError`` with what would be valid, not as a confusing server error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from lang2policy.errors import Lang2PolicyError, PolicyBackendError
from lang2policy.vla.policy.inputs import check_instruction, check_state
from lang2policy.vla.spec.schema import STATE_DIM


def check_observation(
    images: Mapping[str, np.ndarray],
    state: np.ndarray,
    instruction: str,
    cameras: Sequence[str],
    source: str,
) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    """The images of ``cameras`` (uint8 ``H x W x 3``, any size), the state as float32 [6]
    and the instruction; ``PolicyBackendError`` naming ``source`` for anything else."""
    if not isinstance(images, Mapping):
        raise PolicyBackendError(
            f"{source}: images must be a dict camera -> image, got {type(images).__name__}"
        )
    missing = [camera for camera in cameras if camera not in images]
    if missing:
        raise PolicyBackendError(
            f"{source}: missing camera images {missing}; this backend needs {list(cameras)}"
        )
    selected = {}
    for camera in cameras:
        image = images[camera]
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            kind = getattr(image, "dtype", type(image).__name__)
            raise PolicyBackendError(
                f"{source}: image {camera!r} must be a uint8 numpy array, got {kind}"
            )
        if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
            raise PolicyBackendError(
                f"{source}: image {camera!r} has shape {image.shape}; expected (H, W, 3) RGB"
            )
        selected[camera] = image
    try:
        return selected, check_state(state, STATE_DIM), check_instruction(instruction)
    except Lang2PolicyError as exc:
        raise PolicyBackendError(f"{source}: {exc}") from exc


def resize_with_pad(image: np.ndarray, size: int) -> np.ndarray:
    """``image`` scaled to fit a ``size`` x ``size`` square without distortion, centred on
    black: what openpi's clients send (``resize_with_pad``, after ``tf.image``'s rule: scale
    by the larger ratio, truncate the new sides, pad half the rest on each side)."""
    height, width = image.shape[:2]
    if (height, width) == (size, size):
        return image
    ratio = max(width / size, height / size)
    new_height, new_width = max(1, int(height / ratio)), max(1, int(width / ratio))
    # INTER_AREA averages when shrinking (no aliasing); bilinear when enlarging.
    method = cv2.INTER_AREA if ratio > 1 else cv2.INTER_LINEAR
    resized = cv2.resize(np.ascontiguousarray(image), (new_width, new_height), interpolation=method)
    padded = np.zeros((size, size, 3), np.uint8)
    top, left = (size - new_height) // 2, (size - new_width) // 2
    padded[top : top + new_height, left : left + new_width] = resized
    return padded
