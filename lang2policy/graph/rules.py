"""What makes a set of graph options valid: the allowed values and the checks that
``GraphOptions`` (``lang2policy.graph.options``) runs on construction.

Kept apart from the options table so that the table reads as data; every error names the
allowed values. Pure: no ROS import.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from lang2policy import paths
from lang2policy.errors import ConfigError
from lang2policy.graph import topics
from lang2policy.perception.palette import load_palette
from lang2policy.realism import load_realism

MODES = ("sim", "robot")
PERCEPTION_MODES = ("ground_truth", "camera")
RECORD_MODES = ("episode", "session")
DRIVERS = ("ros2_control", "so101")
ROUTES = ("auto", "code", "reward", "skill")  # the plan kind: per instruction, or fixed
GROUNDING = ("on", "off")  # code plans grounded in the scene and catalog, or decoded freely
CONTROLLERS = ("mpc", "rl")  # what runs reward plans: the MPC, or RL policies where they serve
LLM_KINDS = ("local", "openai")
LLM_FILE_KINDS = ("replay", "record", "cache")
DEFAULT_PORT = "/tmp/lang2policy-so101"  # the emulator's port link when none is given
# An arm of a fleet is a ROS namespace of one token (``/arm1/...``).
ARM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
MAX_DOMAIN_ID = 232  # the largest ROS_DOMAIN_ID (Fast DDS / Cyclone DDS port arithmetic)


class GraphOptionRules:
    """The checks and derived values of ``GraphOptions`` (its generated dataclass inherits
    them): the fields are the options table's."""

    def __post_init__(self) -> None:
        choice("mode", self.mode, MODES)
        choice("robot", self.robot, available_robots())
        choice("perception", self.perception_mode, PERCEPTION_MODES)
        choice("record_mode", self.record_mode, RECORD_MODES)
        choice("route", self.route, ROUTES)
        choice("grounding", self.grounding, GROUNDING)
        choice("controller", self.controller, CONTROLLERS)
        check_llm(self.llm)
        load_realism(self.realism)  # a level or a readable, valid file: said before anything starts
        self._check_palette()
        if self.record is not None and not str(self.record).strip():
            raise ConfigError("record: give an output directory, or None to not record")
        if not (isinstance(self.rtf, int | float) and math.isfinite(self.rtf) and self.rtf > 0):
            raise ConfigError(f"rtf (real-time factor) must be a number > 0, got {self.rtf!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, got {self.seed!r}")
        for name in self.objects:
            if not isinstance(name, str) or not name.strip() or "," in name:
                raise ConfigError(f"objects: {name!r} is not an object name like 'red block'")
        for camera in self.record_cameras:
            if not camera or "/" in camera:
                raise ConfigError(f"record_cameras: {camera!r} is not a camera name")
        self._check_fleet()
        if self.mode == "sim":
            self._check_sim()
        else:
            self._check_robot()
        if self.vla:
            self._check_vla()
        elif self.route == "skill":
            raise ConfigError("route 'skill' runs skill plans on the VLA: add vla:=true (--vla)")

    def _check_fleet(self) -> None:
        """``arms``: valid, distinct ROS namespace names (one on a robot: a launch per arm);
        ``domain_id``: "" or a ROS domain id."""
        for arm in self.arms:
            if not ARM_NAME.fullmatch(arm):
                raise ConfigError(
                    f"arms: {arm!r} is not an arm name (a ROS namespace: a letter, then "
                    "letters, digits or _; e.g. arm1)"
                )
        if len(set(self.arms)) != len(self.arms):
            raise ConfigError(f"arms: each arm once, got {list(self.arms)}")
        if self.mode == "robot" and len(self.arms) > 1:
            raise ConfigError(
                "arms: a robot graph drives one arm (its own port or controllers): start one "
                "launch per arm, each with arms:=<its name>"
            )
        domain = str(self.domain_id).strip()
        if domain and not (domain.isdigit() and int(domain) <= MAX_DOMAIN_ID):
            raise ConfigError(
                f"domain_id must be empty (ROS_DOMAIN_ID as set) or 0 to {MAX_DOMAIN_ID}, "
                f"got {self.domain_id!r}"
            )

    def _check_palette(self) -> None:
        if not self.palette:
            return
        if self.perception_mode != "camera":
            raise ConfigError("palette: colours are for camera perception; add --perception camera")
        load_palette(self.palette)  # a readable, valid file: said before anything starts

    @property
    def perception_mode(self) -> str:
        """The perception source: the option, or ground truth in sim (and on the emulated
        SO-101), cameras on a robot."""
        if self.perception is not None:
            return self.perception
        return "ground_truth" if self.mode == "sim" or self.emulate else "camera"

    @property
    def so101_port(self) -> str:
        """The port the SO-101 driver opens (the emulator's link by default)."""
        return self.port or DEFAULT_PORT

    def _check_sim(self) -> None:
        if self.perception_mode == "camera" and not self.cameras:
            raise ConfigError("perception 'camera' needs the sim cameras; do not turn them off")

    def _check_vla(self) -> None:
        from lang2policy.vla.backends.select import parse_backend  # only when the VLA runs

        if parse_backend(self.vla_backend).kind == "lerobot" and not self.vla_lerobot_checkpoint:
            raise ConfigError(
                "vla_backend lerobot:// needs the policy's checkpoint: vla_lerobot_checkpoint "
                "(--vla-lerobot-checkpoint DIR; `lang2policy vla-serve --lerobot DIR` prints it)"
            )
        if self.robot != "so101":
            raise ConfigError(f"vla: the VLA drives the so101, not {self.robot!r}")
        if self.mode == "sim" and not self.cameras:
            raise ConfigError("vla needs the sim cameras (front, wrist); do not turn them off")

    def _check_robot(self) -> None:
        choice("driver", self.driver, DRIVERS)
        if self.driver == "so101":
            self._check_so101()
        elif self.port or self.emulate:
            raise ConfigError("port and emulate belong to driver 'so101' (the serial SO-101)")
        if self.joint_map:
            self._check_joint_map()
        self._check_camera()
        if self.perception_mode == "ground_truth" and not self.emulate:
            raise ConfigError(
                "perception 'ground_truth' exists only in simulation (or on the emulated "
                "SO-101); a robot uses 'camera'"
            )
        for name in ("trajectory_topic", "joint_states_topic"):
            topic = getattr(self, name)
            if not topic.startswith("/") or " " in topic:
                raise ConfigError(f"{name} must be an absolute topic name, got {topic!r}")

    def _check_camera(self) -> None:
        if not self.camera_name or "/" in self.camera_name or " " in self.camera_name:
            raise ConfigError(f"camera_name: {self.camera_name!r} is not a camera name")
        for name in ("camera_intrinsics", "camera_pose"):
            path = getattr(self, name)
            if path and not Path(path).is_file():
                raise ConfigError(f"{name}: file not found: {path}")

    def _check_joint_map(self) -> None:
        from lang2policy.hardware import load_joint_map  # compiles the robot model: lazily

        if self.driver != "ros2_control":
            raise ConfigError("joint_map belongs to driver 'ros2_control'")
        arm_topics = (self.trajectory_topic, self.joint_states_topic)
        if arm_topics != (topics.TRAJECTORY.name, topics.JOINT_STATES.name):
            raise ConfigError(
                "give either joint_map or trajectory_topic/joint_states_topic: the joint map "
                "names the arm's topics"
            )
        joint_map = load_joint_map(self.joint_map)
        if joint_map.robot != self.robot:
            raise ConfigError(
                f"joint map {self.joint_map!r} is for robot {joint_map.robot!r}, not "
                f"{self.robot!r}; pass robot {joint_map.robot!r}"
            )

    def _check_so101(self) -> None:
        if self.robot != "so101":
            raise ConfigError(f"driver 'so101' drives the so101 robot, not {self.robot!r}")
        if not self.port and not self.emulate:
            raise ConfigError(
                "driver 'so101' needs port: the servo bus's serial port (e.g. /dev/ttyACM0), "
                "or emulate to run on the emulated arm"
            )
        if self.port and not self.port.startswith("/"):
            raise ConfigError(f"port must be an absolute device path, got {self.port!r}")


def available_robots() -> tuple[str, ...]:
    """Robot descriptions under config/robots/."""
    return tuple(sorted(p.stem for p in (paths.config_dir() / "robots").glob("*.yaml")))


def check_llm(llm: str) -> None:
    """``local``, ``openai`` or ``replay|record|cache:FILE``; a replay file must exist."""
    kind, colon, path = str(llm).partition(":")
    valid = f"valid: {', '.join(LLM_KINDS)}, " + ", ".join(f"{k}:FILE" for k in LLM_FILE_KINDS)
    if kind in LLM_KINDS and not colon:
        return
    if kind not in LLM_FILE_KINDS or not path:
        raise ConfigError(f"unknown llm {llm!r}; {valid}")
    if kind == "replay" and not Path(path).is_file():
        raise ConfigError(f"llm {llm!r}: replay file not found: {path}")


def choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    """``value`` is one of ``allowed``, or an error naming them."""
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {list(allowed)}, got {value!r}")
