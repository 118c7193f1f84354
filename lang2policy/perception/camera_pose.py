"""Where a camera is in the world: from the simulation model, or from a calibration YAML file.

A simulated fixed camera's pose is read from the compiled MuJoCo scene of the robot (the same
model ``World`` builds), so it can never drift from what the simulator renders. A real camera's
pose comes from a YAML file (``hardware/camera_<name>.yaml``, written by a calibration such as
an ArUco board on the table), in this format::

    # Pose of the camera's optical frame (x right, y down, z forward) in the world frame
    # (the robot base frame: z up, the table top at z = table_z).
    camera: top                            # optional; must match the node's camera name if set
    position: [0.21, 0.0, 0.62]            # optical centre, metres
    quat: [0.0, 0.7071068, -0.7071068, 0.0]  # rotation world <- optical frame, w x y z

``save_camera_pose`` writes exactly this format; ``CameraPose.from_rvec_tvec`` turns the
``cv2.solvePnP`` result of a board whose frame is the world frame into a ``CameraPose``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from lang2policy.config import read_yaml
from lang2policy.errors import ConfigError
from lang2policy.paths import share_dir
from lang2policy.perception.camera import CameraPose

# MuJoCo cameras look along -z with y up; the optical frame looks along +z with y down.
MUJOCO_TO_OPTICAL = np.diag([1.0, -1.0, -1.0])
_POSE_KEYS = {"camera", "position", "quat"}


def sim_camera_pose(robot: str, camera: str) -> CameraPose:
    """Pose of the fixed camera ``camera`` in the simulated scene of ``robot``."""
    import mujoco

    from lang2policy.perception.scene import scene_camera, scene_model

    model = scene_model(robot)
    cam = model.camera(scene_camera(robot, camera))
    if cam.bodyid[0] != 0 or cam.mode[0] != mujoco.mjtCamLight.mjCAMLIGHT_FIXED:
        names = [model.camera(i).name for i in range(model.ncam)]
        fixed = [n for n in names if model.camera(n).bodyid[0] == 0]
        raise ConfigError(
            f"camera '{camera}' moves with the robot; perception needs a fixed camera: {fixed}"
        )
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rotation = data.cam_xmat[cam.id].reshape(3, 3) @ MUJOCO_TO_OPTICAL
    return CameraPose(data.cam_xpos[cam.id].copy(), rotation)


def resolve_pose_path(path: str | Path) -> Path:
    """An absolute path as is; a relative one against the working directory, else the share
    directory (so ``hardware/camera_top.yaml`` works in a checkout and in an install)."""
    path = Path(path).expanduser()
    if path.is_absolute() or path.exists():
        return path
    return share_dir() / path


def load_camera_pose(path: str | Path, camera: str | None = None) -> CameraPose:
    """Read a camera pose YAML file (format in the module docstring)."""
    resolved = resolve_pose_path(path)
    data = read_yaml(resolved)
    unknown = sorted(set(data) - _POSE_KEYS)
    missing = sorted({"position", "quat"} - set(data))
    if unknown or missing:
        raise ConfigError(
            f"{resolved}: unknown keys {unknown}, missing keys {missing}; a camera pose file "
            f"has {sorted(_POSE_KEYS)} (camera optional)"
        )
    if camera is not None and data.get("camera", camera) != camera:
        raise ConfigError(f"{resolved} is the pose of camera '{data['camera']}', not '{camera}'")
    try:
        return CameraPose.from_quat(data["position"], data["quat"])
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConfigError(f"{resolved}: {exc}") from exc


def save_camera_pose(path: str | Path, pose: CameraPose, camera: str) -> Path:
    """Write ``pose`` of ``camera`` in the format ``load_camera_pose`` reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "camera": camera,
        "position": [round(float(v), 6) for v in pose.position],
        "quat": [round(float(v), 7) for v in pose.quat()],
    }
    header = (
        f"# Pose of camera '{camera}': optical frame (x right, y down, z forward) in the world\n"
        "# frame; position in metres, quat = rotation world <- optical frame (w, x, y, z).\n"
    )
    path.write_text(header + yaml.safe_dump(body, sort_keys=False, default_flow_style=None))
    return path
