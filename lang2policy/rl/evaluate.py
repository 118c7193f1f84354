"""Closed-loop evaluation of a shipped policy on goals it never saw, with an optional video.

Evaluation seeds start at ``EVAL_SEED`` (training draws goals from seeds below 10^6), so every
evaluated goal is one the policy was not trained on. The figures per episode: success (the
spec's own conditions), time to success, path smoothness (mean change of the joint targets
per step, rad) and control cost (``controllers.run_episode``: the unit ``bench rl`` compares
the MPC in).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lang2policy.rl.controllers import PolicyController, run_episode, summarise
from lang2policy.rl.env import CONTROL_PERIOD, RewardEnv
from lang2policy.rl.families import family as family_named
from lang2policy.rl.policy_file import MLPPolicy

EVAL_SEED = 1_000_000
VIDEO_CAMERA_DISTANCE = 0.75


def evaluate(policy: MLPPolicy, episodes: int = 20, first_seed: int = EVAL_SEED,
             video: str | Path | None = None, video_episodes: int = 3) -> dict:
    """Success rate and per-episode figures of ``policy`` on held-out goals."""
    env = RewardEnv(family_named(policy.family), policy.robot, near_start=0.0)
    recorder = _GoalVideo(env) if video else None
    controller, results = PolicyController(policy), []
    for i in range(episodes):
        frame = recorder.capture if recorder and i < video_episodes else None
        results.append(run_episode(env, controller, first_seed + i, frame))
    if recorder is not None:
        recorder.save(video)
    return summarise(results)


def _goal_point(env: RewardEnv) -> np.ndarray:
    """Where the goal is drawn: the goal's point; for a place the block's place in the bowl;
    for a lift the block's centre at the goal height above where it rests."""
    if env.goal.size >= 3:
        return np.asarray(env.goal[:3], float)
    objects = env.pm.features_now().objects
    names = env.spec.objects()
    if len(names) > 1:
        return objects[names[1]]["pos"].reshape(3) + np.array([0.0, 0.0, float(env.goal[0])])
    block = objects[names[0]]
    x, y = block["pos"].reshape(3)[:2]
    return np.array([x, y, float(block["rest_z"]) + float(env.goal[0])])


class _GoalVideo:
    """Frames of the arm from a free camera, the goal drawn as a green sphere."""

    def __init__(self, env: RewardEnv, size: int = 320) -> None:
        import mujoco

        self.env = env
        self.renderer = mujoco.Renderer(env.pm.model, height=size, width=size)
        self.camera = mujoco.MjvCamera()
        self.camera.lookat[:] = (0.15, 0.0, 0.05)
        self.camera.distance, self.camera.azimuth, self.camera.elevation = (
            VIDEO_CAMERA_DISTANCE, 150.0, -25.0)
        self.frames: list[np.ndarray] = []

    def capture(self, env: RewardEnv) -> None:
        import mujoco

        self.renderer.update_scene(env.pm.data, camera=self.camera)
        scene = self.renderer.scene
        if scene.ngeom < scene.maxgeom:
            mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE,
                                np.array([0.012, 0, 0]), _goal_point(env),
                                np.eye(3).ravel(), np.array([0.1, 0.8, 0.2, 0.8], np.float32))
            scene.ngeom += 1
        self.frames.append(self.renderer.render().copy())

    def save(self, path: str | Path) -> None:
        from lang2policy.scene.render import write_mp4

        if self.frames:
            write_mp4(self.frames, path, fps=round(1 / CONTROL_PERIOD))
        self.renderer.close()
