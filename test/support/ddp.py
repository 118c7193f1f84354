"""Two-process DDP runs on the CPU (gloo) for the training tests: a free loopback port and the
environment ``torchrun`` would give each rank."""

from __future__ import annotations

import os
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_environment(rank: int, port: int, world_size: int = 2) -> None:
    """Set this process's variables as the standard torch launcher sets them for ``rank``."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.update(WORLD_SIZE=str(world_size), RANK=str(rank), LOCAL_RANK=str(rank))


def spawn_ranks(worker, *args, nprocs: int = 2) -> None:
    """``torch.multiprocessing.spawn`` of ``worker(rank, *args)``, a function of a test module.

    pytest imports test modules by file path (``--import-mode=importlib``), under names a
    spawned child cannot import, so a worker is not pickled by reference: each child loads the
    worker's file by path and calls it (what ``spawn`` would do for an importable module)."""
    import torch.multiprocessing

    code = worker.__code__
    torch.multiprocessing.spawn(
        _run_from_file, args=(code.co_filename, worker.__name__, args), nprocs=nprocs
    )


def _run_from_file(rank: int, path: str, name: str, args: tuple) -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(f"_spawned_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    getattr(module, name)(rank, *args)


def write_demos(root, episodes: int = 8, length: int = 20):
    """A recorded dataset on disk (``DatasetWriter``, real H.264) of ``synthetic_frames`` at
    the recorded image size, for the command line under the real launchers; returns ``root``."""
    from lang2policy.vla.dataset import DatasetWriter, EpisodeRecord
    from lang2policy.vla.spec.schema import IMAGE_SIZE
    from lang2policy.vla.train.synthetic import synthetic_frames

    frames = synthetic_frames(episodes=episodes, length=length, image_size=IMAGE_SIZE)
    with DatasetWriter(root, extra_episode_columns=("success", "split")) as writer:
        for episode in frames.episodes:
            rows = slice(episode["from"], episode["to"])
            writer.add_episode(
                EpisodeRecord(
                    task=episode["task"],
                    images={camera: images[rows] for camera, images in frames.images.items()},
                    state=frames.state[rows],
                    action=frames.action[rows],
                    extra={"success": True, "split": "train"},
                )
            )
    return root


def launcher_environment() -> dict:
    """The environment for a launcher started by a test: this checkout's package first (the
    processes import ``lang2policy.cli`` by module name)."""
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": repo + (os.pathsep + path if path else "")}
