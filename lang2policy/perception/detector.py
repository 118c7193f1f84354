"""Objects on the table from one colour image of a calibrated camera.

The image is first white-balanced against the table (``white_balance``).
Per colour blob (``segmentation``): its centroid, cast onto the plane through the middle of a
block (or of a bowl), is a first guess of where the object stands; a block's first yaw comes from
the minimum-area rectangle around its top face (the blob's brightest pixels, cast onto the plane
of the top face). The blob's area against the areas a block and a bowl would cover there says
which it is (a blob with a large hole is a bowl), and the colours measured on that kind decide
its colour among those of one hue (``Blob.member``); then the object's shape is fitted to the blob's
outline (``silhouette``), which corrects for perspective and for parts hidden by the arm. Blobs
cut by the image border, of no plausible size, or whose outline the shape does not fit, are no
object. At most one block and one bowl per colour is reported (scene objects are named
"<colour> <kind>"): the one with the largest blob. A block within a bowl's rim stands on the
bowl's floor, ``bowl_base`` above the table. Objects are assumed to stand on the table (or in a
bowl): a block held up by the gripper or stacked on another is placed as if it stood there
(``CameraPerception`` raises a block seen over a block it can no longer see: ``stacking``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.perception.bowl_wall import (
    FOREIGN_EDGE_SHARE,
    family_of,
    foreign_edge,
    owner_image,
)
from lang2policy.perception.camera import PinholeCamera
from lang2policy.perception.evidence import visible_share
from lang2policy.perception.image import check_rgb
from lang2policy.perception.palette import Palette
from lang2policy.perception.records import PerceivedObject, yaw_quat
from lang2policy.perception.segmentation import Blob, find_blobs
from lang2policy.perception.silhouette import Fit, Shape, fit_shape, predicted_outline
from lang2policy.perception.white_balance import white_balance_for


@dataclass(frozen=True)
class ObjectGeometry:
    """Sizes of the scene's objects (metres) and the height of the table top (world z).

    ``bowl_radius`` is the radius of the bowl's wall, ``bowl_wall`` half its thickness and
    ``bowl_base`` the height of its floor, under the wall (defaults: ``scene.objects.add_bowl``).
    """

    block_half: float
    bowl_radius: float
    bowl_height: float
    table_z: float = 0.0
    bowl_wall: float = 0.004
    bowl_base: float = 0.0065

    def __post_init__(self) -> None:
        sizes = (self.block_half, self.bowl_radius, self.bowl_height)
        if not all(math.isfinite(v) and v > 0 for v in sizes):
            raise ConfigError(f"object sizes must be finite and > 0, got {sizes}")
        if self.bowl_radius <= 2 * self.block_half:
            raise ConfigError("a bowl must be wider than a block to tell them apart by size")
        if not math.isfinite(self.table_z):
            raise ConfigError(f"table_z must be finite, got {self.table_z}")

    @property
    def block(self) -> Shape:
        return Shape("block", self.block_half, 2 * self.block_half)

    @property
    def bowl(self) -> Shape:
        rim = self.bowl_radius + self.bowl_wall
        top = self.bowl_base + self.bowl_height
        return Shape("bowl", rim, top, foot=self.bowl_radius, foot_height=self.bowl_base)


@dataclass(frozen=True)
class DetectorSettings:
    """Thresholds of the blob filters (see the module docstring)."""

    min_area_px: int = 12
    kernel: int = 3  # morphological opening (pixels)
    hollow: float = 0.15  # a hole fraction above this means a bowl
    top_face: float = 0.85  # pixels at least this share of a blob's brightest are its top face
    min_support: float = 0.4  # share of the outline the fitted shape must explain
    min_visible: float = 0.15  # share of a new object's silhouette the robot must leave in view
    tolerance_px: float = 2.0  # how close an outline point must be to count as explained
    drop_border: bool = True  # False: fit objects the image border cuts, by their visible edge
    smooth: bool = True  # classify a smoothed image too (``segmentation.find_blobs``)


@dataclass(frozen=True)
class _Candidate:
    blob: Blob
    kind: str
    pose: tuple[float, float, float]  # x, y, yaw
    fit: Fit


def _by_name(candidates) -> list[list[_Candidate]]:
    groups: dict[str, list[_Candidate]] = {}
    for c in candidates:
        groups.setdefault(f"{c.blob.color} {c.kind}", []).append(c)
    return list(groups.values())


def _gap(a: _Candidate, b: _Candidate) -> float:
    return math.hypot(a.pose[0] - b.pose[0], a.pose[1] - b.pose[1])


class Detector:
    """Finds the palette's blocks and bowls in images of one camera (see the module docstring)."""

    def __init__(
        self,
        camera: PinholeCamera,
        geometry: ObjectGeometry,
        palette: Palette,
        settings: DetectorSettings | None = None,
    ) -> None:
        self.camera, self.geometry, self.palette = camera, geometry, palette
        self.settings = settings or DetectorSettings()
        self.white_balance = white_balance_for(palette.table)
        self._rgba = {c.name: (*c.rgb, 1.0) for c in palette.colors if c.name}
        self.unclear: list[tuple[float, float]] = []  # (x, y) of bowls seen but not named

    def detect(self, rgb: np.ndarray, ignore: np.ndarray | None = None) -> list[PerceivedObject]:
        """Objects seen in ``rgb`` (H, W, 3 uint8, the camera's resolution), sorted by name.

        ``ignore`` (H, W bool) marks pixels that show no object, such as the robot's
        (``RobotMask``); objects partly behind them are still found. A bowl seen in two colours
        is not named (``bowl_wall``); where it stands is left in ``unclear``.
        """
        rgb = check_rgb(rgb)
        expected = (self.camera.intrinsics.height, self.camera.intrinsics.width)
        if rgb.shape[:2] != expected:
            raise ConfigError(
                f"image is {rgb.shape[1]}x{rgb.shape[0]} but the camera intrinsics are for "
                f"{expected[1]}x{expected[0]}"
            )
        if ignore is not None and np.shape(ignore) != expected:
            raise ConfigError(f"ignore mask is {np.shape(ignore)}, the image {expected}")
        s = self.settings
        candidates = []
        blobs = find_blobs(
            self._prepared(rgb, ignore), self.palette, s.min_area_px, s.kernel, ignore, s.smooth
        )
        for blob in blobs:
            if not (s.drop_border and blob.touches_border):
                candidates += self._candidates(blob, ignore)
        return self._resolve(candidates, owner_image(blobs, expected))

    def _prepared(self, rgb: np.ndarray, ignore: np.ndarray | None) -> np.ndarray:
        """``rgb`` white-balanced against the table."""
        if self.white_balance is not None:
            rgb = self.white_balance.correct(rgb, ignore)
        return rgb

    # ----------------------------------------------------------------- one blob
    def _candidates(self, blob: Blob, hidden: np.ndarray | None) -> list[_Candidate]:
        """The blob as a block or a bowl: the kind its size says, or (when the robot hides
        part of it) whichever fits its outline better; [] when neither fits or the robot hides
        too much of it to tell (``evidence``)."""
        guess = self._guess(blob)
        if guess is None:
            return []
        g = self.geometry
        block_area = _area(predicted_outline(self.camera, g.block, guess["block"], g.table_z))
        bowl_area = _area(predicted_outline(self.camera, g.bowl, guess["bowl"], g.table_z))
        area = blob.filled_area
        if blob.occluded or blob.touches_border:  # partly hidden: it may look smaller only
            kinds = [k for k, a in (("block", block_area), ("bowl", bowl_area)) if area < 1.5 * a]
        elif not 0.3 * block_area <= area <= 1.5 * bowl_area:
            kinds = []
        elif area > math.sqrt(block_area * bowl_area) or blob.hole_fraction > self.settings.hollow:
            kinds = ["bowl"]
        else:
            kinds = ["block"]
        fits = [self._fit(blob, [blob.edge], kind, guess[kind]) for kind in kinds]
        fits = [f for f in fits if f is not None]
        if not fits:
            return []
        best = max(fits, key=lambda c: c.fit.support)
        color = blob.member(self.palette, best.kind)  # told by the looks of its own kind
        if not self._evident(best, hidden):
            return []
        return [replace(best, blob=replace(blob, color=color))]

    def _evident(self, candidate: _Candidate, hidden: np.ndarray | None) -> bool:
        """Enough of the fitted object in view to name it (``visible_share``)."""
        g = self.geometry
        shape = g.block if candidate.kind == "block" else g.bowl
        silhouette = predicted_outline(self.camera, shape, candidate.pose, g.table_z)
        return visible_share(silhouette, hidden) >= self.settings.min_visible

    def _fit(self, blob: Blob, contours, kind: str, start, lift=0.0) -> _Candidate | None:
        """The shape fitted to the outline; ``lift``: it stands that high above the table."""
        g, s = self.geometry, self.settings
        shape = g.block if kind == "block" else g.bowl
        boundary = np.concatenate(contours)
        fit = fit_shape(self.camera, shape, boundary, start, g.table_z + lift, s.tolerance_px)
        moved = math.hypot(fit.x - start[0], fit.y - start[1])
        if fit.support < s.min_support or moved > g.bowl_radius:
            return None
        return _Candidate(blob, kind, (fit.x, fit.y, start[2]), fit)

    def _guess(self, blob: Blob) -> dict[str, tuple[float, float, float]] | None:
        """First (x, y, yaw) of the blob as a block and as a bowl; None if it is off the table."""
        g = self.geometry
        block = self._on_plane(blob.centroid[None], g.table_z + g.block_half)
        bowl = self._on_plane(blob.centroid[None], g.table_z + 0.5 * g.bowl.height)
        top = blob.points[blob.brightness >= self.settings.top_face * blob.brightness.max()]
        face = self._on_plane(top if len(top) >= 3 else blob.points, g.table_z + 2 * g.block_half)
        if block is None or bowl is None or face is None:
            return None
        _, _, angle = cv2.minAreaRect(face.astype(np.float32))
        return {
            "block": (*block[0], _square_yaw(math.radians(angle))),
            "bowl": (*bowl[0], 0.0),
        }

    # ----------------------------------------------------------------- all blobs
    def _resolve(self, candidates: list[_Candidate], owners: np.ndarray) -> list[PerceivedObject]:
        """One object per name: pieces of one bowl (cut apart by the gripper) are fitted
        together; a block inside a bowl of its own colour is a piece of that bowl; else the
        candidate with the largest blob wins. A bowl whose edge borders on another colour is
        not named, nor are that colour's blocks within its rim (``bowl_wall``)."""
        bowls = [self._merge_bowl(c) for c in _by_name(c for c in candidates if c.kind == "bowl")]
        unclear = _unclear_bowls(bowls, owners)
        taken = {b.blob.color: b for b in bowls}
        blocks = []
        for group in _by_name(c for c in candidates if c.kind == "block"):
            bowl = taken.get(group[0].blob.color)
            group = [c for c in group if bowl is None or _gap(c, bowl) > self.geometry.bowl_radius]
            group = [c for c in group if not _piece_of_unclear(c, unclear, self.geometry)]
            if group:
                blocks.append(max(group, key=lambda c: c.blob.area))
        self.unclear = [(b.pose[0], b.pose[1]) for b, _ in unclear]
        named = [b for b in bowls if all(b is not u for u, _ in unclear)]
        objects = [self._record(c) for c in named]
        objects += [self._record_block(c, bowls) for c in blocks]
        return sorted(objects, key=lambda o: o.name)

    def _record_block(self, block: _Candidate, bowls: list[_Candidate]) -> PerceivedObject:
        """A block inside a bowl stands on its floor: fitted again that much higher."""
        g = self.geometry
        if not any(_gap(block, bowl) < g.bowl_radius - g.block_half for bowl in bowls):
            return self._record(block)
        lifted = self._fit(block.blob, [block.blob.edge], "block", block.pose, g.bowl_base)
        return self._record(lifted or block, g.bowl_base)

    def _merge_bowl(self, pieces: list[_Candidate]) -> _Candidate:
        main = max(pieces, key=lambda c: c.blob.area)
        near = [p for p in pieces if _gap(p, main) < self.geometry.bowl_radius]
        if len(near) == 1:
            return main
        return self._fit(main.blob, [p.blob.edge for p in near], "bowl", main.pose) or main

    def _record(self, candidate: _Candidate, lift: float = 0.0) -> PerceivedObject:
        g, (x, y, yaw) = self.geometry, candidate.pose
        color, kind = candidate.blob.color, candidate.kind
        if kind == "block":
            z = g.table_z + lift + g.block_half
            position, quat, size = (x, y, z), yaw_quat(yaw), g.block_half
        else:
            position, quat, size = (x, y, g.table_z), (1.0, 0.0, 0.0, 0.0), g.bowl_radius
        return PerceivedObject(f"{color} {kind}", position, quat, kind, size, self._rgba[color])

    def _on_plane(self, pixels: np.ndarray, z: float) -> np.ndarray | None:
        """(N, 2) world x, y of ``pixels`` on the plane at height z; None if any ray misses."""
        points = self.camera.to_plane(pixels, z)
        return None if np.isnan(points).any() else points[:, :2]


def _unclear_bowls(bowls: list[_Candidate], owners: np.ndarray) -> list[tuple[_Candidate, int]]:
    """(bowl, the family it borders on) of each bowl whose visible edge mostly borders on
    another colour family (``bowl_wall.foreign_edge``)."""
    unclear = []
    for bowl in bowls:
        share, other = foreign_edge(bowl.blob, owners)
        if share > FOREIGN_EDGE_SHARE:
            unclear.append((bowl, other))
    return unclear


def _piece_of_unclear(block: _Candidate, unclear, geometry: ObjectGeometry) -> bool:
    """A block of the colour seen on an unnamed bowl's wall, within that bowl's rim."""
    return any(
        family_of(block.blob) == other and _gap(block, bowl) < geometry.bowl.half
        for bowl, other in unclear
    )


def _area(polygon: np.ndarray) -> float:
    return abs(cv2.contourArea(polygon.astype(np.float32)))


def _square_yaw(angle: float) -> float:
    """A square's yaw is only defined modulo 90 degrees: map it into [-45, 45) degrees."""
    quarter = math.pi / 2
    return (angle + quarter / 2) % quarter - quarter / 2
