"""``lang2policy bench pickplace --perception camera``: the scripted pick-and-place with no
ground truth in its decision path, beside the ground-truth run of the same episodes (issue 34).

Each episode's layout is drawn on the simulated world under ``--realism``; its block and bowl
are drawn among the objects the camera can see at the start (at least half of each in view
beside the arm, ``bench.perception``'s rule: the ones a terminal could have listed). The
camera run (``session.camera.CameraSession``) picks and places from what camera perception
reports; the ground-truth run does the same episode from the simulator's poses. Success is the
simulator's verdict in both. Colours are calibrated per rig of ``RIG_EPISODES`` episodes (one
user's objects and table), as ``lang2policy calibrate colors`` would, before its episodes.
"""

from __future__ import annotations

import time

import numpy as np
from tqdm import tqdm

from lang2policy.bench import camera_route
from lang2policy.bench.perception import (
    ARM_GROUP,
    VISIBLE_PX,
    VISIBLE_SHARE,
    _visible_pixels,
    _without_group,
)
from lang2policy.bench.pickplace_episode import put_block_in_bowl

RIG_EPISODES = 10


def visible_objects(session, camera: str) -> list[str]:
    """The objects on the simulated table the camera shows clearly (see the module doc)."""
    import mujoco

    world = session.truth.world
    renderer = mujoco.Renderer(world.model, 224, 224)
    try:
        renderer.enable_segmentation_rendering()
        with session.truth_lock():  # the emulated bus may step the world meanwhile
            renderer.update_scene(world.data, camera=camera, scene_option=_without_group(ARM_GROUP))
        whole = _visible_pixels(world, renderer.render()[..., 0])
        with session.truth_lock():
            renderer.update_scene(world.data, camera=camera)
        shown = _visible_pixels(world, renderer.render()[..., 0])
    finally:
        renderer.close()
    return [n for n in world.present if shown[n] >= max(VISIBLE_PX, VISIBLE_SHARE * whole[n])]


def camera_episode(session, seed: int):
    """One episode through camera perception: (its result, the names perception listed)."""
    seen = session.reset(seed)
    shown = visible_objects(session, session.camera)
    rng = np.random.default_rng(seed + 10_000)
    blocks = [n for n in shown if n.endswith("block")]
    bowls = [n for n in shown if n.endswith("bowl")]
    if not blocks or not bowls:
        return None, seen
    block, bowl = str(rng.choice(blocks)), str(rng.choice(bowls))
    session.sync()
    world, settle = session.truth.world, getattr(session, "settle", None)
    return put_block_in_bowl(session.primitives, world, seed, block, bowl, settle), seen


def run(
    robot: str, episodes: int, first_seed: int, realism: str, progress: bool, bus: bool = False
) -> dict:
    """``bus``: the SO-101 driver on the emulated servo bus (``session.bus_camera``) instead
    of the simulated arm; the ground-truth run stays on the simulated arm."""
    from lang2policy.realism import load_realism
    from lang2policy.session.sim import SimSession

    profile = load_realism(realism)
    camera = camera_route.camera_session(robot, profile, bus)
    truth = SimSession(robot)
    camera_results, truth_results, skipped, phantoms = [], [], [], 0
    started = time.perf_counter()
    bar = tqdm(range(first_seed, first_seed + episodes), desc=f"pickplace camera {realism}",
               unit="ep", disable=not progress)  # fmt: skip
    try:
        for seed in bar:
            if seed == first_seed or seed % RIG_EPISODES == 0:
                camera.use_rig(seed // RIG_EPISODES)
            result, seen = camera_episode(camera, seed)
            if result is None:
                skipped.append(seed)
                continue
            phantoms += len(set(seen) - set(camera.truth.world.present))
            camera_results.append(result)
            truth_results.append(_ground_truth(truth, seed, result.block, result.bowl))
            bar.set_postfix(camera=_rate(camera_results), truth=_rate(truth_results))
    finally:
        camera.close()
    return {
        "benchmark": "pickplace",
        "robot": robot,
        **camera_route.route_fields(profile, bus),
        "episodes": len(camera_results),
        "first_seed": first_seed,
        "skipped": skipped,
        "phantom_names_at_start": phantoms,
        "camera": _summary(camera_results),
        "ground_truth": _summary(truth_results),
        "wall_seconds": round(time.perf_counter() - started, 2),
    }


def _ground_truth(session, seed: int, block: str, bowl: str):
    session.reset(seed)
    return put_block_in_bowl(session.primitives, session.world, seed, block, bowl)


def _rate(results) -> str:
    return f"{sum(r.success for r in results)}/{len(results)}"


def _summary(results) -> dict:
    return {
        "successes": sum(r.success for r in results),
        "success_rate": sum(r.success for r in results) / max(1, len(results)),
        "mean_sim_seconds": sum(r.sim_seconds for r in results) / max(1, len(results)),
        "failures": [r.as_dict() for r in results if not r.success],
    }


def format_text(report: dict) -> str:
    camera, truth = report["camera"], report["ground_truth"]
    lines = [
        f"pick-and-place on {report['robot']}, {camera_route.route_text(report)}: "
        f"{camera['successes']}/{report['episodes']} ({camera['success_rate']:.0%}); "
        f"ground truth, same episodes: {truth['successes']}/{report['episodes']} "
        f"({truth['success_rate']:.0%})",
        f"  names perceived at the start that were not on the table: "
        f"{report['phantom_names_at_start']}; episodes with no visible block or bowl: "
        f"{len(report['skipped'])}",
    ]
    lines += [
        f"  camera failed seed {f['seed']}: {f['block']} -> {f['bowl']} {f['error']}"
        for f in camera["failures"]
    ]
    lines += [
        f"  ground truth failed seed {f['seed']}: {f['block']} -> {f['bowl']} {f['error']}"
        for f in truth["failures"]
    ]
    return "\n".join(lines)
