"""Colour blobs: connected regions of one palette colour, cleaned up by morphology.

Colours of (nearly) one hue, such as orange and brown, are segmented together as one family:
a dim orange pixel with a highlight looks just like a brown one, so single pixels cannot tell
them apart. A blob of such a family takes the member colour whose track (``Palette.track``) its
pixels lie closest to on average: brown pixels all lie on brown's track and only some on
orange's, and an over-exposed orange top face lies on orange's track only. Once the detector
knows what kind of object a blob is, ``Blob.member`` decides again with the looks measured on
that kind only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np

from lang2policy.perception.palette import UNKNOWN, Palette

FAMILY_HUE = 8.0  # degrees: chromatic colours closer in hue than this form one family
SMOOTH_SIGMA = 0.8  # px: the Gaussian of ``find_blobs(smooth=True)``
_SAMPLE = 400  # pixels of a blob compared with the family's tracks


@dataclass(frozen=True)
class Blob:
    """One connected region of a palette colour in an image (pixel coordinates, OpenCV)."""

    color: str
    contour: np.ndarray  # (N, 2) float: the outer boundary
    edge: np.ndarray  # (M, 2) float: the boundary points that are the object's own edge
    points: np.ndarray  # (K, 2) float: every pixel of the region (u, v)
    brightness: np.ndarray  # (K,) float 0..1: HSV value of those pixels
    hole_fraction: float  # share of the area inside the outer boundary that is not the colour
    touches_border: bool
    occluded: bool  # borders on ignored pixels (the robot): parts may be hidden
    family: tuple[int, ...] = ()  # palette indices of the colours it was segmented with
    samples: np.ndarray | None = None  # (<= _SAMPLE, 3) uint8: its pixels the colour is told by

    def member(self, palette: Palette, kind: str) -> str:
        """The family colour these pixels show on an object of ``kind`` (``family_member``);
        its colour as found when no family colour has looks of one kind (the same decision)."""
        colors = [palette.colors[i] for i in self.family]
        if self.samples is None or len(colors) < 2 or not any(c.measured_kinds for c in colors):
            return self.color
        return family_member(palette, list(self.family), self.samples, kind)

    @property
    def area(self) -> int:
        return len(self.points)

    @property
    def filled_area(self) -> float:
        """Pixels inside the outer boundary, holes included."""
        return self.area / max(1.0 - self.hole_fraction, 1e-6)

    @property
    def centroid(self) -> np.ndarray:
        return self.points.mean(axis=0)


def color_families(palette: Palette) -> list[list[int]]:
    """Indices of the named palette colours, grouped into families that share a hue (greys
    apart). Distractors are in none: their pixels split blobs rather than join them."""
    families: list[list[int]] = []
    for index, color in enumerate(palette.colors):
        if not color.name:
            continue
        for family in families:
            first = palette.colors[family[0]]
            same_kind = first.is_grey == color.is_grey
            close = color.is_grey or _hue_gap(first.hsv[0], color.hsv[0]) < FAMILY_HUE
            if same_kind and close:
                family.append(index)
                break
        else:
            families.append([index])
    return families


def _hue_gap(a: float, b: float) -> float:
    d = abs(a - b) % 360.0
    return min(d, 360.0 - d)


def find_blobs(
    rgb: np.ndarray,
    palette: Palette,
    min_area: int = 12,
    kernel: int = 3,
    ignore: np.ndarray | None = None,
    smooth: bool = False,
) -> list[Blob]:
    """Blobs of named palette colours with at least ``min_area`` pixels after an opening with
    a ``kernel``-pixel square (which removes specks and thin bridges between regions); pixels
    where ``ignore`` (H, W bool) is set belong to no blob.

    ``smooth``: a pixel that matches no colour takes the colour of the image smoothed (a 3x3
    Gaussian) there. Sensor noise scatters single pixels out of their colour's tolerance,
    which frays outlines and punches holes; the smoothed image has no such noise, but mixes
    the colours at an edge into a third, so it only fills what the image itself leaves out."""
    labels = palette.classify(rgb)
    if smooth:
        blurred = palette.classify(cv2.GaussianBlur(rgb, (3, 3), SMOOTH_SIGMA))
        labels = np.where(blurred == UNKNOWN, labels, blurred)
    near_ignored = np.zeros(labels.shape, bool)
    if ignore is not None:
        labels = np.where(ignore, UNKNOWN, labels)
        near_ignored = cv2.dilate(ignore.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    families = color_families(palette)
    family_of = np.full(len(palette.colors) + 1, -1, np.int8)  # by label + 1
    for number, family in enumerate(families):
        family_of[np.asarray(family) + 1] = number
    family_image = family_of[labels.astype(np.intp) + 1]
    element = cv2.getStructuringElement(cv2.MORPH_RECT, (kernel, kernel))
    blobs = []
    for number in np.flatnonzero(np.bincount(family_image.ravel() + 1)[1:]):
        box = _bounding_box(family_image == number, margin=kernel)
        mask = (family_image[box] == number).astype(np.uint8)
        if kernel > 1:
            mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, element)
        for region, (x, y) in _regions(mask, min_area):
            x, y = x + box[1].start, y + box[0].start
            window = (slice(y, y + region.shape[0]), slice(x, x + region.shape[1]))
            pixels = rgb[window][region]
            family, samples = families[number], _sampled(pixels)
            name = family_member(palette, family, samples)
            blob = _blob(name, region, (x, y), pixels, near_ignored)
            blobs.append(replace(blob, family=tuple(family), samples=samples))
    return blobs


def _bounding_box(mask: np.ndarray, margin: int) -> tuple[slice, slice]:
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    height, width = mask.shape
    return (
        slice(max(rows[0] - margin, 0), min(rows[-1] + margin + 1, height)),
        slice(max(cols[0] - margin, 0), min(cols[-1] + margin + 1, width)),
    )


def family_member(
    palette: Palette, family: list[int], pixels: np.ndarray, kind: str | None = None
) -> str:
    """The family colour whose track the pixels lie closest to on average (capped per pixel,
    so that a few stray pixels cannot outvote the rest); ``kind``: the object kind the pixels
    are of, whose measured looks alone count (``Palette.track``)."""
    if len(family) == 1:
        return palette.colors[family[0]].name
    pixels = _sampled(pixels)
    costs = [np.minimum(palette.track_distance(pixels, i, kind), 3.0).mean() for i in family]
    return palette.colors[family[int(np.argmin(costs))]].name


def _sampled(pixels: np.ndarray) -> np.ndarray:
    """At most ``_SAMPLE`` of ``pixels``, evenly spread."""
    if len(pixels) <= _SAMPLE:
        return pixels
    return pixels[np.linspace(0, len(pixels) - 1, _SAMPLE).astype(int)]


def _regions(mask: np.ndarray, min_area: int):
    """(boolean region in its bounding box, (x, y) of the box) per connected component."""
    count, components, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    for index in range(1, count):
        if stats[index, cv2.CC_STAT_AREA] >= min_area:
            x, y, w, h = stats[index, :4]
            yield components[y : y + h, x : x + w] == index, (int(x), int(y))


def _blob(name, region: np.ndarray, offset, pixels: np.ndarray, near_ignored) -> Blob:
    contours, _ = cv2.findContours(
        region.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE
    )
    outer = max(contours, key=cv2.contourArea).reshape(-1, 2) + offset
    filled = np.zeros(region.shape, np.uint8)
    cv2.drawContours(filled, [outer - offset], 0, 1, thickness=cv2.FILLED)
    holes = np.count_nonzero(filled.astype(bool) & ~region)
    vs, us = np.nonzero(region)
    height, width = near_ignored.shape
    on_border = (outer[:, 0] <= 0) | (outer[:, 1] <= 0)
    on_border |= (outer[:, 0] >= width - 1) | (outer[:, 1] >= height - 1)
    hidden = near_ignored[outer[:, 1], outer[:, 0]]
    return Blob(
        color=name,
        contour=outer.astype(float),
        edge=outer[~(on_border | hidden)].astype(float),
        points=np.column_stack([us + offset[0], vs + offset[1]]).astype(float),
        brightness=pixels.max(axis=1) / 255.0,  # pixels are in np.nonzero order, as vs, us
        hole_fraction=holes / max(int(filled.sum()), 1),
        touches_border=bool(on_border.any()),
        occluded=bool(hidden.any()),
    )
