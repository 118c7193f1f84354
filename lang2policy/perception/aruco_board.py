"""A "board" of ArUco markers lying flat on the table at known places in the world frame.

The world frame is the robot's base frame (z up; the table top is the plane z = 0 in the
simulated scene, ``sim/scenes/tabletop.xml``). A board YAML (default ``hardware/aruco_board.yaml``)
says which markers there are and where they lie::

    dictionary: DICT_4X4_50     # cv2.aruco predefined dictionary
    marker_size: 0.05           # edge of the black square (m), without the white margin
    plane_z: 0.0                # world z of the paper (the table top)
    markers:                    # id: centre in the world (m) and heading (deg)
      0: {xy: [0.04, 0.19], yaw_deg: 0}

``yaw_deg`` is the direction the printed marker's *top* edge points to, in degrees from world +x
towards +y: with 0 the marker reads upright to a person standing behind the robot and looking
along +x. ``marker_image`` renders a marker for printing (``write_marker_images``: PNG files
with the id written under the marker so the sheets can be told apart).

Pure: no ROS import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError

_BOARD_KEYS = {"dictionary", "marker_size", "plane_z", "markers"}
_MARKER_KEYS = {"xy", "yaw_deg"}
PRINT_DPI = 300


@dataclass(frozen=True)
class MarkerPlacement:
    """Where one marker lies: centre (x, y) in the world (m) and the heading of its top edge."""

    marker_id: int
    xy: tuple[float, float]
    yaw_deg: float = 0.0


@dataclass(frozen=True)
class Board:
    """ArUco markers on the table plane ``z = plane_z`` of the world frame."""

    dictionary: str
    marker_size: float
    markers: tuple[MarkerPlacement, ...]
    plane_z: float = 0.0
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        where = f"{self.source}: " if self.source else ""
        aruco_dictionary(self.dictionary, where)
        if not (math.isfinite(self.marker_size) and self.marker_size > 0):
            raise ConfigError(f"{where}marker_size must be > 0 (m), got {self.marker_size}")
        if not self.markers:
            raise ConfigError(f"{where}a board needs at least one marker")
        ids = [m.marker_id for m in self.markers]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"{where}marker ids must be unique, got {ids}")
        limit = aruco_dictionary(self.dictionary).bytesList.shape[0]
        bad = [i for i in ids if not 0 <= i < limit]
        if bad:
            raise ConfigError(f"{where}{self.dictionary} has ids 0..{limit - 1}; got {bad}")

    def placement(self, marker_id: int) -> MarkerPlacement | None:
        return next((m for m in self.markers if m.marker_id == marker_id), None)

    def ids(self) -> list[int]:
        return [m.marker_id for m in self.markers]

    def corners(self, marker_id: int) -> np.ndarray:
        """World corners (4 x 3) of a marker in OpenCV's detection order: top-left, top-right,
        bottom-right, bottom-left of the printed marker."""
        placement = self.placement(marker_id)
        if placement is None:
            raise ConfigError(f"marker {marker_id} is not on the board (ids {self.ids()})")
        yaw = math.radians(placement.yaw_deg)
        up = np.array([math.cos(yaw), math.sin(yaw), 0.0])  # printed top direction
        right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])  # printed right direction
        centre = np.array([*placement.xy, self.plane_z])
        half = self.marker_size / 2.0
        signs = ((-1, 1), (1, 1), (1, -1), (-1, -1))  # (right, up) of TL, TR, BR, BL
        return np.array([centre + half * (sr * right + su * up) for sr, su in signs])


def aruco_dictionary(name: str, where: str = "") -> cv2.aruco.Dictionary:
    """The predefined OpenCV dictionary ``name`` (e.g. DICT_4X4_50)."""
    code = getattr(cv2.aruco, str(name), None) if str(name).startswith("DICT_") else None
    if not isinstance(code, int):
        known = sorted(n for n in dir(cv2.aruco) if n.startswith("DICT_"))
        raise ConfigError(f"{where}unknown ArUco dictionary {name!r}; known: {known}")
    return cv2.aruco.getPredefinedDictionary(code)


def _placement(marker_id, entry, where: str) -> MarkerPlacement:
    if isinstance(marker_id, bool) or not isinstance(marker_id, int):
        raise ConfigError(f"{where}: marker ids must be integers, got {marker_id!r}")
    if not isinstance(entry, dict) or set(entry) - _MARKER_KEYS or "xy" not in entry:
        raise ConfigError(
            f"{where}: marker {marker_id} must be a mapping with 'xy' [x, y] (m) and optional "
            f"'yaw_deg', got {entry!r}"
        )
    try:
        xy = tuple(float(v) for v in entry["xy"])
        yaw = float(entry.get("yaw_deg", 0.0))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: marker {marker_id} has non-numeric values: {entry}") from exc
    if len(xy) != 2 or not all(map(math.isfinite, (*xy, yaw))):
        raise ConfigError(f"{where}: marker {marker_id} needs finite xy [x, y], got {entry}")
    return MarkerPlacement(marker_id, (xy[0], xy[1]), yaw)


def load_board(path: str | Path) -> Board:
    """Read and validate a board YAML (format in the module docstring)."""
    where = str(path)
    data = read_yaml(Path(path))
    unknown = sorted(set(data) - _BOARD_KEYS)
    missing = sorted({"dictionary", "marker_size", "markers"} - set(data))
    if unknown or missing:
        raise ConfigError(
            f"{where}: unknown keys {unknown}, missing keys {missing}; a board has "
            f"{sorted(_BOARD_KEYS)} (plane_z optional)"
        )
    if not isinstance(data["markers"], dict):
        raise ConfigError(f"{where}: 'markers' must map marker ids to {{xy, yaw_deg}}")
    markers = tuple(_placement(i, e, where) for i, e in data["markers"].items())
    try:
        size, plane_z = float(data["marker_size"]), float(data.get("plane_z", 0.0))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: marker_size and plane_z must be numbers") from exc
    return Board(str(data["dictionary"]), size, markers, plane_z, source=where)


def marker_image(board: Board, marker_id: int, dpi: int = PRINT_DPI) -> np.ndarray:
    """A printable grey image of one marker at ``dpi``: the marker at its true size inside a
    white margin (one marker cell, at least 5 mm: the detector needs it) and a label under its
    bottom edge (id, dictionary, size), so the sheets can be told apart and laid out the right
    way round."""
    if board.placement(marker_id) is None:
        raise ConfigError(f"marker {marker_id} is not on the board (ids {board.ids()})")
    dictionary = aruco_dictionary(board.dictionary)
    side = round(board.marker_size / 0.0254 * dpi)
    marker = cv2.aruco.generateImageMarker(dictionary, marker_id, side)
    margin = max(side // (dictionary.markerSize + 2), round(0.005 / 0.0254 * dpi))
    label_height = max(margin, round(0.012 / 0.0254 * dpi))
    sheet = np.full((side + 2 * margin + label_height, side + 2 * margin), 255, np.uint8)
    sheet[margin : margin + side, margin : margin + side] = marker
    text = f"id {marker_id}  {board.dictionary}  {board.marker_size * 1000:g} mm  (bottom)"
    font = cv2.FONT_HERSHEY_SIMPLEX
    width_at_1 = cv2.getTextSize(text, font, 1.0, 2)[0][0]
    scale = min(label_height / 60.0, side / width_at_1)  # fits under the marker
    baseline = side + 2 * margin + label_height // 2
    cv2.putText(
        sheet, text, (margin, baseline), font, scale, 0, max(1, round(scale * 2)), cv2.LINE_AA
    )
    return sheet


def write_marker_images(board: Board, out_dir: str | Path, dpi: int = PRINT_DPI) -> list[Path]:
    """One PNG per marker (``marker_<id>.png``) in ``out_dir``; print at ``dpi`` with no scaling."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for marker_id in board.ids():
        path = out / f"marker_{marker_id}.png"
        if not cv2.imwrite(str(path), marker_image(board, marker_id, dpi)):
            raise ConfigError(f"cannot write {path}")
        paths.append(path)
    return paths
