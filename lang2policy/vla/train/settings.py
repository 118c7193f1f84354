"""What one ``train vla`` run is asked to do (``TrainSettings``): how long, how, and how often
to log, validate, evaluate and save; checked when made.

``DESIGNS`` holds the two recipes ``lang2policy train vla --design`` chooses between, each a
complete ``TrainSettings``: ``shipped`` is the network and training of
``models/vla-so101-tiny`` (its ``config.json`` and ``train_summary.json``; a test holds the two
equal), ``plain`` the image-features network for datasets that record no scene state (LeRobot
and teleoperation recordings). ``for_finetuning`` turns either into a short fine-tuning run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from lang2policy.errors import ConfigError
from lang2policy.vla.model.language import MINILM_SLOTS, language_dim
from lang2policy.vla.model.network import VLAConfig
from lang2policy.vla.train.augment import AugmentConfig
from lang2policy.vla.train.loop import OptimConfig


@dataclass(frozen=True)
class TrainSettings:
    """One training run: how long, how, and how often to log, validate, evaluate and save."""

    steps: int = 10_000
    batch_size: int = 64  # per process: a step trains on batch_size x processes frames
    optim: OptimConfig = field(default_factory=OptimConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    model: VLAConfig = field(default_factory=VLAConfig)
    val_episodes: int = 2  # successful episodes held out for the validation loss
    action_mode: str = "delta"  # actions relative to the frame's state, or "absolute"
    auxiliary: bool = True  # predict the scene state too, when the dataset records it
    val_every: int = 500
    eval_every: int = 0  # 0: no closed-loop evaluation during training
    checkpoint_every: int = 1000
    log_every: int = 50
    seed: int = 0
    threads: int = 1  # torch CPU threads: more thrash on a busy 2-core machine
    device: str = "auto"
    resume: bool = False
    progress: bool = True  # the tqdm bar
    finetune: str | None = None  # a model directory to start from (weights and normaliser)
    mix: float = 0.0  # > 0: the fraction of training frames from the first dataset
    stop_at: int | None = None  # save and stop at this step (the schedule still that of steps)

    def __post_init__(self) -> None:
        small = {k: v for k, v in asdict(self).items() if k in _POSITIVE and v < 1}
        if small:
            raise ConfigError(f"these training settings must be at least 1: {small}")
        if self.finetune and self.resume:
            raise ConfigError(
                "finetune and resume exclude each other: --finetune starts a new run from a "
                "model's weights, --resume continues a run's checkpoint.pt"
            )
        if self.stop_at is not None and not 0 < self.stop_at <= self.steps:
            raise ConfigError(f"stop_at must be a step in 1..{self.steps}, got {self.stop_at}")
        if not 0.0 <= self.mix <= 1.0:
            raise ConfigError(f"mix must be in [0, 1] (0: no mixing), got {self.mix}")
        if self.model.grounding and self.augment.shift:
            raise ConfigError(
                f"grounding is taught image positions, which a random shift would move: "
                f"train it with no random shift (got augment.shift {self.augment.shift})"
            )


_POSITIVE = ("steps", "batch_size", "checkpoint_every", "log_every", "threads")

SHIPPED_MODEL = VLAConfig(
    cameras=("front",),
    language_model=MINILM_SLOTS,
    language_dim=language_dim(MINILM_SLOTS),
    head_layers=3,
    head_reads="scene",
    grounding=True,
    scene_latch=True,
    perception_words="slots",
    keyframes=True,
    keyframe_anchors=True,
)
"""The network of ``models/vla-so101-tiny``: look once (grounding heatmaps on the front camera,
a held scene), then act (keyframes, an anchored 3 x 512 head); the dataset fills in its sizes."""

SHIPPED = TrainSettings(
    steps=5000,
    optim=OptimConfig(
        lr=1e-3,
        warmup_steps=200,
        ema_decay=0.999,
        scene_forcing=1.0,
        scene_noise=0.0,
        motor_batch=1024,
        motor_steps=10_000,
    ),
    augment=AugmentConfig(shift=0),  # grounding is taught image positions
    model=SHIPPED_MODEL,
    checkpoint_every=500,
)
"""How ``models/vla-so101-tiny`` was trained (its ``train_summary.json``), but for the threads."""

DESIGNS: dict[str, TrainSettings] = {"shipped": SHIPPED, "plain": TrainSettings()}

FINETUNING = {"steps": 300, "lr": 1e-4, "warmup_steps": 30, "ema_decay": 0.0}
"""A fine-tuning run's length and schedule: a nudge from a model, not a new training."""


def for_finetuning(settings: TrainSettings, grounds: bool) -> TrainSettings:
    """``settings`` as a short fine-tuning run (``FINETUNING``), with no random shift when the
    model it starts from (whose network it keeps) grounds image positions (``grounds``)."""
    optim = replace(
        settings.optim,
        lr=FINETUNING["lr"],
        warmup_steps=FINETUNING["warmup_steps"],
        ema_decay=FINETUNING["ema_decay"],
    )
    augment = replace(settings.augment, shift=0) if grounds else settings.augment
    return replace(settings, steps=FINETUNING["steps"], optim=optim, augment=augment)
