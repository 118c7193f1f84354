"""A synthetic demonstration dataset and instruction encoder, for tests and measurements.

Each episode follows one of a few instructions; the arm moves by a fixed per-instruction step
every frame (``action = state + step``, the next state is the action), so the action chunk is a
learnable function of the state and the instruction. Images are random: they carry nothing,
which keeps the check on learning about the state and language paths. With ``environment``
the frames also carry a scene state (the first two joints and a per-instruction goal) for the
auxiliary head. ``hash_encoder`` stands in
for MiniLM: a fixed pseudo-random vector per string, with no model to load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from lang2policy.vla.model.language import Encoder
from lang2policy.vla.model.network import VLAConfig
from lang2policy.vla.spec.schema import ACTION_KEY, CAMERAS, ENV_KEY, STATE_DIM, STATE_KEY
from lang2policy.vla.train.batches import FrameArrays

INSTRUCTIONS = ("move left", "move right", "lift the arm")
HASH_ENCODER = "hash (tests)"  # the language_model name of configs meant for hash_encoder


def hash_encoder(dim: int = 8) -> Encoder:
    """An encoder giving every string its own fixed unit vector (``float32 [n, dim]``)."""

    def encode(texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            row = np.random.default_rng(seed).standard_normal(dim)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, np.float32).reshape(len(texts), dim)

    return encode


def tiny_config(**overrides: object) -> VLAConfig:
    """A network small enough to train in seconds (32 px images, 8-d ``hash_encoder``)."""
    sizes = dict(image_size=32, channels=(8, 8, 16, 16), groups=4)
    sizes.update(language_model=HASH_ENCODER, language_dim=8)
    sizes.update(film_dim=32, head_dim=64, chunk=4)
    sizes.update(overrides)
    return VLAConfig(**sizes)


def synthetic_frames(
    episodes: int = 12,
    length: int = 20,
    image_size: int = 32,
    cameras: Sequence[str] = CAMERAS,
    failed: Sequence[int] = (),
    seed: int = 0,
    environment: bool = False,
) -> FrameArrays:
    """``episodes`` episodes of ``length`` frames; those numbered in ``failed`` marked failed."""
    rng = np.random.default_rng(seed)
    steps = 0.1 * rng.standard_normal((len(INSTRUCTIONS), STATE_DIM)).astype(np.float32)
    states, task_index, table = [], [], []
    for episode in range(episodes):
        task = episode % len(INSTRUCTIONS)
        start = rng.uniform(-1, 1, STATE_DIM).astype(np.float32)
        states.append(start + np.arange(length + 1)[:, None] * steps[task])
        task_index.append(np.full(length, task))
        table.append(
            {
                "index": episode,
                "length": length,
                "from": episode * length,
                "to": (episode + 1) * length,
                "task": INSTRUCTIONS[task],
                "success": episode not in failed,
                "split": "train",
            }
        )
    state = np.concatenate([s[:-1] for s in states]).astype(np.float32)
    action = np.concatenate([s[1:] for s in states]).astype(np.float32)
    count = episodes * length
    shape = (count, image_size, image_size, 3)
    tasks = np.concatenate(task_index)
    scene = None
    stats = {
        STATE_KEY: {"mean": state.mean(0), "std": state.std(0)},
        ACTION_KEY: {"mean": action.mean(0), "std": action.std(0)},
    }
    if environment:
        scene = np.concatenate([state[:, :2], 10 * steps[tasks, :2]], axis=1).astype(np.float32)
        stats[ENV_KEY] = {"mean": scene.mean(0), "std": scene.std(0)}
    return FrameArrays(
        images={c: rng.integers(0, 256, shape, dtype=np.uint8) for c in cameras},
        state=state,
        action=action,
        episode_index=np.repeat(np.arange(episodes), length),
        frame_index=np.tile(np.arange(length), episodes),
        task_index=tasks,
        tasks=list(INSTRUCTIONS),
        episodes=table,
        stats=stats,
        environment=scene,
    )
