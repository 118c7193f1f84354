"""The episode types of the VLA's recordings and the scene set-up they share (issue 17): what
an episode is (``EpisodeSpec``, ``Episode``) and how its seed becomes a feasible, randomised
layout (``set_up_scene``). Demonstrations (``demos``), scene views (``scene_views``) and
evaluation rollouts (``rollout``) all build on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import ConfigError, Lang2PolicyError, UnreachableError
from lang2policy.session.sim import SimSession
from lang2policy.vla.sim.oracle import check_feasible
from lang2policy.vla.sim.scenes import Appearance, scene_objects
from lang2policy.vla.spec.tasks import FAMILIES, Task

LAYOUT_TRIES = 20


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to make: what, in which words, on which seed, for which split."""

    index: int
    task: Task
    phrasing: int
    seed: int
    split: str = "train"
    view: bool = False  # a one-frame scene view (``scene_views``), not a demonstration

    @property
    def instruction(self) -> str:
        return self.task.instruction(self.phrasing)


@dataclass
class Episode:
    """A recorded episode: its spec, frames, and the judge's verdict at the end."""

    spec: EpisodeSpec
    images: dict[str, np.ndarray]
    state: np.ndarray
    action: np.ndarray
    success: bool
    detail: str
    sim_seconds: float
    wall_seconds: float
    environment: np.ndarray | None = None  # (T, ENV_DIM): block and goal (environment_state)


def check_families(families: Sequence[str]) -> None:
    """Raise unless every name is a task family."""
    for family in families:
        if family not in FAMILIES:
            raise Lang2PolicyError(f"unknown task family {family!r}; families: {FAMILIES}")


def set_up_scene(session: SimSession, spec: EpisodeSpec) -> Appearance:
    """Reset ``session`` to a layout of ``spec``'s seed where the oracle can do the task, with
    the seed's look applied; raises ``UnreachableError`` after ``LAYOUT_TRIES`` layouts."""
    rng = np.random.default_rng(spec.seed)
    for _ in range(LAYOUT_TRIES):
        try:
            session.reset(int(rng.integers(2**31)), scene_objects(rng, spec.task))
            check_feasible(session, spec.task)
        except (UnreachableError, ConfigError):  # out of reach, or the objects did not fit
            continue
        appearance = Appearance.draw(rng, session.world)
        appearance.apply(session.world)
        return appearance
    raise UnreachableError(f"no feasible layout for {spec.task} in {LAYOUT_TRIES} tries")
