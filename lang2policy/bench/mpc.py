"""``lang2policy bench mpc``: rollout throughput, planning rate and control latency of the MPC,
side by side with a plain Python ``mj_step`` loop doing the same work, in one run.

Rows: (1) physics throughput for ``samples x horizon`` rollouts on the SO-101 planning model
(``mujoco.rollout`` on 1 and 2 threads against the Python loop); (2) full planning iterations
(sample, roll out, score with a reward spec, refit) per second for predictive sampling and CEM
on each backend; (3) control latency, from a measured state loaded into the planner to the
joint targets of the new plan.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np
from tqdm import tqdm

from lang2policy.bench.l2r_tasks import lift
from lang2policy.errors import Lang2PolicyError
from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.sampler import MPCConfig, Sampler
from lang2policy.rewards.spec import validate_spec
from lang2policy.scene.world import World


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _lift_spec(world: World):
    task = lift(world, np.random.default_rng(0))
    return validate_spec(task.reference, world.present).spec


def _throughput(pm: PlanningModel, config: MPCConfig, seconds: float) -> dict:
    planner = Sampler(pm, config)
    knots = np.tile(pm.data.ctrl, (config.samples, config.knots, 1))
    planner.rollout(knots)  # warm up (thread pool, caches)
    count, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        planner.rollout(knots)
        count += 1
    elapsed = time.perf_counter() - began
    planner.close()
    steps = count * config.samples * config.steps
    return {"backend": config.backend, "threads": config.threads,
            "steps_per_s": round(steps / elapsed), "batches": count}


def _planning(world: World, pm: PlanningModel, config: MPCConfig, seconds: float) -> dict:
    spec = _lift_spec(world)
    planner = Sampler(pm, config)
    latencies, plan_times = [], []
    began = time.perf_counter()
    while time.perf_counter() - began < seconds or len(latencies) < 3:
        start = time.perf_counter()
        pm.load_world(world)
        plan = planner.improve(spec)
        plan.control(float(pm.data.time) + 0.02, config)
        latencies.append(time.perf_counter() - start)
        plan_times.append(plan.seconds)
    planner.close()
    return {"sampler": config.sampler, "backend": config.backend, "samples": config.samples,
            "horizon_s": config.horizon, "steps": config.steps, "threads": config.threads,
            "iterations_per_s": round(len(plan_times) / sum(plan_times), 1),
            "latency_ms_p50": round(1000 * _percentile(latencies, 50), 1),
            "latency_ms_p95": round(1000 * _percentile(latencies, 95), 1)}


def run(robot: str = "so101", samples: int = 32, horizon: float = 0.5, seconds: float = 3.0,
        threads: int = 2, progress: bool = True) -> dict:
    world = World(robot)
    world.reset(0)
    pm = PlanningModel(world.description, world.present)
    pm.load_world(world)
    base = MPCConfig(samples=samples, horizon=horizon, threads=threads)
    jobs = [("throughput", replace(base, backend="python", threads=1)),
            ("throughput", replace(base, threads=1)),
            ("throughput", base)]
    jobs += [("planning", replace(base, sampler=sampler, backend=backend))
             for sampler in ("sampling", "cem") for backend in ("python", "rollout")]
    throughput, planning = [], []
    for kind, config in tqdm(jobs, desc="bench mpc", unit="case", disable=not progress):
        if kind == "throughput":
            throughput.append(_throughput(pm, config, seconds))
        else:
            planning.append(_planning(world, pm, config, seconds))
    python_steps = throughput[0]["steps_per_s"]
    for row in throughput:
        row["speedup_vs_python"] = round(row["steps_per_s"] / python_steps, 2)
    for row in planning:
        twin = next(r for r in planning
                    if r["sampler"] == row["sampler"] and r["backend"] == "python")
        row["speedup_vs_python"] = round(row["iterations_per_s"] / twin["iterations_per_s"], 2)
    return {"benchmark": "mpc", "robot": robot, "objects": len(world.present),
            "cpus": os.cpu_count(), "samples": samples, "horizon_s": horizon,
            "timestep_s": base.timestep, "throughput": throughput, "planning": planning}


def format_text(report: dict) -> str:
    lines = [f"MPC on {report['robot']} ({report['objects']} objects, {report['cpus']} CPUs): "
             f"{report['samples']} samples x {report['horizon_s']} s horizon at "
             f"{report['timestep_s']} s steps", "  rollout throughput:"]
    for row in report["throughput"]:
        lines.append(f"    {row['backend']:<8} {row['threads']} thread(s): "
                     f"{row['steps_per_s']:>9,} steps/s  (x{row['speedup_vs_python']} vs Python)")
    lines.append("  planning iterations (sample + roll out + score):")
    for row in report["planning"]:
        lines.append(f"    {row['sampler']:<9} {row['backend']:<8}: "
                     f"{row['iterations_per_s']:>6.1f} it/s, latency p50 "
                     f"{row['latency_ms_p50']:.1f} ms, p95 {row['latency_ms_p95']:.1f} ms  "
                     f"(x{row['speedup_vs_python']} vs Python)")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=32, help="rollouts per iteration")
    parser.add_argument("--horizon", type=float, default=0.5, help="planning horizon (s)")
    parser.add_argument("--threads", type=int, default=2, help="rollout threads")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench mpc``."""
    if args.seconds <= 0 or not 2 <= args.samples <= 1024:
        raise Lang2PolicyError("--seconds must be positive and --samples in [2, 1024]")
    return run(samples=args.samples, horizon=args.horizon, seconds=args.seconds,
               threads=args.threads, progress=not args.json)
