"""One episode's look under a realism profile: drawn from a seed, applied to a compiled scene.

``SceneLook.draw(profile, seed, world)`` draws every visual value of ``profile`` (light,
shades, table tint, distractor places, camera errors, image effects) from one seed, so an
episode looks the same whenever it is replayed. ``apply_model(world)`` sets it on the world's
model from the values the model was built with (``Nominal``): applying the looks of two
episodes one after the other gives the second look, not a mix. Cameras are moved off their
calibration (``cam_pos``, ``cam_quat``, ``cam_fovy``) while what a calibration knows stays the
nominal pose (``perception.scene.sim_camera_pose``, the ``Nominal`` field of view for
``camera_info``).

The table's grain and the distractors are model elements added when the scene is built
(``add_realism_elements``): a speckled texture on the table top, and visual-only bodies (no
collision: they change what the camera sees, not the physics) moved into view per episode.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass, field

import mujoco
import numpy as np

from lang2policy.realism.profile import RealismProfile

DISTRACTOR_PREFIX = "realism_distractor_"
DISTRACTOR_COLORS = {"white": (0.92, 0.92, 0.9), "black": (0.08, 0.08, 0.09)}
_DISTRACTOR_SHAPES = (  # (geom type, size): a cup, a low box
    (mujoco.mjtGeom.mjGEOM_CYLINDER, (0.03, 0.04, 0.0)),
    (mujoco.mjtGeom.mjGEOM_BOX, (0.04, 0.03, 0.012)),
)
_PARKED = (-0.3, 0.0, -0.5)  # a distractor not in this episode: under the table
_GAP = 0.07  # m between a distractor's centre and any object's
_WHITE_K = 6500.0


def add_realism_elements(spec: mujoco.MjSpec, profile: RealismProfile) -> None:
    """The elements the profile's draws need in the model: the table's grain texture and as
    many distractor bodies as the profile may draw. Nothing for a profile without them."""
    table = profile.table
    if table.grain > 0:
        texture = spec.add_texture(name="realism_table_grain", type=mujoco.mjtTexture.mjTEXTURE_2D)
        texture.builtin = mujoco.mjtBuiltin.mjBUILTIN_FLAT
        texture.mark = mujoco.mjtMark.mjMARK_RANDOM
        texture.random = 0.35
        texture.width = texture.height = 256
        texture.rgb1 = [1.0, 1.0, 1.0]
        texture.markrgb = [1.0 - table.grain] * 3
        material = spec.material("table_mat")
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "realism_table_grain"
        material.texrepeat = [6.0, 6.0]
    for index in range(table.distractors[1]):
        kind, size = _DISTRACTOR_SHAPES[index % len(_DISTRACTOR_SHAPES)]
        body = spec.worldbody.add_body(name=f"{DISTRACTOR_PREFIX}{index}", mocap=True)
        body.pos = list(_PARKED)
        geom = body.add_geom(name=f"{DISTRACTOR_PREFIX}{index}_geom", type=kind, size=list(size))
        geom.contype = geom.conaffinity = 0
        geom.rgba = [*DISTRACTOR_COLORS["white"], 1.0]


@dataclass
class Nominal:
    """The model's values before any look: what every ``apply_model`` starts from."""

    light_diffuse: np.ndarray
    light_dir: np.ndarray
    light_castshadow: np.ndarray
    headlight: np.ndarray
    geom_rgba: np.ndarray
    mat_rgba: np.ndarray
    cam_pos: np.ndarray
    cam_quat: np.ndarray
    cam_fovy: np.ndarray

    @classmethod
    def of(cls, model: mujoco.MjModel) -> Nominal:
        return cls(
            model.light_diffuse.copy(),
            model.light_dir.copy(),
            model.light_castshadow.copy(),
            model.vis.headlight.diffuse.copy(),
            model.geom_rgba.copy(),
            model.mat_rgba.copy(),
            model.cam_pos.copy(),
            model.cam_quat.copy(),
            model.cam_fovy.copy(),
        )


@dataclass(frozen=True)
class ImageEffects:
    """What the sensor adds to a rendered frame: gain, blur (sigma, px), noise (std, 0..255)."""

    exposure: float = 1.0
    blur_px: float = 0.0
    noise: float = 0.0

    @property
    def is_off(self) -> bool:
        return self == ImageEffects()


@dataclass(frozen=True)
class SceneLook:
    """The drawn visual values of one episode (see the module docstring)."""

    light_scale: np.ndarray  # per light
    light_dir: np.ndarray  # per light, unit vectors
    shadows: bool
    light_rgb: np.ndarray  # the colour temperature's gain
    object_hsv: dict[str, tuple[float, float, float]]  # hue turn (rad), saturation, value scale
    table_shift: np.ndarray
    distractors: list[tuple[str, np.ndarray]]  # colour, (x, y, yaw)
    camera_pos: np.ndarray  # per camera, offset (m)
    camera_turn: np.ndarray  # per camera, rotation vector (rad)
    focal: np.ndarray  # per camera, relative focal length error
    image: ImageEffects = field(default_factory=ImageEffects)

    @classmethod
    def draw(cls, profile: RealismProfile, seed: int, world, taken, rig: int | None = None):
        """The look of episode ``seed`` of ``world`` (a ``scene.world.World``); ``taken``: the
        (x, y) of the episode's objects, which distractors keep clear of. ``rig``: the objects'
        shades and the table's tint are those of this rig (one user's objects and table, the
        same every episode) rather than drawn per episode; the episode's other values are
        the same either way."""
        rng = np.random.default_rng([seed, 34])
        model, light, cam = world.model, profile.light, profile.camera
        light_scale = rng.uniform(*light.intensity, size=model.nlight)
        light_dir = np.array(
            [_turned(d, light.direction_deg, rng) for d in world.nominal.light_dir]
        )
        light_rgb = temperature_rgb(float(rng.uniform(*light.temperature_k)))
        object_hsv, table_shift = _setup(profile, rng, sorted(world.objects))
        if rig is not None:
            object_hsv, table_shift = _setup(profile, np.random.default_rng([rig, 34, 1]),
                                             sorted(world.objects))  # fmt: skip
        return cls(
            light_scale=light_scale,
            light_dir=light_dir,
            shadows=light.shadows,
            light_rgb=light_rgb,
            object_hsv=object_hsv,
            table_shift=table_shift,
            distractors=_distractors(profile, rng, world, taken),
            camera_pos=rng.uniform(-1, 1, size=(model.ncam, 3)) * cam.position_mm / 1000.0,
            camera_turn=np.radians(rng.uniform(-1, 1, size=(model.ncam, 3)) * cam.rotation_deg),
            focal=rng.uniform(-cam.focal, cam.focal, size=model.ncam),
            image=ImageEffects(float(rng.uniform(*cam.exposure)), cam.blur_px, cam.noise),
        )

    def apply_model(self, world) -> None:
        """Set this look on ``world.model``, from ``world.nominal``. Call it before
        ``mj_resetData`` (``World.reset`` does): MuJoCo computes the world body's cameras and
        lights there and, with island sleeping, not again; then ``place_distractors``."""
        model, nominal = world.model, world.nominal
        model.light_diffuse[:] = np.clip(
            nominal.light_diffuse * self.light_scale[:, None] * self.light_rgb, 0, 1
        )
        model.light_dir[:] = self.light_dir
        model.light_castshadow[:] = nominal.light_castshadow
        if self.shadows and model.nlight:
            model.light_castshadow[0] = True  # the key light
        mean_scale = float(np.mean(self.light_scale)) if model.nlight else 1.0
        headlight = nominal.headlight * mean_scale * self.light_rgb
        model.vis.headlight.diffuse[:] = np.clip(headlight, 0, 1)
        model.geom_rgba[:] = nominal.geom_rgba
        for name, shift in self.object_hsv.items():
            geoms = np.flatnonzero(model.geom_bodyid == world.objects[name].body_id)
            for g in geoms:
                model.geom_rgba[g, :3] = shifted(nominal.geom_rgba[g, :3], *shift)
        model.mat_rgba[:] = nominal.mat_rgba
        table = model.material("table_mat").id
        model.mat_rgba[table, :3] = np.clip(nominal.mat_rgba[table, :3] + self.table_shift, 0, 1)
        self._apply_cameras(model, nominal)
        self._color_distractors(model)

    def _apply_cameras(self, model: mujoco.MjModel, nominal: Nominal) -> None:
        model.cam_pos[:] = nominal.cam_pos + self.camera_pos
        for i in range(model.ncam):
            turn = np.empty(4)
            mujoco.mju_axisAngle2Quat(turn, *_axis_angle(self.camera_turn[i]))
            mujoco.mju_mulQuat(model.cam_quat[i], nominal.cam_quat[i], turn)
            half = math.radians(float(nominal.cam_fovy[i])) / 2
            model.cam_fovy[i] = math.degrees(2 * math.atan(math.tan(half) / (1 + self.focal[i])))

    def _color_distractors(self, model: mujoco.MjModel) -> None:
        for slot, body in _distractor_bodies(model):
            if slot < len(self.distractors):
                color = self.distractors[slot][0]
                model.geom_rgba[model.body_geomadr[body], :3] = DISTRACTOR_COLORS[color]

    def place_distractors(self, world) -> None:
        """Move the episode's distractors onto the table (after ``mj_resetData``, which puts
        mocap bodies back where the model has them), the others under it."""
        model, data = world.model, world.data
        for slot, body in _distractor_bodies(model):
            mocap = model.body_mocapid[body]
            if slot < len(self.distractors):
                _color, (x, y, yaw) = self.distractors[slot]
                z = model.geom_size[model.body_geomadr[body], 1 if slot % 2 == 0 else 2]
                data.mocap_pos[mocap] = (x, y, z)
                data.mocap_quat[mocap] = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
            else:
                data.mocap_pos[mocap] = _PARKED


def _distractor_bodies(model: mujoco.MjModel) -> list[tuple[int, int]]:
    """(slot, body id) of every distractor body of the model."""
    found = []
    for body in range(model.nbody):
        name = model.body(body).name
        if name.startswith(DISTRACTOR_PREFIX):
            found.append((int(name[len(DISTRACTOR_PREFIX) :]), body))
    return found


def _setup(profile: RealismProfile, rng: np.random.Generator, names: list[str]):
    """(each object's hue turn, saturation and value scale; the table's rgb shift)."""
    colors = profile.colors
    object_hsv = {
        name: (
            math.radians(float(rng.uniform(-colors.hue_deg, colors.hue_deg))),
            float(rng.uniform(*colors.saturation)),
            float(rng.uniform(*colors.value)),
        )
        for name in names
    }
    return object_hsv, rng.uniform(-profile.table.tint, profile.table.tint, size=3)


def shifted(rgb, hue: float, saturation: float, value: float) -> np.ndarray:
    """``rgb`` (0..1) with its hue turned by ``hue`` rad and saturation and value scaled."""
    h, s, v = colorsys.rgb_to_hsv(*(float(c) for c in rgb))
    h = (h + hue / (2 * math.pi)) % 1.0
    return np.array(colorsys.hsv_to_rgb(h, min(1.0, s * saturation), min(1.0, v * value)))


def temperature_rgb(kelvin: float) -> np.ndarray:
    """The RGB gain of a light of ``kelvin`` relative to white (6500 K: (1, 1, 1)), from the
    black-body approximation used by photo tools (Tanner Helland's fit)."""
    return _blackbody(kelvin) / _blackbody(_WHITE_K)


def _blackbody(kelvin: float) -> np.ndarray:
    t = kelvin / 100.0
    if t <= 66:
        red, green = 255.0, 99.4708025861 * math.log(t) - 161.1195681661
    else:
        red = 329.698727446 * (t - 60) ** -0.1332047592
        green = 288.1221695283 * (t - 60) ** -0.0755148492
    if t >= 66:
        blue = 255.0
    else:
        blue = 0.0 if t <= 19 else 138.5177312231 * math.log(t - 10) - 305.0447927307
    return np.clip(np.array([red, green, blue]), 1.0, 255.0) / 255.0


def _turned(direction: np.ndarray, degrees: float, rng: np.random.Generator) -> np.ndarray:
    """``direction`` turned by up to ``degrees`` about a random axis."""
    axis = rng.normal(size=3)
    angle = math.radians(float(rng.uniform(0.0, degrees)))
    turn = np.empty(4)
    mujoco.mju_axisAngle2Quat(turn, axis / np.linalg.norm(axis), angle)
    out = np.empty(3)
    mujoco.mju_rotVecQuat(out, np.asarray(direction, float), turn)
    return out / np.linalg.norm(out)


def _axis_angle(rotation: np.ndarray) -> tuple[np.ndarray, float]:
    angle = float(np.linalg.norm(rotation))
    return (np.array([1.0, 0.0, 0.0]), 0.0) if angle == 0 else (rotation / angle, angle)


def _distractors(profile: RealismProfile, rng: np.random.Generator, world, taken) -> list:
    """Colours and places of the episode's distractors: on the table in the workspace, clear of
    every object (``_GAP``); fewer when no clear place is found."""
    low, high = profile.table.distractors
    count = int(rng.integers(low, high + 1)) if high > 0 else 0
    workspace = world.description.workspace
    taken = [np.asarray(p, float) for p in taken]
    chosen = []
    for _ in range(count):
        for _try in range(50):
            x = float(rng.uniform(workspace.x[0], workspace.x[1]))
            y = float(rng.uniform(workspace.y[0], workspace.y[1]))
            if all(math.hypot(x - p[0], y - p[1]) > _GAP for p in taken):
                color = str(rng.choice(sorted(DISTRACTOR_COLORS)))
                chosen.append((color, np.array([x, y, float(rng.uniform(0, math.pi))])))
                taken.append(np.array([x, y]))
                break
    return chosen
