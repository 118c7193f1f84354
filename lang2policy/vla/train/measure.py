"""Size and speed of the VLA network on this machine: ``python -m lang2policy.vla.train.measure``.

Prints the parameter count, the size of its ``model.safetensors``, the latency of one forward
pass at batch 1 (what the runtime policy pays per chunk) and the training throughput at a
batch of 64 (samples/s, augmentation included) on synthetic data, all with ``--threads``
torch threads.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from lang2policy.vla.model.checkpoint import WEIGHTS_FILE, save_model_dir
from lang2policy.vla.model.network import VLAConfig, VLANet, example_inputs, parameter_count
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.train.augment import AugmentConfig
from lang2policy.vla.train.batches import BatchMaker, batch_indices, episode_ends
from lang2policy.vla.train.distributed import DistContext, resolve_device
from lang2policy.vla.train.loop import OptimConfig, Trainer
from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames


def safetensors_bytes(model: VLANet) -> int:
    """The size of the model's weights file."""
    with tempfile.TemporaryDirectory() as folder:
        normalizer = Normalizer.from_arrays(np.zeros((2, 6)), np.zeros((2, 6)))
        save_model_dir(Path(folder), model, normalizer)
        return (Path(folder) / WEIGHTS_FILE).stat().st_size


def inference_ms(model: VLANet, device: torch.device, calls: int = 200) -> dict[str, float]:
    """Forward-pass latency at batch 1: p50 and p90 in ms."""
    inputs = [x.to(device) for x in example_inputs(model.config, batch=1)]
    model.eval()
    times = []
    with torch.inference_mode():
        for number in range(calls + 20):
            started = time.perf_counter()
            model(*inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if number >= 20:  # the first calls warm up the allocator and kernels
                times.append(1000 * (time.perf_counter() - started))
    return {"p50_ms": float(np.percentile(times, 50)), "p90_ms": float(np.percentile(times, 90))}


def train_samples_per_s(config: VLAConfig, device: torch.device, steps: int, batch: int) -> float:
    """Training throughput on synthetic frames (batch gathering and augmentation included)."""
    data = synthetic_frames(episodes=8, length=50, image_size=config.image_size)
    vectors = hash_encoder(config.language_dim)(data.tasks)
    normalizer = Normalizer.from_stats(data.stats)
    frames = np.arange(len(data.state))
    ends = episode_ends(data)
    maker = BatchMaker(data, config.cameras, config.chunk, ends, vectors, normalizer, device)
    trainer = Trainer(VLANet(config), OptimConfig(), steps, DistContext(device))
    batches = batch_indices(frames, batch, 0, 1, 0, 0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):  # warm-up
        trainer.step(maker(next(batches)), AugmentConfig(), generator)
    started = time.perf_counter()
    for _ in range(steps):
        trainer.step(maker(next(batches)), AugmentConfig(), generator)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    config = VLAConfig()
    model = VLANet(config).to(device)
    report = {
        "device": str(device),
        "threads": args.threads,
        "parameters": parameter_count(model),
        "safetensors_mb": round(safetensors_bytes(model) / 1e6, 2),
        "inference_batch1": inference_ms(model, device),
        "train_samples_per_s": round(
            train_samples_per_s(config, device, args.train_steps, args.batch_size), 1
        ),
        "batch_size": args.batch_size,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
