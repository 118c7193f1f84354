"""Instruction embeddings for the VLA: a sentence vector per instruction, computed once.

The policy is conditioned on a frozen sentence embedding of the instruction (BAKU's recipe:
all-MiniLM-L6-v2, 384-d, the same model the correction memory uses, bundled and offline). A
dataset holds a few hundred distinct instructions and a running policy sees the same one at
every step, so every distinct string is encoded once and kept.

The encoder is a plain function ``texts -> float32 [n, dim]`` so tests and tools can hand in a
cheap one; ``minilm_encode`` is the real one, loaded lazily on the first unseen string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lang2policy.errors import ConfigError, Lang2PolicyError

MINILM = "all-MiniLM-L6-v2"
MINILM_DIM = 384
# MiniLM with the instruction's slots (``slots``: block and bowl colour, side) appended
MINILM_SLOTS = MINILM + "+slots"

Encoder = Callable[[Sequence[str]], np.ndarray]


def minilm_encode(texts: Sequence[str]) -> np.ndarray:
    """Unit-length MiniLM embeddings ``float32 [len(texts), 384]`` of ``texts`` (offline)."""
    from lang2policy.corrections.embedder import load_minilm

    model = load_minilm("cpu", threads=None)  # keep the caller's torch thread setting
    vectors = model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, np.float32)


def minilm_slots_encode(texts: Sequence[str]) -> np.ndarray:
    """MiniLM embeddings with the slot one-hots appended ``float32 [n, 384 + SLOT_DIM]``."""
    from lang2policy.vla.model.slots import slot_vectors

    return np.concatenate([minilm_encode(texts), slot_vectors(texts)], axis=1).astype(np.float32)


def language_dim(name: str) -> int | None:
    """The vector size of a known encoder (None for one this module does not know)."""
    from lang2policy.vla.model.slots import SLOT_DIM

    return {MINILM: MINILM_DIM, MINILM_SLOTS: MINILM_DIM + SLOT_DIM}.get(name)


def encoder_for(name: str) -> Encoder:
    """The encoder a model was trained with, by the name its config records."""
    encoders = {MINILM: minilm_encode, MINILM_SLOTS: minilm_slots_encode}
    if name in encoders:
        return encoders[name]
    raise ConfigError(
        f"unknown language encoder {name!r}: this version knows {sorted(encoders)}; pass an "
        "encoder function explicitly for others"
    )


class InstructionEmbeddings:
    """A cache ``instruction -> vector`` in front of an encoder."""

    def __init__(self, encode: Encoder, dim: int) -> None:
        self._encode = encode
        self.dim = dim
        self._cache: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._cache)

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        """``float32 [len(texts), dim]``; each distinct unseen string is encoded once, together."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = np.asarray(self._encode(missing), np.float32)
            if vectors.shape != (len(missing), self.dim):
                raise Lang2PolicyError(
                    f"the language encoder returned shape {vectors.shape} for {len(missing)} "
                    f"texts; the model expects [n, {self.dim}]"
                )
            self._cache.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._cache[t] for t in texts])

    def embed(self, text: str) -> np.ndarray:
        """``float32 [dim]`` for one instruction."""
        return self.embed_many([text])[0]
