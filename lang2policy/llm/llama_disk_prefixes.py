"""Processed prompt prefixes kept on disk across server restarts (issue 16).

``llama_prefix_cache`` keeps several processed prompts in the server's RAM, so a planner that
switches between its prompts does not re-evaluate them; but a restart lost them all, and
every ``lang2policy sim`` paid 30-50 s on two cores to warm the same fixed prompt parts again.

``PersistentPrefixCache`` (``llama_disk_cache``, loaded by the server's launcher) is that RAM
cache with a directory behind it; this module holds the parts that need no llama_cpp:

- after a completion the server saves its state (``LlamaRAMCache.__setitem__``); the state is
  also written to ``DIR/<sha of its tokens>.npz`` by a background thread, so the request does
  not wait for the disk. A file already there for the same tokens is only touched (a
  deterministic warm-up makes the same state on every start).
- at start-up only the token lists are read (an ``.npz`` member is read when asked for); a
  request whose prompt shares a longer prefix with a file than with anything in RAM loads
  that file's state (tens of MB: a fraction of a second, against seconds of evaluation).
- the directory is kept under the cache's capacity by removing the least recently written
  files. Files are written under a temporary name and renamed, so a reader never sees half a
  file; a file that cannot be read is removed with a warning, and the prompt is evaluated.

The directory is specific to the model file, the llama-cpp-python version and the context
size (``cache_dir_for``): a state is only valid for the model and context that made it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("lang2policy.llm")

# The environment variable through which the launcher hands the directory to the server.
DIR_ENV = "LANG2POLICY_LLM_PREFIX_DIR"
# Where the directories live unless LANG2POLICY_LLM_PREFIX_ROOT says otherwise ("" = off).
ROOT_ENV = "LANG2POLICY_LLM_PREFIX_ROOT"


def default_root() -> Path | None:
    """The root of the per-model directories; None when persistence is turned off."""
    value = os.environ.get(ROOT_ENV)
    if value is not None:
        return Path(value).expanduser() if value.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lang2policy" / "llm-prefixes"


def cache_dir_for(root: Path, model_path: Path, n_ctx: int) -> Path:
    """The directory for one model file, llama-cpp-python version and context size."""
    try:
        version = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        version = "unknown"
    stat = model_path.stat()
    identity = f"{model_path.name}|{stat.st_size}|{version}|{n_ctx}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return root / f"{model_path.stem}-{digest}"


def token_digest(tokens: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype=np.int32).tobytes()).hexdigest()[:32]


def save_state_file(path: Path, key: tuple[int, ...], state: Any) -> None:
    """Write one state (a ``LlamaState``) under ``path``, atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with tmp.open("wb") as handle:
        np.savez(
            handle,
            tokens=np.asarray(key, dtype=np.int32),
            input_ids=np.asarray(state.input_ids),
            scores=np.asarray(state.scores),
            n_tokens=np.int64(state.n_tokens),
            seed=np.int64(state.seed),
            llama_state=np.frombuffer(state.llama_state, dtype=np.uint8),
        )
    os.replace(tmp, path)


def load_tokens(path: Path) -> tuple[int, ...]:
    with np.load(path) as data:
        return tuple(int(t) for t in data["tokens"])


def load_state_file(path: Path) -> Any:
    """The ``LlamaState`` stored in ``path``."""
    from llama_cpp.llama import LlamaState

    with np.load(path) as data:
        blob = data["llama_state"].tobytes()
        return LlamaState(
            input_ids=data["input_ids"].copy(),
            scores=data["scores"].copy(),
            n_tokens=int(data["n_tokens"]),
            llama_state=blob,
            llama_state_size=len(blob),
            seed=int(data["seed"]),
        )


def file_mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
