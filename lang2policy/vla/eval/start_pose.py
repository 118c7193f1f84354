"""Where the arm is when a skill starts (issue 18): at rest, as in every demonstration, or
``away``: somewhere above the table, as after an earlier skill in the graph.

The demonstrations all start with the arm at rest, so a policy trained on them meets an
``away`` start as a new condition. That is a real one: in the graph a second skill starts
wherever the first one left the arm. ``bench vla-corrections --start away`` uses it as the
condition in which a person corrects the policy and it is fine-tuned on the corrections.

An ``away`` start is drawn from the episode's seed (its own stream, so the scene's layout is
unchanged): a tool centre point in ``AWAY_BOX``, pointing down, reached by the motion
primitives before the episode's clock starts. Points the arm cannot reach are redrawn.
"""

from __future__ import annotations

import numpy as np

from lang2policy.errors import ConfigError, UnreachableError
from lang2policy.session.sim import SimSession

STARTS = ("rest", "away")
AWAY_BOX = ((0.12, 0.22), (-0.12, 0.12), (0.08, 0.14))  # m: x, y, z of the tool centre point
_TRIES = 50
_STREAM = 0x5714  # the start's random stream, beside the layout's (same seed)


def check_start(start: str) -> str:
    """``start`` if it is one of ``STARTS``; else a ``ConfigError`` naming them."""
    if start not in STARTS:
        raise ConfigError(f"start must be one of {STARTS}, got {start!r}")
    return start


def away_point(seed: int, attempt: int = 0) -> np.ndarray:
    """The ``attempt``-th tool point drawn for an ``away`` start of the episode ``seed``."""
    rng = np.random.default_rng([int(seed), _STREAM, attempt])
    return np.array([rng.uniform(low, high) for low, high in AWAY_BOX])


def move_to_start(session: SimSession, seed: int, start: str) -> np.ndarray | None:
    """Put the arm where an episode of ``seed`` starts: nothing for ``rest``; for ``away`` the
    first reachable ``away_point``, reached and settled. Returns that point (None: rest)."""
    if check_start(start) == "rest":
        return None
    for attempt in range(_TRIES):
        point = away_point(seed, attempt)
        try:
            session.primitives.move_to_position(point)
        except UnreachableError:
            continue
        return point
    raise UnreachableError(f"no reachable away start in {_TRIES} draws for seed {seed}")
