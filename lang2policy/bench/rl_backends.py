"""Inference speed for ``lang2policy bench rl``: policy actions per second beside one MPC
iteration, in the same run. The controllers and the episode runner the benchmark compares are
``lang2policy.rl.controllers``."""

from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from lang2policy.rl.controllers import MPCController
from lang2policy.rl.env import RewardEnv
from lang2policy.rl.policy_file import MLPPolicy


def inference_speed(env: RewardEnv, policy: MLPPolicy, mpc: MPCController, seed: int,
                    calls: int = 2000, iterations: int = 20) -> dict:
    """Policy actions per second on one thread beside the mean wall time of one MPC iteration,
    both from the state of ``seed``'s start (the MPC re-loads it before each iteration)."""
    obs, _ = env.reset(seed=seed)
    with threadpool_limits(limits=1):
        policy.act(obs)  # warm up
        began = time.perf_counter()
        for _ in range(calls):
            policy.act(obs)
        act_seconds = (time.perf_counter() - began) / calls
    mpc.start(env)
    mpc.sampler.improve(env.spec)  # warm up (thread pool, proposals)
    plan_seconds = []
    for _ in range(iterations):
        mpc.load(env)
        began = time.perf_counter()
        mpc.sampler.improve(env.spec)
        plan_seconds.append(time.perf_counter() - began)
    mpc_seconds = float(np.mean(plan_seconds))
    return {"calls": calls, "act_us": round(1e6 * act_seconds, 2),
            "actions_per_s": round(1.0 / act_seconds), "mpc_iterations": iterations,
            "mpc_iteration_ms": round(1000 * mpc_seconds, 2),
            "mpc_threads": mpc.config.threads,
            "actions_per_mpc_iteration": round(mpc_seconds / act_seconds, 1)}
