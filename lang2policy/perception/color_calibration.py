"""A palette fitted to the user's own camera, table and objects (``lang2policy calibrate
colors``).

The scene's palette holds material colours: a real red block is not that red, a real table is
not that brown, and a real camera adds its own cast. A few frames of the user's objects on the
user's table, each frame with the names of the objects on it, fix that:

1. The table's colour in the first frame becomes the palette's ``table`` (the reference of the
   detector's white balance). Every frame is corrected to the first frame's light by the ratio
   of its table colour to the first's, so frames taken as the light changed agree.
2. In each frame the regions that stand out from the table are found, and each listed colour
   takes the region nearest its default colour (moved into this light, and as bright as the
   table's brightness says it should be: a black cup is no grey block), nearest pairs first:
   with only the listed colours to choose from, a shade far from its material colour still
   goes to the right name. How a colour looked (the median of the brighter half of its
   largest blob's inner pixels, and of those not clipped) is added to the colour as
   ``measured``: its shading tracks belong to the colour beside its material's. A frame that
   names its objects with their kind ("brown block") measures the looks of that kind: a
   bowl's shaded inside and a block's top face differ, and the detector judges a blob by
   the looks of its own kind.
3. Every colour's material, and the distractors (the robot's paint), are the defaults moved
   into the first frame's light; the scene's table colour is replaced by the measured one.

The result is in the first frame's light; the detector's white balance takes later frames
there, whatever the light then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import yaml

from lang2policy.errors import ConfigError
from lang2policy.perception.palette import (
    ANY_KIND,
    OBJECT_KINDS,
    ColorClass,
    Palette,
    palette_from_colors,
)
from lang2policy.perception.white_balance import WhiteBalance, table_color

TABLE_CHROMA = 0.03  # chromaticity distance from the table of an object's pixel
BRIGHTER = 1.4  # or brightness above the table's by this factor (a white object)
MAX_COST = 4.0  # a region this far from a listed colour's track (tolerance units) is not it
MIN_BLOB_PX = 20  # a listed object's blob must have at least this many pixels
MAX_FRAMES = 50
CLIPPED = 250  # a pixel channel this bright may have been clipped by the sensor


@dataclass(frozen=True)
class CalibrationFrame:
    """One image (H, W, 3 uint8 RGB) and the colour names of the objects on the table in it
    ("red", or object names like "red block"); ``ignore``: pixels of no object (the robot)."""

    rgb: np.ndarray
    objects: tuple[str, ...]
    ignore: np.ndarray | None = None


@dataclass(frozen=True)
class ColorFit:
    """The fitted palette, the colours measured (name -> frames seen in) and those missed."""

    palette: Palette
    measured: dict[str, int]
    missed: list[str]


def fit_palette(frames: Sequence[CalibrationFrame], base: Palette) -> ColorFit:
    """The palette of ``frames`` (see the module docstring), starting from ``base``."""
    if not 1 <= len(frames) <= MAX_FRAMES:
        raise ConfigError(f"color calibration takes 1..{MAX_FRAMES} frames, got {len(frames)}")
    if base.table is None:
        raise ConfigError("the base palette names no table colour to calibrate against")
    reference = _table(frames[0])
    light = _normalised(reference / np.asarray(base.table))  # the first frame's light's colour
    samples, missed = _samples(frames, base, reference, light)
    colors = {c.name: _moved(c.rgb, light) for c in base.colors if c.name}
    measured = {
        name: {kind: _looks(np.concatenate(pixels)) for kind, pixels in by_kind.items()}
        for name, by_kind in samples.items()
    }
    distractors = [
        _moved(c.rgb, light)
        for c in base.colors
        if not c.name and not np.allclose(c.rgb, base.table, atol=0.02)
    ] + [tuple(reference)]
    palette = palette_from_colors(colors, distractors, base.tolerances, tuple(reference), measured)
    counts = {name: sum(map(len, by_kind.values())) for name, by_kind in samples.items()}
    return ColorFit(palette, counts, sorted(set(missed)))


def _samples(frames, base: Palette, reference: np.ndarray, light: np.ndarray):
    """(colour -> kind -> [inner pixels per frame], the colours some frame missed), every
    frame taken into the first frame's light."""
    samples: dict[str, dict[str, list[np.ndarray]]] = {}
    missed: list[str] = []
    for frame in frames:
        colors = _listed_colors(frame.objects, base)
        kinds = _listed_kinds(frame.objects)
        gain = _table(frame) / reference
        rgb = WhiteBalance.scaled(frame.rgb, 1.0 / gain)
        for color, pixels in _measure(rgb, frame.ignore, colors, base, light).items():
            if pixels is None:
                missed.append(color)
            else:
                by_kind = samples.setdefault(color, {})
                by_kind.setdefault(kinds.get(color, ANY_KIND), []).append(pixels)
    return samples, missed


def _table(frame: CalibrationFrame) -> np.ndarray:
    table = table_color(frame.rgb, frame.ignore)
    if table is None:
        raise ConfigError("a calibration frame shows too little of the table to measure it")
    return table


def _listed_colors(objects: Sequence[str], base: Palette) -> list[str]:
    names = set(base.names) - {""}
    colors = sorted({str(o).split()[0] for o in objects if str(o).strip()})
    unknown = [c for c in colors if c not in names]
    if unknown or not colors:
        raise ConfigError(
            f"each calibration frame lists the colours of its objects; unknown {unknown}, "
            f"known: {sorted(names)}"
        )
    return colors


def _listed_kinds(objects: Sequence[str]) -> dict[str, str]:
    """Colour -> the kind of object it is on in a frame ("red block" -> block), for the colours
    named with one kind only; a bare colour, or one named on two kinds, has ``ANY_KIND``."""
    kinds: dict[str, set[str]] = {}
    for name in objects:
        words = str(name).split()
        if words:
            kind = words[-1] if len(words) > 1 and words[-1] in OBJECT_KINDS else ANY_KIND
            kinds.setdefault(words[0], set()).add(kind)
    return {color: found.pop() if len(found) == 1 else ANY_KIND for color, found in kinds.items()}


def _measure(rgb, ignore, colors: list[str], base: Palette, light: np.ndarray) -> dict:
    """Colour name -> inner pixels of its object in ``rgb`` (None when not found): the regions
    that stand out from the table, each given to the listed colour whose default (moved into
    this light) it is nearest, nearest pairs first."""
    listed = {c.name: _moved(c.rgb, light) for c in base.colors if c.name in colors}
    palette = palette_from_colors(listed, (), base.tolerances)
    exposure = table_color(rgb, ignore).max() / max(base.table)  # brightness of this frame
    regions = [_interior(rgb, r) for r in _regions_off_table(rgb, ignore)]
    costs = []
    for number, pixels in enumerate(regions):
        look = np.array(_median_of_bright_half(pixels))
        for index, color in enumerate(palette.colors):
            cost = float(palette.track_distance(look[None] * 255.0, index)[0])
            expected = min(max(color.rgb) * exposure, 1.0)
            cost += abs(math.log(max(look.max(), 1e-3) / expected)) / base.tolerances.log_value
            if cost <= MAX_COST:
                costs.append((cost, number, color.name))
    found: dict[str, np.ndarray | None] = dict.fromkeys(colors)
    used = set()
    for _cost, number, color in sorted(costs):
        if found[color] is None and number not in used:
            found[color] = regions[number]
            used.add(number)
    return found


def _regions_off_table(rgb: np.ndarray, ignore: np.ndarray | None) -> list[np.ndarray]:
    """Boolean masks of the connected regions whose chromaticity differs from the table's, or
    that are much brighter (shadows are darker and keep the table's chromaticity), not
    touching the image border or the ignored pixels."""
    table = table_color(rgb, ignore)
    pixels = rgb.astype(np.float32) / 255.0
    total = pixels.sum(axis=2, keepdims=True) + 1e-3
    chroma = np.linalg.norm(pixels / total - table / table.sum(), axis=2)
    brighter = pixels.max(axis=2) > BRIGHTER * table.max()
    mask = ((chroma > TABLE_CHROMA) | brighter).astype(np.uint8)
    if ignore is not None:
        mask[np.asarray(ignore, bool)] = 0
    mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    height, width = mask.shape
    regions = []
    for index in range(1, count):
        x, y, w, h, area = stats[index]
        on_border = x == 0 or y == 0 or x + w == width or y + h == height
        if area >= MIN_BLOB_PX and not on_border:
            regions.append(labels == index)
    return regions


def _interior(rgb: np.ndarray, region: np.ndarray) -> np.ndarray:
    """The pixels of ``region`` one pixel in from its outline (edge pixels mix in the table)."""
    mask = region.astype(np.uint8)
    inner = cv2.erode(mask, np.ones((3, 3), np.uint8)).astype(bool)
    return rgb[inner] if np.count_nonzero(inner) >= MIN_BLOB_PX // 2 else rgb[mask.astype(bool)]


def _looks(pixels: np.ndarray) -> list[tuple[float, float, float]]:
    """How a colour looked (0..1): the median of the brighter half of ``pixels`` (N, 3 uint8),
    its lit faces, clipped or not; and of those with no clipped channel, when there are
    enough (a clipped pixel has lost some of its hue; shaded faces keep it)."""
    looks = [_median_of_bright_half(pixels)]
    unclipped = pixels[pixels.max(axis=1) < CLIPPED]
    if len(unclipped) >= MIN_BLOB_PX and len(unclipped) < len(pixels):
        looks.append(_median_of_bright_half(unclipped))
    return looks


def _median_of_bright_half(pixels: np.ndarray) -> tuple[float, float, float]:
    brightness = pixels.max(axis=1)
    bright = pixels[brightness >= np.median(brightness)]
    return tuple(float(v) for v in np.clip(np.median(bright, axis=0) / 255.0, 0.0, 1.0))


def _moved(rgb, light: np.ndarray) -> tuple[float, float, float]:
    return tuple(float(v) for v in np.clip(np.asarray(rgb) * light, 0.0, 1.0))


def _normalised(gain: np.ndarray) -> np.ndarray:
    return gain / max(float(gain.max()), 1e-6)


def save_palette(path: str | Path, fit: ColorFit, note: str = "") -> Path:
    """Write ``fit``'s palette in the format ``palette.load_palette`` reads."""
    palette = fit.palette
    body = {
        "colors": {c.name: _rounded(c.rgb) for c in palette.colors if c.name},
        "distractors": [_rounded(c.rgb) for c in palette.colors if not c.name],
        "table": _rounded(palette.table),
        "measured": {c.name: _measured_entry(c) for c in palette.colors if c.measured},
    }
    header = "# Colours measured by `lang2policy calibrate colors`"
    header += f" ({note})\n" if note else "\n"
    header += f"# measured: {fit.measured}; not found: {fit.missed}\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(body, sort_keys=False, default_flow_style=None))
    return path


def _measured_entry(color: ColorClass) -> list | dict:
    """A colour's looks as the palette file holds them: a list, or a mapping kind -> list."""
    if not color.measured_kinds:
        return [_rounded(m) for m in color.measured]
    entry: dict[str, list] = {}
    for look, kind in zip(color.measured, color.measured_kinds, strict=True):
        entry.setdefault(kind or ANY_KIND, []).append(_rounded(look))
    return entry


def _rounded(rgb) -> list[float]:
    return [round(float(v), 4) for v in rgb]
