"""What perception takes from a robot's simulated scene: colours, object sizes, the cameras.

The scene is compiled without objects (``scene.builder``): its object colours come from
``scene.objects.COLORS``, and every other visible material (the robot's paint, the table, its
legs) is a distractor, a colour in view that is no object. A real camera of the same robot uses
the same palette unless a measured one is given (``palette.load_palette``).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.perception.camera import Intrinsics
from lang2policy.perception.detector import ObjectGeometry
from lang2policy.perception.palette import Palette, Tolerances, palette_from_colors
from lang2policy.scene.objects import COLORS

_VISIBLE_GROUPS = 3  # MuJoCo draws geom groups 0, 1 and 2 by default


def geometry_for_robot(robot: str, table_z: float = 0.0) -> ObjectGeometry:
    """The object sizes of ``robot``'s scene (``objects`` in config/robots/<robot>.yaml)."""
    from lang2policy.scene.robot_description import load_robot_description

    sizes = load_robot_description(robot).objects
    return ObjectGeometry(sizes.block_half, sizes.bowl_radius, sizes.bowl_height, table_z)


@cache
def scene_model(robot: str):
    """The compiled MuJoCo scene of ``robot`` without objects (shared: treat it as read-only)."""
    from lang2policy.scene.builder import build_scene, compile_scene
    from lang2policy.scene.robot_description import load_robot_description

    return compile_scene(build_scene(load_robot_description(robot), []))


def scene_camera(robot: str, camera: str) -> int:
    """Id of the camera named ``camera`` in ``robot``'s scene; ConfigError listing the names."""
    model = scene_model(robot)
    names = [model.camera(i).name for i in range(model.ncam)]
    if camera not in names:
        raise ConfigError(f"unknown camera '{camera}'; the {robot} scene has {names}")
    return names.index(camera)


def sim_intrinsics(robot: str, camera: str, width: int, height: int) -> Intrinsics:
    """Intrinsics of a simulated camera rendered at width x height (square pixels).

    MuJoCo's optical axis meets the image at its geometric centre, (width / 2, height / 2) in
    coordinates where a pixel spans [i, i + 1); in OpenCV's and ROS's, where pixel i is centred
    on i, that is ((width - 1) / 2, (height - 1) / 2).
    """
    model = scene_model(robot)
    fovy = model.camera(scene_camera(robot, camera)).fovy[0]
    focal = 0.5 * height / math.tan(math.radians(fovy) / 2)
    k = [[focal, 0.0, (width - 1) / 2], [0.0, focal, (height - 1) / 2], [0.0, 0.0, 1.0]]
    return Intrinsics(np.array(k), width, height)


def scene_colors(robot: str) -> list[tuple[float, float, float]]:
    """Distinct colours of the visible, untextured geoms of ``robot``'s scene without objects."""
    model = scene_model(robot)
    colors = set()
    for geom in range(model.ngeom):
        material = model.geom_matid[geom]
        if model.geom_group[geom] >= _VISIBLE_GROUPS or model.geom_rgba[geom, 3] == 0:
            continue
        if material >= 0 and (model.mat_texid[material] >= 0).any():
            continue  # a texture's colours are not the material's (the floor)
        rgba = model.mat_rgba[material] if material >= 0 else model.geom_rgba[geom]
        colors.add(tuple(round(float(c), 3) for c in rgba[:3]))
    return sorted(colors)


@cache
def scene_palette(robot: str, tolerances: Tolerances | None = None) -> Palette:
    """COLORS as object colours, the rest of ``robot``'s scene as distractors, leaving out any
    distractor that is practically an object colour (a grey table beside a grey block)."""
    objects = palette_from_colors(COLORS, (), tolerances)
    distractors = [
        rgb
        for rgb in scene_colors(robot)
        if all(
            objects.track_distance(np.array([rgb]) * 255.0, i)[0] > 0.5
            for i in range(len(objects.colors))
        )
    ]
    return palette_from_colors(COLORS, distractors, tolerances, scene_table_color(robot))


def scene_table_color(robot: str) -> tuple[float, float, float]:
    """The rgb (0..1) of the table top's material in ``robot``'s scene."""
    model = scene_model(robot)
    rgba = model.mat_rgba[model.material("table_mat").id]
    return tuple(round(float(c), 3) for c in rgba[:3])
