"""A camera image of one bowl seen in two colours, as at realism ``mild`` (``bowl_wall``).

The SO-101's top camera at 224 x 224 px looks at a bowl standing at ``BOWL_XY``: its wall is
yellow but for the lit side, which reads orange like its floor. A real render of that case
needs the arm, the light and the colour calibration of one ``bench perception`` layout; this
image holds just the colours, for the tests that need the frame and not the render.
"""

from __future__ import annotations

import cv2
import numpy as np

from lang2policy.perception.camera import PinholeCamera
from lang2policy.perception.camera_pose import sim_camera_pose
from lang2policy.perception.scene import geometry_for_robot, scene_palette, sim_intrinsics
from lang2policy.perception.silhouette import predicted_outline
from lang2policy.scene.objects import COLORS

ROBOT, CAMERA, SIZE = "so101", "top", 224
BOWL_XY = (0.2, 0.1)


def rgb_of(name: str) -> tuple[int, ...]:
    """A palette colour as 8-bit RGB."""
    return tuple(round(c * 255) for c in COLORS[name])


def two_coloured_bowl() -> np.ndarray:
    """(SIZE, SIZE, 3) uint8: the table, and the bowl at ``BOWL_XY`` in yellow and orange."""
    camera = PinholeCamera(
        sim_intrinsics(ROBOT, CAMERA, SIZE, SIZE), sim_camera_pose(ROBOT, CAMERA)
    )
    geometry = geometry_for_robot(ROBOT)
    outline = predicted_outline(camera, geometry.bowl, (*BOWL_XY, 0.0), geometry.table_z)
    table = np.round(np.multiply(scene_palette(ROBOT).table, 255))
    image = np.full((SIZE, SIZE, 3), table, np.uint8)
    centre = outline.mean(axis=0)
    floor = centre + 0.8 * (outline - centre)
    cv2.fillPoly(image, [np.round(outline).astype(np.int32)], rgb_of("yellow"))
    cv2.fillPoly(image, [np.round(floor).astype(np.int32)], rgb_of("orange"))
    lit = (image == rgb_of("yellow")).all(axis=2)  # the wall, lit on its right half
    lit[:, : int(centre[0] + 0.5 * (outline[:, 0].max() - centre[0]))] = False
    image[lit] = rgb_of("orange")
    return image
