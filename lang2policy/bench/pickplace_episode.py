"""One scripted pick-and-place episode and its result, shared by ``bench pickplace``'s routes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from lang2policy.errors import Lang2PolicyError

SETTLE_SECONDS = 0.5  # simulated time after the motion before the verdict


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    block: str
    bowl: str
    success: bool
    error: str
    sim_seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def put_block_in_bowl(
    primitives,
    world,
    seed: int,
    block: str,
    bowl: str,
    settle: Callable[[float], None] | None = None,
) -> EpisodeResult:
    """``primitives`` put ``block`` into ``bowl`` and go home; ``world`` (the simulated one)
    judges it after ``SETTLE_SECONDS`` (``settle``: how they pass where the world runs on its
    own clock; default: stepped). A skill's error ends the episode, recorded."""
    start, error = world.time, ""
    try:
        primitives.put_first_on_second(block, bowl)
        primitives.go_home()
    except Lang2PolicyError as exc:
        error = f"{type(exc).__name__}: {exc}"
    (settle or world.step_seconds)(SETTLE_SECONDS)
    return EpisodeResult(seed, block, bowl, world.is_in(block, bowl), error, world.time - start)
