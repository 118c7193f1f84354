"""Per-pixel colour classes: which palette colour (if any) each pixel of an RGB image shows.

A palette is built from material colours (``scene.objects.COLORS``, or a YAML file of colours
measured on a real camera). Light scales a surface's colour and highlights add white, and bright
channels clip at 255 (which moves the hue of an orange top face towards yellow), so each colour
is expanded into the track of colours it can take: ``clip(k * rgb + w)`` over a range of
shading ``k`` and highlight ``w``. A pixel gets the colour of the nearest track point when it is
within the tolerance, measured as chroma (saturation x hue on the colour wheel, so greys need no
hue) and log brightness. Colours of one hue (orange, brown) have overlapping tracks: single
pixels may go either way, and ``segmentation`` decides per blob. Distractors are colours in
view that are no object (the robot's paint, the table): they claim their pixels so that no
object colour does. ``table`` is the table's own colour, the reference the detector's white
balance (``white_balance``) takes the light's colour out against.

Classifying is one lookup per pixel in a table over (hue, saturation, value): hue in OpenCV's
full 8-bit range (1.4 degrees a step, as a dark pixel's own rounding allows), saturation and
value in 32 steps. Entries are worked out when a colour first appears and kept: a scene shows
a few thousand of the 262144, so the first frame costs tens of milliseconds, not seconds.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError

UNKNOWN = -1  # label of a pixel that matches no palette colour
_PENDING = -2  # a lookup-table entry not worked out yet
_SV_BITS = 5  # saturation and value steps of the lookup table: 2 ** 5
_CLIPPED = 0.98  # a measured channel this bright was clipped by the sensor
MEASURED_LOW = 0.6  # a measured look is a lit face: its track starts at this shading
MAX_COLORS = 100  # int8 labels hold a palette of at most this many colours
GREY_SATURATION = 0.15  # below this a colour is a grey (its hue means nothing)
OBJECT_KINDS = ("block", "bowl")  # the kinds a measured look may be tagged with
ANY_KIND = "any"  # the palette file's key of looks measured on no particular kind


@dataclass(frozen=True)
class ColorClass:
    """One palette colour: ``name`` ("" for a distractor), its material rgb in 0..1 and
    ``measured``: rgb it was seen with on the user's camera (``color_calibration``), whose
    shading tracks belong to it too. ``measured_kinds`` (one per look, or empty): the kind of
    object each look was measured on ("block", "bowl"; "" for any): a bowl's shaded inside
    and a block's lit top face of one material look different, and a blob judged by the looks
    of its own kind tells brown from orange where the looks of both kinds together cannot."""

    name: str
    rgb: tuple[float, float, float]
    measured: tuple[tuple[float, float, float], ...] = ()
    measured_kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for rgb in (self.rgb, *self.measured):
            if len(rgb) != 3 or not all(0.0 <= float(c) <= 1.0 for c in rgb):
                raise ConfigError(f"colour '{self.name}': rgb must be 3 numbers in 0..1, got {rgb}")
        if self.measured_kinds and len(self.measured_kinds) != len(self.measured):
            raise ConfigError(
                f"colour '{self.name}': {len(self.measured_kinds)} kinds for "
                f"{len(self.measured)} measured looks (one kind per look, or none)"
            )

    def looks(self, kind: str | None = None) -> tuple[tuple[float, float, float], ...]:
        """The measured looks that fit an object of ``kind`` (None: all of them): those
        measured on that kind and those of no kind."""
        kinds = self.measured_kinds or ("",) * len(self.measured)
        return tuple(
            m for m, k in zip(self.measured, kinds, strict=True) if kind is None or k in (kind, "")
        )

    @property
    def hsv(self) -> tuple[float, float, float]:
        """Hue in degrees, saturation and value in 0..1."""
        h, s, v = colorsys.rgb_to_hsv(*self.rgb)
        return 360.0 * h, s, v

    @property
    def is_grey(self) -> bool:
        return self.hsv[1] < GREY_SATURATION


@dataclass(frozen=True)
class Tolerances:
    """The shading range of the colour tracks, and how far from a track a pixel may be."""

    shading: tuple[float, float] = (0.2, 1.4)  # k: from deep shadow to over-exposed
    highlight: float = 0.12  # w: white added by specular highlights, at most
    chroma: float = 0.12  # distance on the colour wheel (saturation 1 = radius 1)
    log_value: float = 0.35  # brightness ratio, as a natural log
    min_value: float = 0.12  # darker pixels (shadows, black parts) are never classified


class Palette:
    """Classifies every pixel of an RGB image into an index of ``colors`` or ``UNKNOWN``."""

    def __init__(
        self,
        colors: Sequence[ColorClass],
        tolerances: Tolerances | None = None,
        table: Sequence[float] | None = None,
    ):
        names = [c.name for c in colors if c.name]
        if not names:
            raise ConfigError("a palette needs at least one named (object) colour")
        if len(set(names)) != len(names):
            raise ConfigError(f"palette colour names must be unique, got {names}")
        self.colors = list(colors)
        self.tolerances = tolerances or Tolerances()
        self.table = None if table is None else ColorClass("table", tuple(table)).rgb
        self._lut = np.full((256, 1 << _SV_BITS, 1 << _SV_BITS), _PENDING, np.int8)
        self._samples, self._owner = self._track_features()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.colors]

    def classify(self, rgb: np.ndarray) -> np.ndarray:
        """(H, W) int8 labels: the index of each pixel's palette colour, or UNKNOWN."""
        hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV_FULL)
        shift = 8 - _SV_BITS
        cell = hsv[..., 0].astype(np.int32) << (2 * _SV_BITS)
        cell |= (hsv[..., 1] >> shift).astype(np.int32) << _SV_BITS
        cell |= hsv[..., 2] >> shift
        table = self._lut.reshape(-1)
        labels = table[cell]
        pending = labels == _PENDING
        if pending.any():
            self._fill(np.unique(cell[pending]))
            labels = table[cell]
        return labels

    def track_distance(self, rgb: np.ndarray, index: int, kind: str | None = None) -> np.ndarray:
        """Distance (in tolerance units) of each of the (N, 3) uint8 ``rgb`` to colour
        ``index``'s track: 0 on it, 1 at the edge of what still counts as that colour;
        ``kind``: only the looks measured on that kind of object (``ColorClass.looks``)."""
        samples = _features(self.track(index, kind), self.tolerances)
        pixels = _features(np.asarray(rgb, np.float32).reshape(-1, 3) / 255.0, self.tolerances)
        d2 = (pixels**2).sum(1)[:, None] - 2.0 * pixels @ samples.T + (samples**2).sum(1)[None]
        return np.sqrt(np.maximum(d2.min(axis=1), 0.0))

    def track(self, index: int, kind: str | None = None) -> np.ndarray:
        """(N, 3) rgb in 0..1 that colour ``index`` (measured on ``kind``: ``ColorClass.looks``)
        can take under the modelled lighting.

        A distractor's track stops where its brightest channel would clip: clipped colours of
        different materials converge to the same few, and those must stay with the objects.
        """
        color = self.colors[index]
        tracks = [self._track(color.rgb, bool(color.name))]
        tracks += [self._track(rgb, True, measured=True) for rgb in color.looks(kind)]
        return np.concatenate(tracks)

    def _track(self, material, named: bool, measured: bool = False) -> np.ndarray:
        """``material``'s colours from deep shadow to over-exposed. A measured colour with a
        clipped channel lost part of its hue to the clipping: only brighter versions of it
        (more clipped) are its colour, not darker ones, which no material shows."""
        tol = self.tolerances
        rgb = np.asarray(material, float)
        top = tol.shading[1] if named else min(tol.shading[1], 1.0 / max(rgb.max(), 1e-3))
        bottom = tol.shading[0] if not measured else 1.0 if rgb.max() >= _CLIPPED else MEASURED_LOW
        shading = np.geomspace(bottom, max(top, bottom), 32)
        highlight = np.linspace(0.0, tol.highlight, 4) if named else np.zeros(1)
        k, w = np.meshgrid(shading, highlight)
        return np.clip(k.reshape(-1, 1) * rgb + w.reshape(-1, 1), 0.0, 1.0)

    def _track_features(self) -> tuple[np.ndarray, np.ndarray]:
        tracks = [self.track(i) for i in range(len(self.colors))]
        owner = np.concatenate([np.full(len(t), i) for i, t in enumerate(tracks)])
        return _features(np.concatenate(tracks), self.tolerances), owner

    def _fill(self, cells: np.ndarray) -> None:
        """Work out the lookup-table entries of ``cells`` (flat indices: hue, sat, value)."""
        steps = 1 << _SV_BITS
        hue, sat, val = (
            cells >> (2 * _SV_BITS),
            (cells >> _SV_BITS) & (steps - 1),
            cells & (steps - 1),
        )
        hsv = np.column_stack(
            [hue * (360.0 / 256.0), (sat + 0.5) / steps, (val + 0.5) / steps]
        ).astype(np.float32)
        pixels = _hsv_features(hsv, self.tolerances)
        d2 = (
            (pixels**2).sum(1)[:, None]
            - 2.0 * pixels @ self._samples.T
            + (self._samples**2).sum(1)[None, :]
        )
        nearest = d2.argmin(axis=1)
        ok = d2[np.arange(len(cells)), nearest] <= 1.0
        ok &= hsv[:, 2] >= self.tolerances.min_value
        self._lut.reshape(-1)[cells] = np.where(ok, self._owner[nearest], UNKNOWN)


def _features(rgb: np.ndarray, tol: Tolerances) -> np.ndarray:
    """(N, 3): chroma x, y on the colour wheel and log brightness, each over its tolerance."""
    hsv = cv2.cvtColor(rgb.astype(np.float32).reshape(-1, 1, 3), cv2.COLOR_RGB2HSV)
    return _hsv_features(hsv.reshape(-1, 3), tol)


def _hsv_features(hsv: np.ndarray, tol: Tolerances) -> np.ndarray:
    """``_features`` of (N, 3) hue (degrees), saturation and value (0..1)."""
    hue = np.deg2rad(hsv[:, 0])
    sat, val = hsv[:, 1], np.maximum(hsv[:, 2], 1e-3)
    return np.column_stack(
        [
            sat * np.cos(hue) / tol.chroma,
            sat * np.sin(hue) / tol.chroma,
            np.log(val) / tol.log_value,
        ]
    )


def palette_from_colors(
    colors: Mapping[str, Sequence[float]],
    distractors: Sequence[Sequence[float]] = (),
    tolerances: Tolerances | None = None,
    table: Sequence[float] | None = None,
    measured: Mapping[str, object] | None = None,
) -> Palette:
    """A palette of named colours (name -> rgb 0..1) plus unnamed distractor colours, the
    table's colour (the white balance's reference; None: no white balance) and colours
    measured on a camera (name -> list of rgb, or name -> {kind: list of rgb})."""
    measured = dict(measured or {})
    unknown = sorted(set(measured) - set(colors))
    if unknown:
        raise ConfigError(f"measured colours {unknown} are not in the palette's {sorted(colors)}")
    classes = []
    for name, rgb in colors.items():
        looks, kinds = _measured_looks(name, measured.get(name, ()))
        classes.append(ColorClass(name, tuple(float(c) for c in rgb), looks, kinds))
    classes += [ColorClass("", tuple(float(c) for c in rgb)) for rgb in distractors]
    rgb = None if table is None else tuple(float(c) for c in table)
    return Palette(classes, tolerances, rgb)


def _measured_looks(name: str, entry) -> tuple[tuple, tuple[str, ...]]:
    """(looks, their kinds) of one colour's ``measured`` entry: a list of rgb (no kind) or a
    mapping of object kind to a list of rgb."""
    if isinstance(entry, Mapping):
        allowed = (*OBJECT_KINDS, ANY_KIND)
        unknown = sorted(set(entry) - set(allowed))
        if unknown:
            raise ConfigError(
                f"measured colour '{name}': kinds {unknown} unknown; allowed: {list(allowed)}"
            )
        pairs = [
            (look, "" if kind == ANY_KIND else kind)
            for kind, kind_looks in entry.items()
            for look in kind_looks
        ]
    else:
        pairs = [(look, "") for look in entry]
    looks = tuple(tuple(float(c) for c in look) for look, _ in pairs)
    return looks, tuple(kind for _, kind in pairs) if any(k for _, k in pairs) else ()


def load_palette(path: str | Path) -> Palette:
    """A palette from YAML: ``colors: {red: [r, g, b], ...}`` (0..1), optional
    ``distractors: [[r, g, b], ...]`` (colours in view that are no object, like the robot's)
    optional ``table: [r, g, b]`` (the table's colour, for white balance) and optional
    ``measured: {red: [[r, g, b], ...]}`` (how each colour looked on the camera), or per kind
    of object ``measured: {red: {block: [[r, g, b], ...], bowl: [...], any: [...]}}``."""
    data = read_yaml(Path(path))
    unknown = sorted(set(data) - {"colors", "distractors", "table", "measured"})
    if unknown or not isinstance(data.get("colors"), dict):
        raise ConfigError(
            f"{path}: a palette file has a 'colors' mapping (name: [r, g, b] in 0..1) and "
            f"optional 'distractors', 'table' and 'measured'; unknown keys: {unknown}"
        )
    if len(data["colors"]) > MAX_COLORS or len(data.get("distractors") or ()) > MAX_COLORS:
        raise ConfigError(f"{path}: at most {MAX_COLORS} colours and {MAX_COLORS} distractors")
    try:
        return palette_from_colors(
            data["colors"],
            data.get("distractors") or (),
            table=data.get("table"),
            measured=data.get("measured"),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
