"""``lang2policy bench sim``: physics throughput, real-time factor and camera frame rate.

All are measured in one run on the same scene: physics while the arm sweeps through a motion
(a resting scene sleeps and would flatter the numbers), rendering at 224x224. As a baseline the
physics is timed again with island sleeping switched off, the same motion from the same state.
"""

from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np

from lang2policy import cli_types
from lang2policy.errors import Lang2PolicyError
from lang2policy.scene.render import CameraRenderer
from lang2policy.scene.world import World


def _moving_targets(world: World, t: float) -> np.ndarray:
    span = world.arm.upper - world.arm.lower
    return world.arm.home + 0.15 * span * np.sin(2 * np.pi * 0.5 * t) * 0.5


def measure_physics(world: World, sim_seconds: float) -> dict:
    control_period = 0.02
    steps_per_control = round(control_period / world.model.opt.timestep)
    controls = round(sim_seconds / control_period)
    started = time.perf_counter()
    for i in range(controls):
        world.set_arm_targets(_moving_targets(world, i * control_period), 1.0)
        world.step(steps_per_control)
    wall = time.perf_counter() - started
    steps = controls * steps_per_control
    return {
        "physics_steps_per_s": round(steps / wall),
        "realtime_factor": round(steps * world.model.opt.timestep / wall, 2),
        "timestep_s": world.model.opt.timestep,
    }


def measure_render(world: World, camera: str, frames: int, size: int = 224) -> dict:
    renderer = CameraRenderer(world.model, size, size)
    renderer.render(world.data, camera)  # first frame builds GL state; not timed
    started = time.perf_counter()
    for _ in range(frames):
        world.step(10)
        renderer.render(world.data, camera)
    wall = time.perf_counter() - started
    renderer.close()
    return {"render_fps": round(frames / wall, 1), "render_size": [size, size], "camera": camera}


def measure_physics_without_sleep(world: World, sim_seconds: float, seed: int) -> dict:
    """The baseline: same motion from the same state, island sleeping disabled."""
    world.reset(seed)
    sleep_bit = int(mujoco.mjtEnableBit.mjENBL_SLEEP)
    world.model.opt.enableflags &= ~sleep_bit
    try:
        baseline = measure_physics(world, sim_seconds)
    finally:
        world.model.opt.enableflags |= sleep_bit
    return {"baseline_no_sleep_steps_per_s": baseline["physics_steps_per_s"]}


def run(robot: str, sim_seconds: float = 10.0, frames: int = 60, seed: int = 0) -> dict:
    world = World(robot)
    report = {"benchmark": "sim", "robot": robot, "sim_seconds": sim_seconds}
    report |= measure_physics_without_sleep(world, sim_seconds, seed)
    world.reset(seed)
    report |= measure_physics(world, sim_seconds)
    report["sleep_speedup"] = round(
        report["physics_steps_per_s"] / report["baseline_no_sleep_steps_per_s"], 2
    )
    report |= measure_render(world, "front", frames)
    return report


def format_text(report: dict) -> str:
    return (
        f"simulation on {report['robot']}: {report['physics_steps_per_s']} physics steps/s "
        f"(timestep {report['timestep_s'] * 1000:.0f} ms) = "
        f"{report['realtime_factor']}x real time "
        f"({report['sleep_speedup']}x the {report['baseline_no_sleep_steps_per_s']} steps/s "
        "with island sleeping off); "
        f"rendering {report['render_fps']} frames/s at "
        f"{report['render_size'][0]}x{report['render_size'][1]} ({report['camera']} camera)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli_types.add_robot(parser)
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated seconds to time")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench sim``."""
    if args.seconds <= 0:
        raise Lang2PolicyError("--seconds must be positive")
    return run(args.robot, args.seconds)
