"""What a person watching ``train rl`` sees: a progress bar, the learning curve, checkpoints.

``CurveCallback`` reads the finished episodes SB3's ``Monitor`` reports, adds one curve point
per rollout (mean return, success rate, episode length, steps/s) and shows them on a tqdm bar.
``save_curve`` writes ``curve.json`` and ``learning_curve.png`` next to the model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

CURVE_JSON = "curve.json"
CURVE_PNG = "learning_curve.png"


class CurveCallback(BaseCallback):
    """Progress bar, one curve point per rollout, a checkpoint every ``every`` steps."""

    def __init__(self, curve: list[dict], total: int, done: int, progress: bool,
                 every: int, save: Callable[[], None]) -> None:
        super().__init__()
        self.curve, self.total, self.every, self.save = curve, total, every, save
        self.bar = tqdm(total=total, initial=done, desc="train rl", unit="step",
                        disable=not progress, smoothing=0.05)
        self.episodes: list[dict] = []
        self.began = time.perf_counter()
        self.started_at = done
        self.next_save = done + every

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if "episode" in info:
                self.episodes.append({"return": float(info["episode"]["r"]),
                                      "length": int(info["episode"]["l"]),
                                      "success": bool(info.get("is_success", False))})
        self.bar.update(self.training_env.num_envs)
        if self.num_timesteps >= self.next_save:
            self.save()
            self.next_save += self.every
        return True

    def _on_rollout_end(self) -> None:
        if not self.episodes:
            return
        recent = self.episodes[-50:]
        seconds = time.perf_counter() - self.began
        point = {"steps": int(self.num_timesteps),
                 "return": round(float(np.mean([e["return"] for e in recent])), 3),
                 "success": round(float(np.mean([e["success"] for e in recent])), 3),
                 "length": round(float(np.mean([e["length"] for e in recent])), 1),
                 "steps_per_second": round((self.num_timesteps - self.started_at) / seconds)}
        self.curve.append(point)
        self.bar.set_postfix(ret=point["return"], success=f"{point['success']:.0%}",
                             sps=point["steps_per_second"])

    def _on_training_end(self) -> None:
        self.bar.close()


def load_curve(directory: Path) -> list[dict]:
    """The curve saved with a checkpoint (empty if none)."""
    path = Path(directory) / CURVE_JSON
    return json.loads(path.read_text()) if path.is_file() else []


def save_curve(curve: list[dict], out: Path, plot: bool = True) -> None:
    """``curve.json``, and with ``plot`` the learning-curve PNG (return and success vs steps)."""
    out = Path(out)
    (out / CURVE_JSON).write_text(json.dumps(curve, indent=1) + "\n")
    if not plot or not curve:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [p["steps"] for p in curve]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    left.plot(steps, [p["return"] for p in curve])
    left.set(xlabel="environment steps", ylabel="mean episode return", title="return")
    right.plot(steps, [100 * p["success"] for p in curve], color="tab:green")
    right.set(xlabel="environment steps", ylabel="% of episodes", title="success",
              ylim=(-5, 105))
    fig.tight_layout()
    fig.savefig(out / CURVE_PNG, dpi=90)
    plt.close(fig)
