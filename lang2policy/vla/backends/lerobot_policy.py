"""Which LeRobot policy our VLA node asks LeRobot's policy server to run, and in which units.

LeRobot's async-inference server loads the policy the *client* names (``RemotePolicyConfig``:
type, checkpoint path as the server sees it, device, actions per chunk, the robot's features),
so this is our side of that setup. ``from_checkpoint`` reads what a local checkpoint says of
itself (``pretrained_model/config.json``: its ``type`` and its image inputs), bounded and
checked, so a user names only the directory.

Units: a policy trained on a LeRobot recording of the SO-101 reads and writes LeRobot's units
(``<motor>.pos``: degrees about each range's middle, gripper 0..100); one trained on our own
datasets (``record demos``), ours (radians, gripper 0..1, our names). ``calibration`` (a
``lerobot-calibrate`` JSON or ours) selects LeRobot's; None, ours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.robots.so101.lerobot_calibration import (
    action_to_lerobot,
    lerobot_motors,
    load_calibration,
    to_lerobot,
)
from lang2policy.vla.backends.lerobot_wire import SUPPORTED_POLICIES
from lang2policy.vla.dataset.lerobot_units import to_our_units
from lang2policy.vla.spec.loader_limits import REMOTE_MAX_CHUNK_ROWS
from lang2policy.vla.spec.schema import STATE_NAMES

MAX_CONFIG_BYTES = 256 * 1024
MAX_PATH_CHARS = 4096
IMAGE_PREFIX = "observation.images."
DEVICES = ("cpu", "cuda", "mps")


@dataclass(frozen=True)
class LeRobotPolicySpec:
    """What ``SendPolicyInstructions`` asks the server to load, and the units it speaks."""

    policy_type: str
    checkpoint: str
    cameras: tuple[str, ...] = ("front",)
    device: str = "cpu"
    actions_per_chunk: int = 10
    calibration: str | None = None
    fps: int | None = None  # the rate the policy was trained at (None: unknown)

    def __post_init__(self) -> None:
        if self.policy_type not in SUPPORTED_POLICIES:
            raise ConfigError(f"LeRobot policy type {self.policy_type!r:.40} is not one its "
                              f"server runs: {list(SUPPORTED_POLICIES)}")  # fmt: skip
        if not isinstance(self.checkpoint, str) or not 0 < len(self.checkpoint) <= MAX_PATH_CHARS:
            raise ConfigError(f"a LeRobot checkpoint is a path of 1..{MAX_PATH_CHARS} characters")
        if self.device.split(":")[0] not in DEVICES:
            raise ConfigError(f"device must be one of {DEVICES} (cuda:N too), got {self.device!r}")
        if not 1 <= self.actions_per_chunk <= REMOTE_MAX_CHUNK_ROWS:
            raise ConfigError(f"actions per chunk must be 1..{REMOTE_MAX_CHUNK_ROWS}, got "
                              f"{self.actions_per_chunk!r}")  # fmt: skip
        if self.fps is not None and not 1 <= self.fps <= 1000:
            raise ConfigError(f"fps must be 1..1000, got {self.fps!r}")
        if not self.cameras or not all(isinstance(c, str) and c for c in self.cameras):
            raise ConfigError(f"cameras must be names, got {self.cameras!r:.80}")

    @classmethod
    def from_checkpoint(cls, checkpoint: str | Path, **options: object) -> LeRobotPolicySpec:
        """The spec of a LeRobot checkpoint on this machine: its type and cameras from its
        ``config.json`` (``options`` set the rest)."""
        config = read_policy_config(Path(checkpoint))
        cameras = tuple(
            key.removeprefix(IMAGE_PREFIX)
            for key in config.get("input_features", {})
            if key.startswith(IMAGE_PREFIX)
        )
        options.setdefault("fps", training_fps(Path(checkpoint)))
        return cls(str(config["type"]), str(Path(checkpoint).resolve()),
                   cameras=cameras or ("front",), **options)  # type: ignore[arg-type]  # fmt: skip


def training_fps(checkpoint: Path) -> int | None:
    """The fps of the dataset the policy was trained on, when this machine has it: LeRobot
    checkpoints do not record it, but ``train_config.json`` names the dataset's root, whose
    ``meta/info.json`` does. None when either is missing or unreadable."""
    try:
        train = _small_json(checkpoint / "train_config.json")
        root = Path(str(train["dataset"]["root"]))
        fps = _small_json(root / "meta" / "info.json")["fps"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return fps if type(fps) is int and 1 <= fps <= 1000 else None


def _small_json(path: Path) -> dict:
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"{path} is over {MAX_CONFIG_BYTES} bytes")
    data = json.loads(path.read_text("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


def read_policy_config(checkpoint: Path) -> dict:
    """A LeRobot checkpoint's ``config.json`` (bounded), with its ``type``."""
    path = checkpoint / "config.json"
    if not path.is_file():
        raise ConfigError(
            f"{checkpoint} is not a LeRobot checkpoint: it has no config.json "
            "(lerobot-train writes .../checkpoints/last/pretrained_model/)"
        )
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is over {MAX_CONFIG_BYTES} bytes; not a policy config")
    try:
        config = json.loads(path.read_text("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        raise ConfigError(f"{path} names no policy 'type' (act, diffusion, smolvla, pi0 ...)")
    if not isinstance(config.get("input_features", {}), dict):
        raise ConfigError(f"{path}: input_features must be a mapping")
    return config


class PolicyUnits:
    """Our state to what the policy reads (raw observation values by name), and its action
    rows back to ours."""

    def __init__(self, calibration: str | None) -> None:
        self.calibration = calibration
        self._ours = None if calibration is None else load_calibration(calibration, True)
        self._motors = None if self._ours is None else lerobot_motors(to_lerobot(self._ours))

    @property
    def names(self) -> list[str]:
        """The state's names as the policy's features list them."""
        suffix = "" if self._ours is None else ".pos"
        return [name + suffix for name in STATE_NAMES]

    def observation(self, state: np.ndarray) -> dict[str, float]:
        """``state`` (ours, float32 [6]) by the policy's names, in its units."""
        if self._ours is None:
            values: Mapping[str, float] = dict(zip(STATE_NAMES, state.tolist(), strict=True))
        else:
            values = action_to_lerobot(self._motors, self._ours, state.tolist())  # type: ignore[arg-type]
        return {name: float(values[name.removesuffix(".pos")]) for name in self.names}

    def actions(self, rows: np.ndarray) -> np.ndarray:
        """The policy's action rows ``[chunk, 6]`` (its units) in ours."""
        if self._ours is None:
            return rows
        return to_our_units(rows, self._ours, self._motors)  # type: ignore[arg-type]
