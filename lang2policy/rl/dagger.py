"""``lang2policy train distill``: a family's expert distilled into a policy file with DAgger.

Where PPO from scratch does not find the task (lift: 0 % after 400k steps, the policy hovered
over the block and never grasped), the policy imitates an expert (``experts.py``: the family's
scripted one, or the MPC) instead, in the loop DAgger prescribes (Ross et al. 2011):

1. iteration 0 runs the expert and records (observation, expert action);
2. every later iteration runs the *current learner* and asks the expert what it would have
   done in the states the learner reached, so the data covers the learner's own mistakes;
3. after each iteration the learner is trained (mean squared error, warm-started) on all the
   data so far.

The learner is the same tanh MLP as PPO's actor, exported as the same ``MLPPolicy`` file, so
the controller, ``bench rl`` and the evaluation treat it as any other policy. Episodes use the
training seeds (below ``EVAL_SEED``) and start with the arm near home, never above the block.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.rl.env import CONTROL_PERIOD, RewardEnv
from lang2policy.rl.evaluate import EVAL_SEED
from lang2policy.rl.experts import EXPERTS, MPCExpert
from lang2policy.rl.families import family as family_named
from lang2policy.rl.policy_file import MLPPolicy

EXPERT_KINDS = ("scripted", "mpc")
SEED_STRIDE = 10_000  # episode k of run seed s draws its goal from seed s * stride + k


@dataclass(frozen=True)
class DistillConfig:
    """What ``train distill`` runs: the family, DAgger's budget and the learner's settings."""

    family: str
    expert: str = "scripted"  # the family's scripted expert, or "mpc"
    iterations: int = 8
    episodes: int = 40  # per iteration
    seed: int = 0
    robot: str = "so101"
    hidden: int = 64
    epochs: int = 20  # passes over the data after each iteration
    batch_size: int = 256
    learning_rate: float = 1e-3


@dataclass
class Dataset:
    """Observations and the expert's actions for them, grown by every iteration."""

    observations: list[np.ndarray]
    actions: list[np.ndarray]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.observations, np.float32), np.asarray(self.actions, np.float32)


def expert_for(env: RewardEnv, kind: str = "scripted"):
    """The family's scripted expert or the MPC; a clear error names what exists."""
    if kind == "mpc":
        return MPCExpert(env)
    if kind != "scripted":
        raise Lang2PolicyError(f"unknown expert {kind!r}; valid experts: {list(EXPERT_KINDS)}")
    if env.family.name not in EXPERTS:
        raise Lang2PolicyError(f"family '{env.family.name}' has no scripted expert; families "
                               f"with one: {sorted(EXPERTS)} (or use the MPC: --expert mpc)")
    return EXPERTS[env.family.name](env)


def run_iteration(env: RewardEnv, expert, learner, seeds: range, data: Dataset,
                  tick=None) -> dict:
    """One DAgger iteration: episodes driven by ``learner`` (the expert when ``None``), every
    state labelled by the expert; returns the iteration's success rate and mean return."""
    successes, returns = 0, []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        expert.start(env)
        total, status = 0.0, "running"
        while status == "running":
            label = expert.action(env)
            data.observations.append(obs)
            data.actions.append(label)
            obs, reward, ended, truncated, info = env.step(
                label if learner is None else learner.act(obs))
            total += reward
            status = info["status"] if ended or truncated else "running"
        successes += status == "success"
        returns.append(total)
        if tick is not None:
            tick(successes)
    return {"success": round(successes / max(1, len(seeds)), 3),
            "return": round(float(np.mean(returns)), 3)}


class Learner:
    """The tanh MLP trained by regression on the expert's actions (torch, one thread)."""

    def __init__(self, observation_size: int, action_size: int, config: DistillConfig) -> None:
        import torch

        torch.manual_seed(config.seed)
        self.config = config
        layers, size = [], observation_size
        for _ in range(2):
            layers += [torch.nn.Linear(size, config.hidden), torch.nn.Tanh()]
            size = config.hidden
        layers.append(torch.nn.Linear(size, action_size))
        self.net = torch.nn.Sequential(*layers)
        self.optimiser = torch.optim.Adam(self.net.parameters(), lr=config.learning_rate)
        self.mean = np.zeros(observation_size)
        self.var = np.ones(observation_size)

    def fit(self, data: Dataset, rng: np.random.Generator) -> float:
        """Refit the normaliser to all data and train ``epochs`` passes; the last mean loss."""
        import torch

        obs, actions = data.arrays()
        self.mean, self.var = obs.mean(0).astype(np.float64), obs.var(0).astype(np.float64)
        x = torch.as_tensor(self._normalise(obs), dtype=torch.float32)
        y = torch.as_tensor(np.clip(actions, -1.0, 1.0), dtype=torch.float32)
        loss_sum = 0.0
        for _ in range(self.config.epochs):
            order = rng.permutation(len(x))
            loss_sum, batches = 0.0, 0
            for start in range(0, len(x), self.config.batch_size):
                batch = order[start:start + self.config.batch_size]
                loss = torch.mean((self.net(x[batch]) - y[batch]) ** 2)
                self.optimiser.zero_grad()
                loss.backward()
                self.optimiser.step()
                loss_sum, batches = loss_sum + float(loss.detach()), batches + 1
            loss_sum /= max(1, batches)
        return loss_sum

    def _normalise(self, obs: np.ndarray) -> np.ndarray:
        from lang2policy.rl.policy_file import OBS_CLIP

        return np.clip((obs - self.mean) / np.sqrt(self.var + 1e-8), -OBS_CLIP, OBS_CLIP)

    def policy(self, config: DistillConfig) -> MLPPolicy:
        """The current network and normaliser as a numpy ``MLPPolicy``."""
        linears = [m for m in self.net if hasattr(m, "weight")]
        return MLPPolicy(
            family=config.family, robot=config.robot,
            weights=[m.weight.detach().numpy().astype(np.float64) for m in linears],
            biases=[m.bias.detach().numpy().astype(np.float64) for m in linears],
            obs_mean=self.mean.copy(), obs_var=self.var.copy(),
            action_scale=family_named(config.family).action_scale,
            control_period=CONTROL_PERIOD)


def distill(config: DistillConfig, out: str | Path, progress: bool = True) -> dict:
    """Run DAgger, write ``out/policy.*`` and the curve; returns the run's summary."""
    import torch
    from tqdm import tqdm

    from lang2policy.rl.train_progress import save_curve

    torch.set_num_threads(1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if (config.seed + 1) * SEED_STRIDE > EVAL_SEED:
        raise Lang2PolicyError(f"seed {config.seed} would draw evaluation goals; use a seed "
                               f"below {EVAL_SEED // SEED_STRIDE}")
    env = RewardEnv(family_named(config.family), config.robot, near_start=0.0)
    expert = expert_for(env, config.expert)
    learner = Learner(env.observation_space.shape[0], env.action_space.shape[0], config)
    data, curve, rng = Dataset([], []), [], np.random.default_rng(config.seed)
    began = time.perf_counter()
    bar = tqdm(total=config.iterations * config.episodes, desc="train distill", unit="episode",
               disable=not progress)
    for iteration in range(config.iterations):
        first = config.seed * SEED_STRIDE + iteration * config.episodes
        seeds = range(first, first + config.episodes)
        point = run_iteration(env, expert, None if iteration == 0 else learner.policy(config),
                              seeds, data, tick=lambda _: bar.update())
        loss = learner.fit(data, rng)
        point |= {"steps": len(data.observations), "iteration": iteration,
                  "driver": "expert" if iteration == 0 else "learner", "loss": round(loss, 5)}
        curve.append(point)
        bar.set_postfix(success=f"{point['success']:.0%}", loss=point["loss"])
    bar.close()
    seconds = time.perf_counter() - began
    save_curve(curve, out)
    policy = learner.policy(config)
    policy.summary = {"config": asdict(config), "method": "dagger",
                      "expert": type(expert).__name__, "timesteps": len(data.observations),
                      "train_seconds": round(seconds, 1),
                      "steps_per_second": round(len(data.observations) / max(seconds, 1e-9))}
    policy.save(out)
    return policy.summary
