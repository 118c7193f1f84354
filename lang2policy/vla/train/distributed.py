"""Which device and which process of a distributed run this is.

A run started by ``torchrun`` (``WORLD_SIZE`` > 1 in the environment) joins torch's process
group (NCCL on GPUs, gloo on CPUs); the model is then wrapped in DistributedDataParallel and
each process trains on its own share of every epoch. A plain run is a world of one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from lang2policy.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")
# Rank 0 alone runs the closed-loop evaluation while the others wait in their next all-reduce.
GROUP_TIMEOUT = timedelta(hours=2)


@dataclass(frozen=True)
class DistContext:
    """This process's place in the run."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """The process that logs, evaluates and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto``: the GPU when one is present, else the CPU; ``cuda`` fails without one."""
    if name not in DEVICES:
        raise ConfigError(f"unknown device {name!r}; devices: {list(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for, but torch sees no CUDA GPU")
    if name == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def start(device: str) -> DistContext:
    """Join the process group when started by ``torchrun``; otherwise a world of one."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    resolved = resolve_device(device, local_rank)
    if world_size <= 1:
        return DistContext(resolved)
    if resolved.type == "cuda":
        torch.cuda.set_device(resolved)
    backend = "nccl" if resolved.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=GROUP_TIMEOUT)
    return DistContext(resolved, dist.get_rank(), dist.get_world_size(), local_rank)


def stop(context: DistContext, wait: bool = True) -> None:
    """Leave the process group, after every process has finished (``wait``; a process that
    failed leaves at once: the others would wait for it in vain)."""
    if context.distributed and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()
