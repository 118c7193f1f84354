"""Robot descriptions: which MJCF to load and how the world uses it (config/robots/<name>.yaml).

Joint names and limits are read from the compiled model, never listed here; a description only
says where the model comes from, where it is mounted, which site is the tool centre point, how
the gripper maps to actuator commands, the home posture and the reachable workspace.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path

from lang2policy.config import load_dataclass, read_yaml
from lang2policy.errors import ConfigError
from lang2policy.paths import config_dir, share_dir


@dataclass(frozen=True)
class GripperConfig:
    """Gripper actuators and their control values when fully open and fully closed."""

    actuators: list[str]
    open: float
    closed: float


@dataclass(frozen=True)
class WorkspaceConfig:
    """Where objects may be placed and targets reached, in the world frame (metres)."""

    x: tuple[float, float]
    y: tuple[float, float]
    min_radius: float
    max_radius: float
    # Most objects a layout may put on the table for this arm (small arms have little room).
    max_objects: int = 8


@dataclass(frozen=True)
class ObjectSizes:
    """Object dimensions scaled to the arm (an SO-101 handles smaller blocks than a Panda)."""

    block_half: float  # half a block's edge (m)
    bowl_radius: float  # radius of a bowl (m)
    bowl_height: float  # height of a bowl (m)


@dataclass(frozen=True)
class CameraConfig:
    """A camera of the scene: where it is and what it looks at (world frame)."""

    pos: tuple[float, float, float]
    # Point the camera looks at (world frame); ignored when ``xyaxes`` is set.
    target: tuple[float, float, float] = (0.0, 0.0, 0.0)
    xyaxes: tuple[float, float, float, float, float, float] | None = None
    fovy: float = 45.0
    body: str = ""  # empty: fixed in the world; otherwise mounted on this robot body


@dataclass(frozen=True)
class GraspConfig:
    """Heights used by pick and place, relative to the object (metres)."""

    approach_height: float
    # How far above the object's centre the tool centre point goes when grasping.
    grasp_offset: float
    # Preferred grasp yaw relative to the radial direction from the base (radians); the yaw
    # actually used is the one closest to it that aligns the jaws with the object's faces.
    yaw_offset: float
    # Where a grasped object's centre sits, in the ee site's frame (asymmetric jaws need this).
    center_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    # Tilts (radians, leaning away from the base) tried in order when top-down is out of reach.
    tilts: tuple[float, ...] = (0.0,)
    # Gripper opening (0..1) before a grasp: wide enough for the object, not wider.
    pre_grasp_opening: float = 1.0


@dataclass(frozen=True)
class RobotDescription:
    name: str
    # "pkg:<python package>/<path>" for a model shipped inside a wheel, else a path under sim/.
    mjcf: str
    base_pos: tuple[float, float, float]
    ee_site: str
    # Unit vector, in the ee site's frame, that points out of the gripper (the approach axis).
    approach_axis: tuple[float, float, float]
    gripper: GripperConfig
    home: dict[str, float]
    workspace: WorkspaceConfig
    objects: ObjectSizes
    grasp: GraspConfig
    cameras: dict[str, CameraConfig]
    max_joint_speed: float
    # rad/s^2: the largest deceleration of an arm joint when a stop brings it to rest along its
    # command (``TrajectoryFollower.stop``); see config/robots/<name>.yaml for each value's source.
    max_joint_acceleration: float = 10.0
    # rad: on a stop, a joint whose measured position is farther than this from its target
    # holds the measured position instead (a blocked arm is relaxed, not driven on); above the
    # servo's lag at max_joint_speed.
    hold_tolerance: float = 0.1
    rename: dict[str, str] = field(default_factory=dict)
    # Compensate gravity on the arm's links (stiff industrial servos barely sag; the simulated
    # low-gain position servos would sag by centimetres without it).
    gravity_compensation: bool = True
    # Geoms whose collision bits are set to 1/1 (e.g. fingertip pads shipped inert).
    enable_collision: list[str] = field(default_factory=list)
    # Extra friction on the gripper's contact geoms (sliding, torsional, rolling).
    finger_friction: tuple[float, float, float] = (1.5, 0.01, 0.0001)
    # The arm out of the overhead camera's view of the table (the scene is judged from it);
    # empty: ``home``.
    look: dict[str, float] = field(default_factory=dict)


def available_robots() -> list[str]:
    return sorted(p.stem for p in (config_dir() / "robots").glob("*.yaml"))


def load_robot_description(name: str) -> RobotDescription:
    """Load config/robots/<name>.yaml; an unknown name lists the robots that exist."""
    path = config_dir() / "robots" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown robot '{name}'; available robots: {available_robots()}")
    description = load_dataclass(RobotDescription, read_yaml(path), str(path))
    for key in ("max_joint_speed", "max_joint_acceleration", "hold_tolerance"):
        value = getattr(description, key)
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{path}: {key} must be a finite number > 0, got {value!r}")
    return description


def resolve_mjcf(ref: str) -> Path:
    """Turn an ``mjcf`` reference into a file path, checking that the file exists."""
    if ref.startswith("pkg:"):
        package, _, rel = ref[4:].partition("/")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"robot model package '{package}' is not installed (needed for {ref}); "
                "run scripts/setup.sh"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / rel
    else:
        path = share_dir() / ref
    if not path.is_file():
        raise ConfigError(f"robot model file not found: {path} (from '{ref}')")
    return path


def package_dir(package: str) -> Path:
    """Directory of an installed Python package (used to locate meshes inside wheels)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"package '{package}' is not installed; run scripts/setup.sh")
    return Path(next(iter(spec.submodule_search_locations)))
