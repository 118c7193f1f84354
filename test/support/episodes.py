"""Dataset episodes built in memory for the dataset writer (dataset and loader-bounds tests)."""

from __future__ import annotations

import numpy as np

from lang2policy.vla.dataset import EpisodeRecord
from lang2policy.vla.spec.schema import CAMERAS


# --------------------------------------------------------------------- bad input
def blank_episode(length=5, **changes) -> EpisodeRecord:
    base = {
        "task": "lift the red block",
        "images": {c: np.zeros((length, 96, 96, 3), np.uint8) for c in CAMERAS},
        "state": np.zeros((length, 6), np.float32),
        "action": np.zeros((length, 6), np.float32),
        "extra": {"success": True},
    }
    return EpisodeRecord(**{**base, **changes})
