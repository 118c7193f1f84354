"""Scene views: single frames of randomised layouts with the arm at rest, labelled with the scene
state, to teach the VLA's scene head to find the named object on many more layouts than the
demonstrations cover (issue 17).

Why: the second checkpoint's scene-state validation loss stopped improving after 6,000 steps
while its training loss kept falling; 717 demonstration layouts were too few. A demonstration
costs the oracle's whole motion (about 2.6 s of CPU); a view costs a layout and two renders. The
views are the first frame of an episode that never runs: the arm at its start pose, a task and
one of its seen phrasings, the cameras and ``environment_state``. They go into the same dataset
as one-frame episodes marked ``view``; training uses them for the scene loss only (their action
is the state, a hold, and is masked out of the action loss) and never validates on them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from lang2policy.errors import UnreachableError
from lang2policy.session.sim import SimSession
from lang2policy.vla.sim.environment_state import environment_state, task_goal
from lang2policy.vla.sim.episodes import Episode, EpisodeSpec, check_families, set_up_scene
from lang2policy.vla.sim.frames import sensor_frame
from lang2policy.vla.sim.scenes import Appearance
from lang2policy.vla.spec.schema import CAMERAS
from lang2policy.vla.spec.tasks import sample_task, seen_phrasings

# View seeds lie in [2**31, 2**31 + 2**30): demos use [0, 2**30), evaluations [2**30, 2**31).
VIEW_SEED_OFFSET = 2**31
VIEW_LAYOUT_SEEDS = 5  # seeds tried (spec.seed + 7919 k) before a view gives up


def view_specs(
    families: Sequence[str], per_family: int, seed: int, first_index: int = 0
) -> list[EpisodeSpec]:
    """``per_family`` view specs per family: seen combinations and phrasings, their own seeds."""
    check_families(families)
    rng = np.random.default_rng([seed, 1])
    specs = []
    for family in families:
        phrasings = list(seen_phrasings(family))
        for _ in range(per_family):
            task = sample_task(rng, family, seen=True)
            phrasing = phrasings[int(rng.integers(len(phrasings)))]
            view_seed = VIEW_SEED_OFFSET + int(rng.integers(2**30))
            index = first_index + len(specs)
            specs.append(EpisodeSpec(index, task, phrasing, view_seed, view=True))
    return specs


def _set_up_some_layout(session: SimSession, spec: EpisodeSpec) -> Appearance:
    """``set_up_scene`` for ``spec``, or for the next seeds when no layout of it is feasible
    (a view is any layout of its task; a rare infeasible draw must not end a long recording)."""
    for attempt in range(VIEW_LAYOUT_SEEDS - 1):
        try:
            return set_up_scene(session, replace(spec, seed=spec.seed + 7919 * attempt))
        except UnreachableError:
            continue
    return set_up_scene(session, replace(spec, seed=spec.seed + 7919 * (VIEW_LAYOUT_SEEDS - 1)))


def record_view(session: SimSession, renderer, spec: EpisodeSpec) -> Episode:
    """The one-frame ``Episode`` of ``spec``'s layout with the arm at rest."""
    started = time.monotonic()
    appearance = _set_up_some_layout(session, spec)
    try:
        if hasattr(renderer, "sync_look"):
            renderer.sync_look()
        world = session.world
        images = {c: sensor_frame(world, renderer.render(world.data, c), 0)[None] for c in CAMERAS}
        state = session.robot.get_observation().position.astype(np.float32)[None]
        scene = environment_state(world, spec.task, task_goal(world, spec.task))[None]
    finally:
        appearance.restore(session.world)
    return Episode(
        spec, images, state, state.copy(), True, "view (no motion)", 0.0,
        time.monotonic() - started, scene,
    )  # fmt: skip
