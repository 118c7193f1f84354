"""Write a LeRobot v3 dataset with LeRobot's own writer from ``render_arm_frames.py``'s frames.

Runs in LeRobot's environment (``.venv-lerobot``, ``scripts/lerobot_env.sh``): what
``lerobot-record`` would have written for an SO-101 follower with a 640 x 480 front camera at
30 fps, state and action in LeRobot's units (``<motor>.pos``: degrees, gripper 0..100).

    .venv-lerobot/bin/python scripts/lerobot_fixtures/write_dataset.py /tmp/frames.npz OUT_DIR
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
TASK = "sweep the arm"


def features(height: int, width: int) -> dict:
    """The features ``lerobot-record`` declares for an SO-101 follower and one camera."""
    names = [f"{motor}.pos" for motor in MOTORS]
    vector = {"dtype": "float32", "shape": (len(names),), "names": names}
    return {
        "observation.state": vector,
        "action": dict(vector),
        "observation.images.front": {
            "dtype": "video",
            "shape": (height, width, 3),
            "names": ["height", "width", "channels"],
        },
    }


def write(frames: Path, out: Path) -> LeRobotDataset:
    data = np.load(frames)
    images = data["images"]
    if out.exists():
        shutil.rmtree(out)
    dataset = LeRobotDataset.create(
        repo_id="lang2policy/so101_lerobot_writer",
        fps=int(data["fps"]),
        features=features(*images.shape[1:3]),
        root=out,
        robot_type="so101_follower",
        use_videos=True,
    )
    episodes = data["episode_index"]
    for episode in np.unique(episodes):
        for row in np.flatnonzero(episodes == episode):
            dataset.add_frame(
                {
                    "observation.state": data["state_lerobot"][row],
                    "action": data["action_lerobot"][row],
                    "observation.images.front": images[row],
                    "task": TASK,
                }
            )
        dataset.save_episode()
    dataset.finalize()
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("frames", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    dataset = write(args.frames, args.out)
    print(f"LeRobot wrote {dataset.meta.total_episodes} episodes, {dataset.meta.total_frames} "
          f"frames at {dataset.meta.fps} fps -> {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
