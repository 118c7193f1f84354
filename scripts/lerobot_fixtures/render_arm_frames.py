"""Frames of the simulated SO-101 moving, in LeRobot's units, for ``write_dataset.py``.

Runs in our environment (``.venv``). The arm follows smooth joint sweeps; every ``1 / fps`` s
the front camera is rendered at ``--width x --height`` and the joints are read. State and
action (the next frame's target) are written both in our units (radians, gripper 0..1) and in
LeRobot's (degrees about the middle of each range, gripper 0..100) through ``--calibration``
(a ``lerobot-calibrate`` file, its calibration pose taken as the model's zero), so the dataset
LeRobot's writer makes from them is what an SO-101 recorded with ``lerobot-record`` holds.

    .venv/bin/python scripts/lerobot_fixtures/render_arm_frames.py --out /tmp/frames.npz
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

from lang2policy.robots.so101.lerobot_calibration import (
    action_to_lerobot,
    from_lerobot,
    read_lerobot_calibration,
)
from lang2policy.scene.render import CameraRenderer
from lang2policy.scene.world import World

HERE = Path(__file__).resolve().parent
DEFAULT_CALIBRATION = HERE.parents[1] / "test" / "fixtures" / "lerobot" / "so101_follower.json"
AMPLITUDE = np.array([0.5, 0.35, 0.4, 0.45, 0.8])  # rad, per arm joint


def targets(episode: int, steps: int, fps: int, home: np.ndarray) -> np.ndarray:
    """``(steps + 1, 6)`` joint targets: sweeps about home, a different phase per episode."""
    t = np.arange(steps + 1)[:, None] / fps
    phase = 0.9 * episode + np.arange(5)[None, :]
    arm = home[None, :] + AMPLITUDE * np.sin(2 * np.pi * 0.5 * t + phase)
    gripper = 0.5 + 0.4 * np.sin(2 * np.pi * 0.25 * t[:, 0] + episode)
    return np.column_stack([arm, gripper]).astype(np.float32)


def record(args: argparse.Namespace) -> dict[str, np.ndarray]:
    world = World("so101")
    renderer = CameraRenderer(world.model, args.width, args.height)
    motors = read_lerobot_calibration(args.calibration)
    calibration = from_lerobot(motors, accept_calibration_pose=True)
    images, states, actions, episode_index = [], [], [], []
    for episode in range(args.episodes):
        world.reset(episode)
        goal = targets(episode, args.frames, args.fps, world.arm_qpos())
        for step in range(args.frames):
            world.set_arm_targets(goal[step, :5], float(goal[step, 5]))
            world.step_seconds(1.0 / args.fps)
            images.append(renderer.render(world.data, "front"))
            states.append(np.append(world.arm_qpos(), world.gripper_opening()))
            actions.append(goal[step + 1])
            episode_index.append(episode)
    renderer.close()

    def lerobot(rows: list) -> np.ndarray:
        return np.array(
            [list(action_to_lerobot(motors, calibration, row).values()) for row in rows],
            np.float32,
        )

    return {
        "images": np.stack(images),
        "state_rad": np.array(states, np.float32),
        "action_rad": np.array(actions, np.float32),
        "state_lerobot": lerobot(states),
        "action_lerobot": lerobot(actions),
        "episode_index": np.array(episode_index, np.int64),
        "fps": np.array(args.fps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION)
    args = parser.parse_args()
    arrays = record(args)
    np.savez_compressed(args.out, **arrays)
    print(f"{len(arrays['images'])} frames {arrays['images'].shape[1:]} -> {args.out}")


if __name__ == "__main__":
    main()
