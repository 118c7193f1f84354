"""Training the VLA on recorded demonstrations (``lang2policy train vla``).

``train_vla(dataset, out_dir, settings)`` fits the network on the successful training episodes
and writes a model directory (``config.json``, ``model.safetensors``, ``normalization.json``)
with ``training_log.jsonl``, ``training.png`` and ``train_summary.json``. Every
``checkpoint_every`` steps it saves ``checkpoint.pt`` (weights, optimiser, schedule, step,
random state) and refreshes the model directory, so a run can be resumed
(``settings.resume``) or its latest weights tried while it goes on.

Started by ``torchrun`` or ``accelerate launch`` it trains data-parallel (``distributed``):
each process takes ``batch_size`` frames of every global batch (``batches.batch_indices``),
rank 0 alone logs (the loss averaged over the processes), validates, evaluates and writes
files. A run resumed on another number of processes keeps the saved global batch (its batch a
process changes) and so the order of its batches; ``settings.stop_at`` saves and stops early,
the schedule still that of ``settings.steps``. ``evaluate(policy) -> dict`` (closed-loop rollouts,
given by the caller) runs every ``eval_every`` steps on the current weights.

``settings.finetune`` starts from a model directory instead of fresh weights (issue 18: the
corrected episodes of ``lang2policy record corrections``): its config, weights and normaliser
are kept, so the policy's input and output scales stay those the model was trained with;
the optimiser and schedule start anew. ``settings.mix`` draws a fixed fraction of the
training frames from the first dataset (the corrections) and the rest from the others
(e.g. the original demonstrations), so that a few corrected episodes are not drowned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from lang2policy.vla.model.language import Encoder
from lang2policy.vla.model.network import VLAConfig, VLANet, parameter_count
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.policy.runtime import VLAPolicy
from lang2policy.vla.train import distributed
from lang2policy.vla.train.batches import Batch, BatchMaker, Frames, MotorBatch, batch_indices
from lang2policy.vla.train.loop import Trainer, grounding_pixels, scene_millimetres
from lang2policy.vla.train.outputs import (
    RunOutputs,
    flat_metrics,
    process_generator,
    resume_state,
    resumed_settings,
    short_number,
)
from lang2policy.vla.train.prepare import (
    TrainData,
    check_choices,
    describe,
    finetune_start,
    grounding_targets_for,
    model_config,
    prepare,
)
from lang2policy.vla.train.settings import TrainSettings

Evaluate = Callable[[VLAPolicy], dict[str, Any]]


def train_vla(
    data: Frames,
    out_dir: Path,
    settings: TrainSettings,
    *,
    evaluate: Evaluate | None = None,
    encoder: Encoder | None = None,
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train, write the model directory and return the summary (rank 0; other ranks get {}).

    ``encoder`` replaces the instruction encoder the config names (tests); ``source`` (dataset
    path, command line) is copied into ``train_summary.json``."""
    torch.set_num_threads(settings.threads)
    context = distributed.start(settings.device)
    try:
        run = _build_run(data, Path(out_dir), settings, context, encoder, evaluate)
        run.loop()
        summary = run.finish(source or {}) if run.outputs is not None else {}
    except BaseException:
        distributed.stop(context, wait=False)
        raise
    distributed.stop(context)
    return summary


def _build_run(
    frames: Frames,
    out_dir: Path,
    settings: TrainSettings,
    context: distributed.DistContext,
    encoder: Encoder | None,
    evaluate: Evaluate | None,
) -> _Run:
    """Set up a fresh run, or the saved one when resuming (its config and normaliser win)."""
    state = resume_state(out_dir, settings.resume, context.device)
    normalizer, start_net = None, None
    if state is not None:
        settings = resumed_settings(settings, state, context.world_size)
        config = VLAConfig.from_dict(state["config"])
        model_config(frames, config, auxiliary=bool(config.aux_dim))  # its cameras are there
        normalizer = Normalizer.from_dict(state["normalizer"])
    elif settings.finetune:  # the model's own config (cameras too), weights and normaliser
        start_net, config, normalizer = finetune_start(Path(settings.finetune), frames)
    else:
        config = model_config(frames, settings.model, auxiliary=settings.auxiliary)
    data = prepare(
        frames,
        config,
        val_episodes=settings.val_episodes,
        seed=settings.seed,
        encoder=encoder,
        normalizer=normalizer,
        action_mode=settings.action_mode,
        mix=settings.mix,
        progress=settings.progress and context.is_main,
    )
    torch.manual_seed(settings.seed)
    net = start_net if start_net is not None else VLANet(config)
    net.use_statistics(data.normalizer)
    check_choices(net, settings.optim, settings.augment.shift)
    trainer = Trainer(net, settings.optim, settings.steps, context)
    start = 0 if state is None else int(state["step"])
    generator = process_generator(settings.seed, context.rank, start, state)
    if state is not None:
        trainer.load_state_dict(state)
    make_batch = BatchMaker(
        frames,
        config.cameras,
        config.chunk,
        frame_end=data.frame_end,
        task_vectors=data.task_vectors,
        normalizer=data.normalizer,
        device=context.device,
        grounding=grounding_targets_for(frames, config),
        environment=data.environment,
        keyframes=data.keyframes,
    )
    outputs = None
    if context.is_main:
        outputs = RunOutputs(out_dir, start if state is not None else None)
    return _Run(settings, context, data, trainer, make_batch, generator, outputs, evaluate, start)


@dataclass
class _Run:
    """One run's parts and its progress between steps."""

    settings: TrainSettings
    context: distributed.DistContext
    data: TrainData
    trainer: Trainer
    make_batch: BatchMaker
    generator: torch.Generator
    outputs: RunOutputs | None  # rank 0 only
    evaluate: Evaluate | None
    start_step: int
    step: int = 0
    window: list[float] = field(default_factory=list)  # losses since the last log record
    aux_window: dict[str, list[float]] = field(default_factory=dict)  # auxiliary losses, likewise
    window_seconds: float = 0.0
    window_data_seconds: float = 0.0  # of which making the batches
    train_seconds: float = 0.0
    data_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.step = self.start_step

    @property
    def samples_per_step(self) -> int:
        """The global batch."""
        return self.settings.batch_size * self.context.world_size

    @property
    def end_step(self) -> int:
        """Where this run stops: ``steps``, or ``stop_at`` before it."""
        return min(self.settings.steps, self.settings.stop_at or self.settings.steps)

    def loop(self) -> None:
        """Train from ``start_step`` to ``end_step``."""
        settings, context = self.settings, self.context
        batches = batch_indices(
            self.data.image_frames,
            settings.batch_size,
            context.rank,
            context.world_size,
            settings.seed,
            self.step,
        )
        show = settings.progress and context.is_main
        bar = tqdm(total=settings.steps, initial=self.step, disable=not show, unit="step")
        with bar:
            if context.is_main:
                bar.write(self._opening_line())
            if self.step == 0 and not settings.finetune and settings.optim.motor_steps:
                self._pretrain_motor(bar)
            while self.step < self.end_step:
                started = time.perf_counter()
                batch = self.make_batch(next(batches))
                self.window_data_seconds += time.perf_counter() - started
                loss = self.trainer.step(
                    batch, settings.augment, self.generator, self._motor_batch()
                )
                self.window.append(loss)
                self._keep_aux_losses()
                self.window_seconds += time.perf_counter() - started
                self.step += 1
                bar.update(1)
                self._after_step(bar)

    def _keep_aux_losses(self) -> None:
        for name, value in (
            ("aux_loss", self.trainer.last_aux_loss),
            ("grounding_loss", self.trainer.last_grounding_loss),
        ):
            if value is not None:
                self.aux_window.setdefault(name, []).append(value)

    def _pretrain_motor(self, bar: tqdm) -> None:
        """The motor part's image-free steps before the first image step (``motor_steps``);
        every process does the same steps, then takes rank 0's weights."""
        started = time.perf_counter()
        total = self.settings.optim.motor_steps
        show = self.settings.progress and self.context.is_main
        with tqdm(total=total, desc="motor part", unit="step", disable=not show, leave=False) as mb:

            def advance(loss: float) -> None:
                mb.update(1)
                if mb.n % 200 == 0:
                    mb.set_postfix(loss=f"{loss:.4f}")

            losses = self.trainer.pretrain_motor(self._motor_batch, self.generator, advance)
        if self.context.distributed:
            for parameter in self.trainer.net.parameters():
                torch.distributed.broadcast(parameter.data, src=0)
        seconds = time.perf_counter() - started
        first, last = np.mean(losses[:50]), np.mean(losses[-50:])
        if self.outputs is not None:
            self.outputs.log.add(
                "motor", 0, motor_steps=len(losses), motor_loss_first=float(first),
                motor_loss_last=float(last), seconds=round(seconds, 1),
            )  # fmt: skip
        bar.write(
            f"motor part: {len(losses)} image-free steps in {seconds:.0f} s, "
            f"action L1 {first:.4f} -> {last:.4f}"
        )

    def _motor_batch(self) -> MotorBatch | None:
        """Image-free training frames for a bottleneck's action head (``motor_batch``; a
        latched network's image batches hold only frames whose block has not moved, so its
        head gets a batch's worth of all frames even when none is asked for)."""
        size = self.settings.optim.motor_batch
        if not size and self.trainer.net.config.scene_latch:
            size = self.settings.batch_size
        if not size:
            return None
        frames = self.data.train_frames
        picks = torch.randint(len(frames), (size,), generator=self.generator).numpy()
        return self.make_batch.motor(frames[picks])

    def _after_step(self, bar: tqdm) -> None:
        """Log, validate, evaluate and save when their turn comes."""
        settings, done = self.settings, self.step
        last = done == self.end_step

        def due(every: int) -> bool:
            return every > 0 and (done % every == 0 or last)

        if due(settings.log_every):
            self._log_train(bar)
        saving = due(settings.checkpoint_every)  # every rank's random stream goes in
        generators = distributed.gather(self.generator.get_state(), self.context) if saving else []
        if self.outputs is None:
            return
        if due(settings.val_every) and len(self.data.val_frames):
            self._validate(bar)
        if saving:  # before the rollouts, which may crash a simulation
            self.outputs.save_checkpoint(
                done, self.trainer, generators, self.data.normalizer, self.samples_per_step
            )
        if self.evaluate is not None and due(settings.eval_every):
            self._evaluate(bar)

    def _log_train(self, bar: tqdm) -> None:
        """The window's losses, averaged over the processes too (every rank calls this)."""
        names = sorted(self.aux_window)
        means = [float(np.mean(self.window))]
        means += [float(np.mean(self.aux_window[name])) for name in names]
        loss, *rest = distributed.mean_over_ranks(means, self.context)
        aux = dict(zip(names, rest, strict=True))
        rate = len(self.window) * self.samples_per_step / max(self.window_seconds, 1e-9)
        share = self.window_data_seconds / max(self.window_seconds, 1e-9)
        self.train_seconds += self.window_seconds
        self.data_seconds += self.window_data_seconds
        self.window, self.aux_window = [], {}
        self.window_seconds = self.window_data_seconds = 0.0
        bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.0f}")
        if self.outputs is not None:
            self.outputs.log.add(
                "train", self.step, loss=loss, lr=self.trainer.lr, samples_per_s=round(rate, 1),
                data_share=round(share, 3), **aux,
            )  # fmt: skip

    def _validate(self, bar: tqdm) -> None:
        """The action L1 on every validation frame (a latched head reading the recorded first
        scene, as it holds its look at run time); the scene and grounding errors on the
        frames they are taught on (``val_scene_frames``)."""
        loss, aux = self.trainer.validation_loss(self._batches(self.data.val_frames))
        if self.data.val_scene_frames is not self.data.val_frames:
            _, aux = self.trainer.validation_loss(self._batches(self.data.val_scene_frames))
        extra = {} if aux is None else {
            "val_aux_loss": aux,
            **scene_millimetres(self.trainer.last_scene_error, self.data.normalizer.env_std),
            **grounding_pixels(self.trainer.last_grounding_error, self.trainer.net.config),
        }
        self.outputs.log.add("val", self.step, val_loss=loss, **extra)
        scene = "" if aux is None else f", scene state L1 {aux:.4f}"
        where = extra.get("val_block_mae_mm")
        block = "" if where is None else f", named block off by {where} mm (x, y, z)"
        seen = extra.get("val_grounding_px")
        seen = "" if seen is None else f", grounding off by {seen} px (block u, v, goal u, v)"
        bar.write(f"step {self.step}: validation L1 {loss:.4f}{scene}{block}{seen}")

    def _batches(self, frames: np.ndarray) -> Iterator[Batch]:
        for piece in np.array_split(frames, math.ceil(len(frames) / self.settings.batch_size)):
            yield self.make_batch(piece)

    def _evaluate(self, bar: tqdm) -> None:
        """Closed-loop evaluation of the current (EMA) weights through the runtime policy."""
        data = self.data
        policy = VLAPolicy(self.trainer.export_net, data.normalizer, data.language)
        started = time.monotonic()
        metrics = flat_metrics(self.evaluate(policy))
        seconds = round(time.monotonic() - started, 1)
        self.outputs.log.add("eval", self.step, **metrics, eval_seconds=seconds)
        shown = ", ".join(f"{k} {short_number(v)}" for k, v in metrics.items())
        bar.write(f"step {self.step}: evaluation ({seconds} s): {shown}")
        self.outputs.plot()

    def _opening_line(self) -> str:
        counts = describe(self.data)
        episodes, frames = counts["episodes"], counts["frames"]
        return (
            f"training on {episodes['train']} episodes ({frames['train']} frames, "
            f"{frames['images']} of them with images; "
            f"{episodes['failed_excluded']} failed left out), validating on {episodes['val']}, "
            f"{counts['instructions']} instructions; {parameter_count(self.trainer.net):,} "
            f"params on {self.context.device} x{self.context.world_size}, "
            f"{self.samples_per_step} frames a step ({self.settings.batch_size} a process), "
            f"from step {self.step}"
            + (f" (fine-tuning {self.settings.finetune})" if self.settings.finetune else "")
        )

    def finish(self, source: dict[str, Any]) -> dict[str, Any]:
        """Write ``train_summary.json`` and the plot; return the summary."""
        log = self.outputs.log
        trained = self.step - self.start_step
        summary = {
            "steps": self.step,
            "resumed_from_step": self.start_step or None,
            "wall_time_s": round(time.monotonic() - self.started, 1),
            "train_time_s": round(self.train_seconds, 1),
            "samples_per_s": round(
                trained * self.samples_per_step / max(self.train_seconds, 1e-9), 1
            ),
            "data_share": round(self.data_seconds / max(self.train_seconds, 1e-9), 3),
            "global_batch": self.samples_per_step,
            "final_train_loss": (log.last("train") or {}).get("loss"),
            "final_val_loss": (log.last("val") or {}).get("val_loss"),
            "last_eval": log.last("eval"),
            **describe(self.data),
            "parameters": parameter_count(self.trainer.net),
            "device": str(self.context.device),
            "world_size": self.context.world_size,
            "threads": self.settings.threads,
            "config": self.trainer.net.config.to_dict(),
            "settings": asdict(self.settings),
            **source,
        }
        self.outputs.write_summary(summary)
        self.outputs.plot()
        return summary
