"""``lang2policy train rl``: PPO (stable-baselines3) on a family's reward, exported to numpy.

Training runs ``envs`` copies of ``RewardEnv`` in one process (``DummyVecEnv``: on two cores
subprocess workers cost more than they save), or each as a Ray actor for a cluster
(``executor`` ray, ``ray_vec_env.py``: the same steps, so the same weights) with running
observation and reward
normalisation, and torch pinned to one thread (two threads beside MuJoCo collapsed PPO 25-40x
on this machine class, see docs). Every ``checkpoint_every`` steps the learner, its normaliser
and the learning curve are saved under ``OUT/checkpoint/``; ``resume=True`` continues from
there up to ``steps`` in all. At the end the actor and normaliser are exported as an
``MLPPolicy`` (``policy_file.py``): the shipped file needs neither torch nor SB3. ``init``
fine-tunes a shipped policy (a distilled one) instead of starting from random weights
(``warm_start.py``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.parallel.executor import Executor
from lang2policy.rl.env import CONTROL_PERIOD, RewardEnv
from lang2policy.rl.families import family as family_named
from lang2policy.rl.policy_file import MLPPolicy

CHECKPOINT = "checkpoint"
TRAIN_SEED_STRIDE = 1000  # env i of run seed s draws goals from seed s * stride + i


@dataclass(frozen=True)
class TrainConfig:
    """What ``train rl`` trains: the family, the budget and PPO's settings."""

    family: str
    steps: int = 1_000_000
    envs: int = 8
    seed: int = 0
    robot: str = "so101"
    hidden: int = 64
    n_steps: int = 256  # per env per rollout
    batch_size: int = 256
    epochs: int = 10
    gamma: float = 0.98
    learning_rate: float = 3e-4
    checkpoint_every: int = 100_000
    init: str = ""  # a policy directory to fine-tune ("" = random weights)


def make_vec_env(config: TrainConfig, executor: Executor | None = None):
    """``config.envs`` seeded environments (SB3's Monitor wrapped) in one ``DummyVecEnv``, or
    each in a Ray actor with ``executor`` ray (``RayVecEnv``; Ray imported only then)."""
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    fam = family_named(config.family)

    def maker(index: int):
        seed = config.seed * TRAIN_SEED_STRIDE + index
        return lambda: Monitor(RewardEnv(fam, config.robot, seed=seed, end_on_failure=False),
                               info_keywords=("is_success",))

    makers = [maker(i) for i in range(config.envs)]
    if executor is not None and executor.kind == "ray":
        from lang2policy.rl.ray_vec_env import RayVecEnv

        return RayVecEnv(makers, executor.address)
    return DummyVecEnv(makers)


def make_learner(config: TrainConfig, out: Path, resume: bool,
                 executor: Executor | None = None):
    """A fresh PPO + normaliser, or both loaded from ``out/checkpoint`` when resuming; the
    environments are closed again when that fails (a Ray cluster started for them stops)."""
    venv = make_vec_env(config, executor)
    try:
        return _learner(config, out, resume, venv)
    except BaseException:
        venv.close()
        raise


def _learner(config: TrainConfig, out: Path, resume: bool, venv):
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    saved = out / CHECKPOINT
    if resume:
        if not (saved / "ppo.zip").is_file():
            raise Lang2PolicyError(f"nothing to resume: {saved / 'ppo.zip'} does not exist")
        env = VecNormalize.load(str(saved / "vecnormalize.pkl"), venv)
        return PPO.load(str(saved / "ppo.zip"), env=env, device="cpu"), env
    env = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0,
                       gamma=config.gamma)
    model = PPO("MlpPolicy", env, n_steps=config.n_steps, batch_size=config.batch_size,
                n_epochs=config.epochs, gamma=config.gamma, gae_lambda=0.95,
                learning_rate=config.learning_rate, clip_range=0.2, ent_coef=0.0,
                policy_kwargs={"net_arch": [config.hidden, config.hidden],
                               "log_std_init": family_named(config.family).log_std_init},
                seed=config.seed, device="cpu", verbose=0)
    if config.init:
        from lang2policy.rl.warm_start import FINE_TUNE_LOG_STD, initial_policy, load_into

        start = initial_policy(config.init, config.family, config.robot, config.hidden)
        load_into(model, env, start, FINE_TUNE_LOG_STD)
    return model, env


def train(config: TrainConfig, out: str | Path, resume: bool = False,
          progress: bool = True, executor: Executor | None = None) -> dict:
    """Train, checkpoint, export ``out/policy.*``; returns the run's summary. ``executor``
    ray: the environments run as Ray actors (default: in this process)."""
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model, env = make_learner(config, out, resume, executor)
    try:
        return _learn(config, out, model, env, resume, progress)
    finally:
        env.close()


def _learn(config: TrainConfig, out: Path, model, env, resume: bool, progress: bool) -> dict:
    """Learn up to ``config.steps``, checkpoint, export; the run's summary."""
    from lang2policy.rl.train_progress import CurveCallback, load_curve, save_curve

    curve = load_curve(out / CHECKPOINT) if resume else []
    done_steps = int(model.num_timesteps)
    callback = CurveCallback(curve, config.steps, done_steps, progress,
                             every=config.checkpoint_every,
                             save=lambda: _checkpoint(model, env, curve, out))
    began = time.perf_counter()
    if config.steps > done_steps:
        model.learn(total_timesteps=config.steps - done_steps, callback=callback,
                    reset_num_timesteps=False)
    seconds = time.perf_counter() - began
    _checkpoint(model, env, curve, out)
    save_curve(curve, out)
    policy = export(model, env, config)
    summary = {"config": asdict(config), "timesteps": int(model.num_timesteps),
               "train_seconds": round(seconds, 1),
               "steps_per_second": round((model.num_timesteps - done_steps) / max(seconds, 1e-9)),
               "resumed_from": done_steps}
    policy.summary = summary
    policy.save(out)
    return summary


def _checkpoint(model, env, curve: list[dict], out: Path) -> None:
    from lang2policy.rl.train_progress import save_curve

    saved = out / CHECKPOINT
    saved.mkdir(parents=True, exist_ok=True)
    model.save(str(saved / "ppo.zip"))
    env.save(str(saved / "vecnormalize.pkl"))
    (saved / "curve.json").write_text(json.dumps(curve))
    save_curve(curve, out, plot=False)


def export(model, env, config: TrainConfig) -> MLPPolicy:
    """The PPO actor (its tanh MLP and the Gaussian's mean layer) and the observation
    normaliser as a numpy ``MLPPolicy``."""
    net = model.policy.mlp_extractor.policy_net
    linears = [m for m in net if hasattr(m, "weight")] + [model.policy.action_net]
    weights = [m.weight.detach().cpu().numpy().astype(np.float64) for m in linears]
    biases = [m.bias.detach().cpu().numpy().astype(np.float64) for m in linears]
    return MLPPolicy(family=config.family, robot=config.robot, weights=weights, biases=biases,
                     obs_mean=np.asarray(env.obs_rms.mean, np.float64),
                     obs_var=np.asarray(env.obs_rms.var, np.float64),
                     action_scale=family_named(config.family).action_scale,
                     control_period=CONTROL_PERIOD)
