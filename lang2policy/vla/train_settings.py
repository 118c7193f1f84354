"""What one ``train vla`` run is asked to do (``TrainSettings``): how long, how, and how often
to log, validate, evaluate and save; checked when made."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from lang2policy.errors import ConfigError
from lang2policy.vla.augment import AugmentConfig
from lang2policy.vla.model import VLAConfig
from lang2policy.vla.train_loop import OptimConfig


@dataclass(frozen=True)
class TrainSettings:
    """One training run: how long, how, and how often to log, validate, evaluate and save."""

    steps: int = 10_000
    batch_size: int = 64  # per process
    optim: OptimConfig = field(default_factory=OptimConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    model: VLAConfig = field(default_factory=VLAConfig)
    val_episodes: int = 2  # successful episodes held out for the validation loss
    action_mode: str = "delta"  # actions relative to the frame's state, or "absolute"
    auxiliary: bool = True  # predict the scene state too, when the dataset records it
    view_repeat: int = 1  # times each scene view is drawn per epoch
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

    def __post_init__(self) -> None:
        small = {k: v for k, v in asdict(self).items() if k in _POSITIVE and v < 1}
        if small:
            raise ConfigError(f"these training settings must be at least 1: {small}")
        if self.finetune and self.resume:
            raise ConfigError(
                "finetune and resume exclude each other: --finetune starts a new run from a "
                "model's weights, --resume continues a run's checkpoint.pt"
            )
        if not 0.0 <= self.mix <= 1.0:
            raise ConfigError(f"mix must be in [0, 1] (0: no mixing), got {self.mix}")
        if self.model.grounding and self.augment.shift:
            raise ConfigError(
                f"grounding is taught image positions, which a random shift would move: "
                f"train it with --shift 0 (got {self.augment.shift})"
            )


_POSITIVE = ("steps", "batch_size", "checkpoint_every", "log_every", "threads", "view_repeat")
