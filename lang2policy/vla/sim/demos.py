"""Scripted demonstrations for the VLA (issue 17): seeded, randomised scenes, the oracle doing
each task, and the frames it produced (``lang2policy record demos``).

Every episode is fixed by its ``EpisodeSpec`` (task, phrasing, seed): the scene's layout,
distractors and look come from the seed, so an episode can be made again exactly. Training
episodes use seen combinations and seen phrasings only (``tasks``). A layout where the oracle
cannot do the task (a push that would leave the workspace, a block out of reach), or where
the drawn objects do not fit on the table, is redrawn from the same seed's generator.
Failed demonstrations are kept, marked ``success = False``.

Episodes run in worker processes (``workers``), each with its own simulation and renderer;
the parent receives whole episodes and writes them in order.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator, Sequence

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.session.sim import SimSession
from lang2policy.vla.sim.environment_state import environment_state, task_goal
from lang2policy.vla.sim.episodes import Episode, EpisodeSpec, check_families, set_up_scene
from lang2policy.vla.sim.frames import FrameRecorder, frame_renderer
from lang2policy.vla.sim.judge import judge, start_positions
from lang2policy.vla.sim.oracle import run_oracle
from lang2policy.vla.sim.scene_views import record_view
from lang2policy.vla.spec.tasks import sample_task, seen_phrasings


def training_specs(families: Sequence[str], per_family: int, seed: int) -> list[EpisodeSpec]:
    """``per_family`` training episodes of each family: seen combinations, seen phrasings."""
    check_families(families)
    rng = np.random.default_rng(seed)
    specs = []
    for family in families:
        phrasings = list(seen_phrasings(family))
        for _ in range(per_family):
            task = sample_task(rng, family, seen=True)
            phrasing = phrasings[len(specs) % len(phrasings)]
            # Below 2**30: evaluation layouts use seeds above it (rollout.evaluation_specs).
            specs.append(EpisodeSpec(len(specs), task, phrasing, int(rng.integers(2**30))))
    return specs


def record_episode(session: SimSession, renderer, spec: EpisodeSpec) -> Episode:
    """Set up ``spec``'s scene, run the oracle while recording frames, judge the result."""
    started = time.monotonic()
    appearance = set_up_scene(session, spec)
    if hasattr(renderer, "sync_look"):
        renderer.sync_look()
    world, task = session.world, spec.task
    goal = task_goal(world, task)
    recorder = FrameRecorder(
        session.robot, renderer, environment=lambda: environment_state(world, task, goal)
    )
    session.robot.observers.append(recorder)
    start, sim_start = start_positions(world, task), world.time
    try:
        recorder.take()
        try:
            run_oracle(session, spec.task)
            note = ""
        except Lang2PolicyError as exc:  # kept, marked failed
            note = f"; oracle: {type(exc).__name__}: {exc}"
        success, detail = judge(session.world, spec.task, start)
    finally:
        session.robot.observers.remove(recorder)
        appearance.restore(session.world)
    images, state, action = recorder.arrays()
    return Episode(
        spec, images, state, action, success, detail + note,
        session.world.time - sim_start, time.monotonic() - started,
        recorder.environment_array(),
    )  # fmt: skip


def record(session: SimSession, renderer, spec: EpisodeSpec) -> Episode:
    """``spec``'s episode: a scene view (one frame) or a recorded demonstration."""
    if spec.view:
        return record_view(session, renderer, spec)
    return record_episode(session, renderer, spec)


# ----------------------------------------------------------------- worker processes
def _session(realism: str) -> SimSession:
    """The simulated SO-101 under the realism level or file ``realism`` ("off": as modelled)."""
    from lang2policy.realism import load_realism

    return SimSession("so101", realism=load_realism(realism))


def _worker(jobs, results, realism: str) -> None:
    session = _session(realism)
    renderer = frame_renderer(session.world)
    for spec in iter(jobs.get, None):
        try:
            results.put(record(session, renderer, spec))
        except Exception as exc:  # reported to the parent, which says which episode
            results.put((spec, f"{type(exc).__name__}: {exc}"))


def generate(
    specs: Sequence[EpisodeSpec],
    workers: int = 2,
    realism: str = "off",
) -> Iterator[Episode]:
    """Record every spec (in ``workers`` processes; 0 = in this process) and yield the
    episodes in ``specs``' order, the world and the cameras' frames under ``realism`` (a
    level or a realism file: each episode's seed draws its look). An episode that raised is an
    error naming it."""
    if workers <= 0:
        session = _session(realism)
        renderer = frame_renderer(session.world)
        for spec in specs:
            yield record(session, renderer, spec)
        return
    yield from _generate_in_workers(specs, workers, realism)


def _generate_in_workers(
    specs: Sequence[EpisodeSpec], workers: int, realism: str
) -> Iterator[Episode]:
    context = multiprocessing.get_context("spawn")  # no forked GL contexts
    jobs, results = context.Queue(), context.Queue()
    processes = [
        context.Process(target=_worker, args=(jobs, results, realism), daemon=True)
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    for spec in specs:
        jobs.put(spec)
    for _ in processes:
        jobs.put(None)
    pending: dict[int, Episode] = {}
    try:
        for spec in specs:
            while spec.index not in pending:
                pending.update(_receive(results, processes))
            yield pending.pop(spec.index)
    finally:
        for process in processes:
            process.terminate() if process.is_alive() else None
            process.join(timeout=5)


def _receive(results, processes) -> dict[int, Episode]:
    while True:
        try:
            item = results.get(timeout=5.0)
            break
        except Exception:  # queue.Empty: check that the workers live
            if not any(p.is_alive() for p in processes):
                raise Lang2PolicyError("every demonstration worker exited") from None
    if isinstance(item, tuple):
        spec, error = item
        raise Lang2PolicyError(f"episode {spec.index} ({spec.instruction!r}) failed: {error}")
    return {item.spec.index: item}
