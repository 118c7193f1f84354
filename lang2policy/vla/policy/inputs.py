"""Checks on what a caller hands the runtime VLA policy, with messages that say what would be
valid: a wrong image would otherwise turn into a confident but meaningless joint target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lang2policy.errors import Lang2PolicyError


def check_images(images: Mapping[str, np.ndarray], cameras: Sequence[str], size: int) -> np.ndarray:
    """The camera images stacked in the model's camera order: uint8 ``[cameras, H, W, 3]``."""
    if not isinstance(images, Mapping):
        raise Lang2PolicyError(
            f"images must be a dict camera -> image, got {type(images).__name__}"
        )
    missing = [c for c in cameras if c not in images]
    extra = sorted(set(images) - set(cameras))
    if missing or extra:
        raise Lang2PolicyError(
            f"the policy needs exactly the cameras {list(cameras)}: missing {missing}, "
            f"unexpected {extra}"
        )
    stacked = []
    for camera in cameras:
        image = images[camera]
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            kind = getattr(image, "dtype", type(image).__name__)
            raise Lang2PolicyError(f"image {camera!r} must be a uint8 numpy array, got {kind}")
        if image.shape != (size, size, 3):
            raise Lang2PolicyError(
                f"image {camera!r} has shape {image.shape}; the policy takes ({size}, {size}, 3) "
                "RGB (resize before calling)"
            )
        stacked.append(image)
    return np.stack(stacked)


def check_state(state: np.ndarray, dim: int) -> np.ndarray:
    """The state as float32 ``[dim]``: joints in rad and the gripper opening, all finite."""
    array = np.asarray(state)
    if array.dtype.kind not in "fiu":
        raise Lang2PolicyError(f"state must hold real numbers, got dtype {array.dtype}")
    if array.shape != (dim,):
        raise Lang2PolicyError(
            f"state has shape {array.shape}; the policy takes ({dim},): the joints in rad "
            "and the gripper opening 0..1"
        )
    if not np.all(np.isfinite(array)):
        raise Lang2PolicyError(f"state holds NaN or infinite values: {array.tolist()}")
    return array.astype(np.float32)


def check_instruction(instruction: str) -> str:
    """A non-empty instruction string."""
    if not isinstance(instruction, str) or not instruction.strip():
        raise Lang2PolicyError(f"instruction must be a non-empty string, got {instruction!r:.60}")
    return instruction
