"""Which device and which process of a distributed run this is.

A run started by ``torchrun`` or ``accelerate launch`` (``WORLD_SIZE`` > 1 in the environment,
with ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``: both launchers set them
the same way) joins torch's process group (NCCL on GPUs, gloo on CPUs); the model is then
wrapped in DistributedDataParallel and each process trains on its own share of every global
batch. A plain run is a world of one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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


# What ``accelerate launch`` hands its processes for its own ``Accelerator`` object to apply;
# this loop has none (the launcher only starts the processes): their switches are refused.
ACCELERATE_SWITCHES = {
    "ACCELERATE_MIXED_PRECISION": ("--mixed_precision", "no"),
    "ACCELERATE_DYNAMO_BACKEND": ("--dynamo_backend", "no"),
    "ACCELERATE_USE_DEEPSPEED": ("--use_deepspeed", "false"),
    "ACCELERATE_USE_FSDP": ("--use_fsdp", "false"),
    "ACCELERATE_USE_MEGATRON_LM": ("--use_megatron_lm", "false"),
}


def check_launcher(environ: Mapping[str, str]) -> None:
    """Refuse what ``accelerate launch`` was asked for that this training would not do (it
    trains in float32 with DistributedDataParallel, whatever the launcher)."""
    asked = [
        f"{flag} {environ[name]}"
        for name, (flag, off) in ACCELERATE_SWITCHES.items()
        if environ.get(name, off).strip().lower() not in (off, "")
    ]
    if asked:
        raise ConfigError(
            f"accelerate launch was asked for {', '.join(asked)}, which lang2policy's "
            "training does not do (float32, DistributedDataParallel): launch with "
            "--mixed_precision no --dynamo_backend no and no DeepSpeed, FSDP or Megatron-LM "
            "(the flags, or the accelerate config file)"
        )


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


def mean_over_ranks(values: list[float], context: DistContext) -> list[float]:
    """Each value's mean over the processes (every process must call this, in step)."""
    if not context.distributed or not values:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=context.device)
    dist.all_reduce(tensor)
    return (tensor / context.world_size).tolist()


def gather(value: torch.Tensor, context: DistContext) -> list[torch.Tensor]:
    """Every process's ``value``, by rank (every process must call this, in step)."""
    if not context.distributed:
        return [value]
    gathered: list[object] = [None] * context.world_size
    dist.all_gather_object(gathered, value)
    return [torch.as_tensor(item) for item in gathered]


def per_process_batch(global_batch: int, world_size: int) -> int:
    """A resumed run's batch a process: the saved run's global batch shared between
    ``world_size`` processes, so that the steps go on with the batches they had."""
    if global_batch % world_size:
        raise ConfigError(
            f"the run being resumed trained on {global_batch} frames a step, which "
            f"{world_size} processes cannot share evenly: resume it on a number of processes "
            f"that divides {global_batch}"
        )
    return global_batch // world_size
