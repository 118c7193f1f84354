"""Corrections: classified and routed, applied to what runs, and remembered.

``classify`` sorts a correction into stop / speed / offset / target / replan by fixed rules (no
LLM); ``apply_to_spec`` and ``apply_to_args`` edit the running reward spec or skill call;
``CorrectionMemory`` logs corrections on disk and recalls them for similar instructions (MiniLM
embeddings), so the same mistake needs no second correction.
"""

from lang2policy.corrections.apply import Applied, apply_to_spec, objects_in_spec
from lang2policy.corrections.apply_args import AppliedArgs, apply_to_args, objects_in_args
from lang2policy.corrections.classify import check_text, classify
from lang2policy.corrections.correction import KINDS_OF_CORRECTION, Correction, CorrectionError
from lang2policy.corrections.embedder import Embedder
from lang2policy.corrections.memory import (
    DEFAULT_THRESHOLD,
    CorrectionMemory,
    MemoryRecord,
    Recalled,
    apply_recalled,
    situation_for_call,
    situation_for_spec,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "KINDS_OF_CORRECTION",
    "Applied",
    "AppliedArgs",
    "Correction",
    "CorrectionError",
    "CorrectionMemory",
    "Embedder",
    "MemoryRecord",
    "Recalled",
    "apply_recalled",
    "apply_to_args",
    "apply_to_spec",
    "check_text",
    "classify",
    "objects_in_args",
    "objects_in_spec",
    "situation_for_call",
    "situation_for_spec",
]
