"""Scripted demonstrations for the VLA (issue 17): seeded, randomised scenes, the oracle doing
each task, and the frames it produced (``lang2policy record demos``).

Every episode is fixed by its ``EpisodeSpec`` (task, phrasing, seed): the scene's layout,
distractors and look come from the seed, so an episode can be made again exactly. Training
episodes use seen combinations and seen phrasings only (``tasks``). A layout where the oracle
cannot do the task (a push that would leave the workspace, a block out of reach), or where
the drawn objects do not fit on the table, is redrawn from the same seed's generator.
Failed demonstrations are kept, marked ``success = False``.

Episodes run in worker processes (``workers``; on this machine or on Ray,
``lang2policy.parallel.executor``), each with its own simulation and renderer; the parent
receives whole episodes and writes them in order (or, with ``record demos --shard-size``, each
worker writes its share of episodes, ``worker_state`` and ``record_or_error``, as a dataset
that the parent merges).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.parallel.executor import Executor, run_ordered
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


def worker_state(realism: str) -> tuple:
    """A worker's own simulation and renderer, made once and kept for its episodes (here and
    by ``record demos --shard-size``, whose workers write their episodes themselves)."""
    session = _session(realism)
    return session, frame_renderer(session.world)


def record_or_error(state: tuple, spec: EpisodeSpec) -> Episode | tuple:
    """``spec``'s episode on a worker's ``state``, or ``(spec, error)`` if it raised."""
    session, renderer = state
    try:
        return record(session, renderer, spec)
    except Exception as exc:  # reported to the parent, which says which episode
        return (spec, f"{type(exc).__name__}: {exc}")


def generate(
    specs: Sequence[EpisodeSpec],
    workers: int = 2,
    realism: str = "off",
    executor: Executor | None = None,
) -> Iterator[Episode]:
    """Record every spec (in ``workers`` processes; 0 = in this process; or on ``executor``,
    local or Ray) and yield the episodes in ``specs``' order, the world and the cameras'
    frames under ``realism`` (a level or a realism file: each episode's seed draws its look).
    An episode that raised is an error naming it."""
    chosen = executor or Executor("local", workers)
    for item in run_ordered(chosen, worker_state, (realism,), record_or_error, list(specs),
                            label=_label):  # fmt: skip
        if isinstance(item, tuple):
            spec, error = item
            raise Lang2PolicyError(f"episode {spec.index} ({spec.instruction!r}) failed: {error}")
        yield item


def _label(spec: EpisodeSpec) -> str:
    return f"episode {spec.index} ({spec.instruction!r})"
