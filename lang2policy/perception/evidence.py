"""How much of a candidate object one image really shows: the evidence behind naming it.

A shape fitted to a blob's visible edge can explain a sliver as well as a whole object, so the
fit alone cannot tell "a bowl the arm hides" from "something else at the arm's edge". The
share of the fitted silhouette that the robot leaves in view can: under a small share the view
is ambiguous and the object is "not seen" rather than named. In the bench's `mild` renders a
white cup at the arm's edge, fitted as a grey bowl, was 9 % visible, where the real objects
found that way were at least 20 % visible (``DetectorSettings.min_visible``: 15 %). An object
already tracked is kept by the tracker while the arm hides it, so this holds back new names
only.

Tried and left: the share of a block's silhouette that blobs of other colours cover. It caught
the piece of a yellow bowl's rim read as a block (half orange: the bowl's floor), but a block
in a bowl seen by the oblique front camera shows 27 % of the bowl's colour, and dropping a
block that sits in a bowl is the failure the tracker exists to prevent.
"""

from __future__ import annotations

import cv2
import numpy as np


def visible_share(silhouette: np.ndarray, hidden: np.ndarray | None) -> float:
    """The share of the convex ``silhouette`` (M, 2 pixels) that neither ``hidden`` (H, W
    bool: the robot's pixels) nor the image border cuts off; 0 when the silhouette misses the
    image. 1 without a mask (nothing known to hide anything: the detector's other rules drop
    what the border cuts)."""
    if hidden is None:
        return 1.0
    inside = np.zeros(hidden.shape, dtype=np.uint8)
    cv2.fillPoly(inside, [np.round(silhouette).astype(np.int32)], 1)
    total = _polygon_area(silhouette)
    if total <= 0:
        return 0.0
    return float(np.count_nonzero(inside.astype(bool) & ~hidden)) / total


def _polygon_area(polygon: np.ndarray) -> float:
    return abs(float(cv2.contourArea(polygon.astype(np.float32))))
