"""``lang2policy bench rl``: per task family, the shipped RL policy, the MPC and the distilled
policy on the same seeded held-out goals, in one run; training time per family; policy
inference speed beside one MPC iteration.

For each family (default: every family with a shipped ``models/rl-<family>-<robot>``), episodes
use the seeds ``EVAL_SEED, EVAL_SEED + 1, ...`` (goals no policy was trained on) and every
backend runs every seed from the same start state in the same ``RewardEnv`` (``rl.controllers``):

* ``rl``: the shipped policy;
* ``mpc``: the sampler with the controller node's defaults (64 samples, 0.5 s horizon, IK
  proposals), re-planning every control period, warm-started;
* ``distilled``: ``models/rl-<family>-distilled-<robot>`` when it exists, else n/a.

Figures per backend: success k/N, mean time to success, smoothness (mean |change of joint
targets| per step, rad), control cost per action (mean squared (target - measured joints) /
the family's ``action_scale``) and wall time per episode. Inference: ``policy.act`` on one
thread over ``INFERENCE_CALLS`` calls against the mean of ``MPC_ITERATIONS`` MPC iterations
from the same state; the issue's bar is ``INFERENCE_BAR`` actions/s.

The episodes run in this process by default, one after another (``wall/ep`` is an episode on
an otherwise idle machine), or in ``--workers`` processes on this machine or on Ray
(``--executor ray``, ``lang2policy.parallel.executor``). Each episode depends on its family,
backend and seed alone, so the report is the same wherever they ran, timings aside; the
inference speed is timed in this process after the episodes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tqdm import tqdm

from lang2policy.bench.rl_backends import inference_speed
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.parallel.executor import Executor, run_ordered
from lang2policy.parallel.executor import add_arguments as add_executor_arguments
from lang2policy.parallel.executor import from_args as executor_from_args
from lang2policy.paths import share_dir
from lang2policy.rl.controllers import (
    EpisodeResult,
    MPCController,
    PolicyController,
    run_episode,
    summarise,
)
from lang2policy.rl.env import RewardEnv
from lang2policy.rl.evaluate import EVAL_SEED
from lang2policy.rl.families import family as family_named
from lang2policy.rl.policy_file import CONFIG_FILE, MLPPolicy, load_policy

BACKENDS = ("rl", "mpc", "distilled")
DISTILLED = "distilled"
INFERENCE_BAR = 1000.0  # actions/s on one core (the acceptance bar)
INFERENCE_CALLS = 2000
MPC_ITERATIONS = 20


def policy_dir(models: Path, family: str, robot: str, distilled: bool = False) -> Path:
    """``models/rl-<family>[-distilled]-<robot>``."""
    return models / f"rl-{family}{'-' + DISTILLED if distilled else ''}-{robot}"


def shipped_families(models: Path, robot: str) -> list[str]:
    """Families with a shipped policy for ``robot`` under ``models``, RL or distilled."""
    found = [p.name[len("rl-"):-len(f"-{robot}")]
             for p in sorted(models.glob(f"rl-*-{robot}")) if (p / CONFIG_FILE).is_file()]
    return sorted({name.removesuffix(f"-{DISTILLED}") for name in found})


def _has_policy(models: Path, family: str, robot: str) -> bool:
    return any((policy_dir(models, family, robot, distilled) / CONFIG_FILE).is_file()
               for distilled in (False, True))


def _families(requested: list[str] | None, models: Path, robot: str) -> list[str]:
    names = requested or shipped_families(models, robot)
    if not names:
        raise Lang2PolicyError(f"no RL policy for the {robot} under {models} (expected "
                               f"rl-<family>-{robot}/; train one with 'lang2policy train rl')")
    for name in names:
        family_named(name)  # an unknown family names the valid ones
        if not _has_policy(models, name, robot):
            raise Lang2PolicyError(f"family '{name}' has no policy at "
                                   f"{policy_dir(models, name, robot)} (RL) or "
                                   f"{policy_dir(models, name, robot, distilled=True)}; train "
                                   f"one with 'lang2policy train rl|distill --family {name}'")
    return names


def _load(directory: Path, family: str, robot: str) -> MLPPolicy:
    policy = load_policy(directory)
    if policy.family != family or policy.robot != robot:
        raise Lang2PolicyError(f"{directory} holds a {policy.family} policy for the "
                               f"{policy.robot}, not {family} for the {robot}")
    return policy


def _load_if_any(directory: Path, family: str, robot: str) -> MLPPolicy | None:
    return _load(directory, family, robot) if (directory / CONFIG_FILE).is_file() else None


def _training(policy: MLPPolicy | None) -> dict | None:
    if policy is None:
        return None
    summary = policy.summary
    return {"train_seconds": summary.get("train_seconds"), "timesteps": summary.get("timesteps"),
            "steps_per_second": summary.get("steps_per_second")}


def _worker_state(models: str, robot: str, config: MPCConfig) -> dict:
    """A worker's cache: the family it ran last (its env, policies and MPC), made on the
    worker's first episode of that family."""
    return {"models": Path(models), "robot": robot, "config": config, "family": None}


def _family_state(state: dict, name: str) -> dict:
    """``name``'s env and controllers in this worker; the previous family's MPC is closed."""
    if state["family"] is not None and state["family"]["name"] == name:
        return state["family"]
    if state["family"] is not None:
        state["family"]["controllers"]["mpc"].close()
    models, robot = state["models"], state["robot"]
    env = RewardEnv(family_named(name), robot, near_start=0.0)
    policy, distilled = (_load_if_any(policy_dir(models, name, robot, d), name, robot)
                         for d in (False, True))
    controllers = {"rl": PolicyController(policy) if policy else None,
                   "mpc": MPCController(env, state["config"]),
                   DISTILLED: PolicyController(distilled) if distilled else None}
    state["family"] = {"name": name, "env": env, "controllers": controllers}
    return state["family"]


def _episode(state: dict, item: tuple[str, str, int]) -> EpisodeResult:
    """One episode of one backend of one family from its seed: the same result in any worker
    and after any earlier episode (the env and the MPC start each episode afresh)."""
    name, backend, seed = item
    family = _family_state(state, name)
    return run_episode(family["env"], family["controllers"][backend], seed)


def _episode_label(item: tuple[str, str, int]) -> str:
    return f"{item[0]} {item[1]} seed {item[2]}"


def _episodes(names: list[str], root: Path, robot: str, episodes: int, config: MPCConfig,
              executor: Executor, bar: tqdm) -> dict[tuple[str, str], list[EpisodeResult]]:
    """Every backend's episodes of every family, run by ``executor``; per (family, backend)
    the results in seed order (a backend without a policy has none)."""
    seeds = range(EVAL_SEED, EVAL_SEED + episodes)
    items: list[tuple[str, str, int]] = []
    runs: dict[tuple[str, str], list[EpisodeResult]] = {}
    for name in names:
        for backend in BACKENDS:
            if backend == "mpc" or _has(root, name, robot, backend):
                items += [(name, backend, seed) for seed in seeds]
                runs[name, backend] = []
            else:
                bar.update(episodes)
    results = run_ordered(executor, _worker_state, (str(root), robot, config), _episode, items,
                          _episode_label)
    for item, result in zip(items, results, strict=True):
        runs[item[:2]].append(result)
        bar.set_postfix_str(_episode_label(item))
        bar.update()
    return runs


def _has(root: Path, name: str, robot: str, backend: str) -> bool:
    return (policy_dir(root, name, robot, backend == DISTILLED) / CONFIG_FILE).is_file()


def bench_family(name: str, models: Path, robot: str, config: MPCConfig,
                 runs: dict[tuple[str, str], list[EpisodeResult]]) -> dict:
    """One family's report: its backends' episodes (``runs``), training times and the
    inference speed, timed here on this process's own env and MPC."""
    env = RewardEnv(family_named(name), robot, near_start=0.0)
    policy, distilled = (_load_if_any(policy_dir(models, name, robot, d), name, robot)
                         for d in (False, True))
    mpc = MPCController(env, config)
    try:
        speed = inference_speed(env, policy or distilled, mpc, EVAL_SEED, INFERENCE_CALLS,
                                MPC_ITERATIONS)
    finally:
        mpc.close()
    speed["ok"] = speed["actions_per_s"] >= INFERENCE_BAR
    backends = {backend: summarise(runs[name, backend]) if (name, backend) in runs else None
                for backend in BACKENDS}
    return {"training": {"rl": _training(policy), DISTILLED: _training(distilled)},
            "distilled_path": str(policy_dir(models, name, robot, distilled=True)),
            "backends": backends, "inference": speed}


def run(families: list[str] | None = None, episodes: int = 10, robot: str = "so101",
        models: str | Path | None = None, config: MPCConfig | None = None,
        progress: bool = True, executor: Executor | None = None) -> dict:
    """The report of ``lang2policy bench rl`` (see the module docstring); the episodes run
    on ``executor`` (default: in this process, one after another)."""
    if episodes < 1:
        raise Lang2PolicyError(f"--episodes must be at least 1, not {episodes}")
    root = Path(models) if models is not None else share_dir() / "models"
    names = _families(families, root, robot)
    config = config or MPCConfig()
    report = {"benchmark": "rl", "robot": robot, "cpus": os.cpu_count(), "episodes": episodes,
              "first_seed": EVAL_SEED, "models": str(root),
              "mpc": {"samples": config.samples, "horizon_s": config.horizon,
                      "timestep_s": config.timestep, "threads": config.threads,
                      "proposals": config.proposals},
              "inference_bar": INFERENCE_BAR, "families": {}}
    total = len(names) * len(BACKENDS) * episodes
    with tqdm(total=total, desc="bench rl", unit="ep", disable=not progress) as bar:
        runs = _episodes(names, root, robot, episodes, config,
                         executor or Executor("local", 0), bar)
    for name in names:
        report["families"][name] = bench_family(name, root, robot, config, runs)
    report["inference_ok"] = all(f["inference"]["ok"] for f in report["families"].values())
    return report


def _row(name: str, backend: str, figures: dict | None) -> str:
    if figures is None:
        return f"  {name:<12} {backend:<10} n/a"
    seconds = figures["seconds_to_success"]
    return (f"  {name:<12} {backend:<10} {figures['successes']:>3}/{figures['episodes']:<4} "
            f"{'-' if seconds is None else f'{seconds:.2f} s':>9} {figures['smoothness']:>10.4f} "
            f"{figures['control_cost']:>10.4f} {figures['wall_seconds']:>8.3f} s")


def _training_text(training: dict | None) -> str:
    if training is None:
        return "n/a"
    seconds, steps = training["train_seconds"], training["timesteps"]
    if seconds is None or steps is None:
        return "not recorded"
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
    return f"{took} for {steps:,} steps"


def format_text(report: dict) -> str:
    mpc = report["mpc"]
    lines = [
        f"bench rl on the {report['robot']}: {report['episodes']} held-out goals per family "
        f"(seeds from {report['first_seed']}), the same goals and starts for every backend; "
        f"MPC {mpc['samples']} samples{' + IK proposals' if mpc['proposals'] else ''}, "
        f"{mpc['horizon_s']:g} s horizon, {mpc['threads']} threads, re-planned every control "
        f"period; {report['cpus']} CPUs",
        f"  {'family':<12} {'backend':<10} {'success':<8} {'t_success':>9} {'smooth rad':>10} "
        f"{'ctrl cost':>10} {'wall/ep':>10}",
    ]
    for name, family in report["families"].items():
        lines += [_row(name, backend, figures) for backend, figures in family["backends"].items()]
    for name, family in report["families"].items():
        speed, training = family["inference"], family["training"]
        lines.append(f"  {name}: training rl {_training_text(training['rl'])}, distilled "
                     f"{_training_text(training['distilled'])}")
        lines.append(
            f"  {name}: policy {speed['actions_per_s']:,} actions/s on one thread "
            f"({speed['act_us']} us) vs one MPC iteration {speed['mpc_iteration_ms']} ms "
            f"({speed['mpc_threads']} threads): {speed['actions_per_mpc_iteration']:,.0f} actions "
            f"per iteration -> {'ok' if speed['ok'] else 'BELOW'} "
            f"(bar {report['inference_bar']:,.0f} actions/s)")
    return "\n".join(lines)


def _family_list(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--families", type=_family_list, default=None,
                        help="comma-separated families (default: those with a shipped policy)")
    parser.add_argument("--episodes", type=int, default=10, help="held-out goals per family")
    parser.add_argument("--robot", default="so101", help="robot the policies are for")
    parser.add_argument("--models", default=None,
                        help="directory holding rl-<family>-<robot>/ (default: models/)")
    parser.add_argument("--samples", type=int, default=64, help="MPC rollouts per iteration")
    parser.add_argument("--horizon", type=float, default=0.5, help="MPC horizon (s)")
    parser.add_argument("--threads", type=int, default=2, help="MPC rollout threads")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes for the episodes (default 0 with --executor "
                        "local: in this process, one at a time, so wall/ep is an episode "
                        "alone; 2 with ray: the local cluster's CPUs)")  # fmt: skip
    add_executor_arguments(parser)


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench rl``."""
    config = MPCConfig(samples=args.samples, horizon=args.horizon, threads=args.threads)
    default = 2 if getattr(args, "executor", "local") == "ray" else 0
    workers = default if getattr(args, "workers", None) is None else args.workers
    return run(args.families, args.episodes, args.robot, args.models, config,
               progress=not args.json, executor=executor_from_args(args, workers=workers))


def exit_code(report: dict) -> int:
    """0 when every family's policy meets the inference bar."""
    return 0 if report["inference_ok"] else 1
