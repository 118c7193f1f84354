"""The one interface every VLA policy backend offers, and the check every answer passes.

A backend turns an observation (camera images, the SO-101's joint state, an instruction) into a
chunk of future actions. The chunk is always ``float32 [chunk, 6]``: absolute joint targets in
rad for ``ACTION_NAMES`` (shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll) and
the gripper opening 0 (closed) .. 1 (open), one row per ``1 / fps`` s, whichever model made it.

Every failure of ``act_chunk`` raises ``PolicyBackendError`` and returns nothing: the caller
(the VLA node) holds the arm on it. A remote answer is used whole or not at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.spec.loader_limits import REMOTE_MAX_CHUNK_ROWS, REMOTE_MAX_CHUNK_S
from lang2policy.vla.spec.schema import ACTION_DIM, FPS, STATE_NAMES

ACTION_NAMES = STATE_NAMES
GRIPPER = ACTION_NAMES.index("gripper")
EXPECTED_ACTIONS = (
    f"({ACTION_DIM},) or (chunk, {ACTION_DIM}) real numbers: absolute joint targets in rad for "
    f"{', '.join(ACTION_NAMES[:GRIPPER])} and the gripper opening 0..1"
)


@runtime_checkable
class PolicyBackend(Protocol):
    """What the VLA node calls, from one thread: a backend is not thread-safe."""

    @property
    def name(self) -> str:
        """Where the actions come from, for logs and status ("local", "openpi://host:port")."""
        ...

    @property
    def cameras(self) -> tuple[str, ...]:
        """The camera images ``act_chunk`` needs; images of other cameras are ignored."""
        ...

    def reset(self) -> None:
        """Start a new episode: forget what the previous one left behind."""
        ...

    def act_chunk(
        self, images: Mapping[str, np.ndarray], state: np.ndarray, instruction: str
    ) -> np.ndarray:
        """The next action chunk ``float32 [chunk, 6]`` for uint8 ``H x W x 3`` ``images`` by
        camera, the measured ``state`` (float32 [6], same names as the actions) and the
        instruction; ``PolicyBackendError`` on any failure."""
        ...

    def close(self) -> None:
        """Release connections; ``act_chunk`` may reconnect afterwards."""
        ...


@dataclass(frozen=True)
class RemoteLimits:
    """How long a remote backend waits and how much it reads before giving up.

    ``connect_s``: reaching the server (TCP, the websocket handshake and openpi's metadata
    frame). ``request_s``: one whole request, from sending the observation to the last byte
    of the answer (a server that trickles bytes is cut off too). ``max_answer_bytes``: a bigger
    answer is refused before it is read whole. ``max_chunk_s``: the most time one answered
    chunk may cover, one row per ``1 / FPS`` s (``max_chunk_rows``; 10 s is 100 rows at 10 Hz):
    a longer chunk is refused, whatever its size in bytes. The system resolver's lookup of a
    host *name* is not bounded by ``connect_s``: give an IP address where that matters.
    """

    connect_s: float = 3.0
    request_s: float = 2.0
    max_answer_bytes: int = 1 << 20
    max_chunk_s: float = REMOTE_MAX_CHUNK_S

    def __post_init__(self) -> None:
        for field in ("connect_s", "request_s", "max_chunk_s"):
            value = getattr(self, field)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{field} must be a finite number of seconds > 0, got {value!r}")
        if self.max_chunk_rows < 1:
            raise ConfigError(
                f"max_chunk_s={self.max_chunk_s!r} is less than one action (1/{FPS} s)"
            )
        size = self.max_answer_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 64:
            raise ConfigError(f"max_answer_bytes must be an integer >= 64, got {size!r}")

    @property
    def max_chunk_rows(self) -> int:
        """The most rows an answered chunk may have: ``max_chunk_s`` of actions at FPS."""
        return math.floor(self.max_chunk_s * FPS + 1e-9)


def validate_chunk(
    actions: object, source: str, max_rows: int = REMOTE_MAX_CHUNK_ROWS
) -> np.ndarray:
    """``actions`` as a fresh ``float32 [chunk, 6]`` with the gripper clipped to 0..1.

    A single action ``[6]`` becomes a chunk of one. Anything else (another shape or dtype, an
    empty chunk or one of more than ``max_rows`` rows, NaN or infinity, also after the cast to
    float32) raises ``PolicyBackendError`` naming ``source`` and saying what was received and
    what is expected. The rows are counted before anything is copied: a caller keeps a chunk
    until its last row is due, so 43,000 rows would be held for over an hour.
    """
    if not isinstance(actions, np.ndarray):
        raise PolicyBackendError(
            f"{source}: actions are {type(actions).__name__}; expected an array {EXPECTED_ACTIONS}"
        )
    if actions.dtype.kind not in "fiu":
        raise PolicyBackendError(
            f"{source}: actions of dtype {actions.dtype}; expected {EXPECTED_ACTIONS}"
        )
    chunk = actions[None] if actions.shape == (ACTION_DIM,) else actions
    if chunk.ndim != 2 or chunk.shape[0] < 1 or chunk.shape[1] != ACTION_DIM:
        raise PolicyBackendError(
            f"{source}: actions of shape {actions.shape}; expected {EXPECTED_ACTIONS} "
            "(a model trained for another robot or action space cannot drive the SO-101)"
        )
    if len(chunk) > max_rows:
        raise PolicyBackendError(
            f"{source}: the chunk has {len(chunk)} rows ({len(chunk) / FPS:g} s of actions at "
            f"{FPS} Hz); at most {max_rows} rows ({max_rows / FPS:g} s, max_chunk_s) are accepted"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is refused below
        chunk = chunk.astype(np.float32)  # a copy: never a view of a network buffer
    finite = np.isfinite(chunk).all(axis=1)
    if not finite.all():
        rows = np.flatnonzero(~finite).tolist()
        raise PolicyBackendError(
            f"{source}: actions hold NaN or infinite values (in float32) in rows {rows[:10]} "
            f"of {len(chunk)}; every value must be finite"
        )
    chunk[:, GRIPPER] = np.clip(chunk[:, GRIPPER], 0.0, 1.0)
    return chunk
