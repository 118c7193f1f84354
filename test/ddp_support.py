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
