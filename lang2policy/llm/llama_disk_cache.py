"""The server side of ``llama_disk_prefixes``: ``PersistentPrefixCache``, llama-cpp-python's
RAM prompt cache with a directory behind it, and ``install`` for the server's launcher.

Imports llama_cpp (the native library): only the server process and tests import this module.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp
from llama_cpp import LlamaRAMCache
from llama_cpp.llama import Llama

from lang2policy.llm.llama_disk_prefixes import (
    file_mtime,
    file_size,
    load_state_file,
    load_tokens,
    save_state_file,
    token_digest,
)

log = logging.getLogger("lang2policy.llm")


class PersistentPrefixCache(LlamaRAMCache):
    """``LlamaRAMCache`` whose states are also kept in ``directory`` (``llama_disk_prefixes``)."""

    def __init__(self, capacity_bytes: int, directory: Path) -> None:
        super().__init__(capacity_bytes)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.on_disk: dict[tuple[int, ...], Path] = {}
        self._writes: queue.Queue = queue.Queue()
        self._index_lock = threading.Lock()
        self._read_index()
        threading.Thread(target=self._write_loop, name="prefix-writer", daemon=True).start()

    def _read_index(self) -> None:
        for path in sorted(self.directory.glob("*.npz"), key=file_mtime):
            try:
                self.on_disk[load_tokens(path)] = path
            except Exception as exc:  # any unreadable file is dropped
                log.warning("dropping unreadable prompt-prefix file %s: %s", path, exc)
                path.unlink(missing_ok=True)
        print(
            f"prefix cache: {len(self.on_disk)} processed prompts on disk in {self.directory}",
            file=sys.stderr,
        )

    def _best(self, key: tuple[int, ...]) -> tuple[tuple[int, ...] | None, bool]:
        """The key sharing the longest prefix with ``key``, and whether only disk has it."""
        best, best_len, from_disk = None, 0, False
        with self._index_lock:
            disk_keys = list(self.on_disk)
        for candidates, disk in ((self.cache_state.keys(), False), (disk_keys, True)):
            for k in candidates:
                shared = Llama.longest_token_prefix(k, key)
                if shared > best_len:
                    best, best_len, from_disk = k, shared, disk
        return best, from_disk

    def _find_longest_prefix_key(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        return self._best(tuple(key))[0]

    def __getitem__(self, key: Sequence[int]) -> Any:
        best, from_disk = self._best(tuple(key))
        if best is None:
            raise KeyError("Key not found")
        if not from_disk:
            self.cache_state.move_to_end(best)
            return self.cache_state[best]
        with self._index_lock:
            path = self.on_disk[best]
        try:
            state = load_state_file(path)
        except Exception as exc:  # the prompt is evaluated instead
            log.warning("dropping unreadable prompt-prefix file %s: %s", path, exc)
            with self._index_lock:
                self.on_disk.pop(best, None)
            path.unlink(missing_ok=True)
            raise KeyError("prefix file unreadable") from exc
        super().__setitem__(best, state)
        return state

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._best(tuple(key))[0] is not None

    def __setitem__(self, key: Sequence[int], value: Any) -> None:
        key = tuple(key)
        super().__setitem__(key, value)
        self._writes.put((key, value))

    def _write_loop(self) -> None:
        while True:
            key, state = self._writes.get()
            try:
                self._write(key, state)
            except OSError as exc:
                log.warning("could not keep a prompt prefix on disk: %s", exc)
            finally:
                self._writes.task_done()

    def _write(self, key: tuple[int, ...], state: Any) -> None:
        path = self.directory / f"{token_digest(key)}.npz"
        if path.exists():
            path.touch()  # the same state again: keep it, as most recently used
        else:
            save_state_file(path, key, state)
        with self._index_lock:
            self.on_disk[key] = path
        self._trim()

    def _trim(self) -> None:
        files = sorted(self.directory.glob("*.npz"), key=file_mtime)
        total = sum(file_size(f) for f in files)
        while files and total > self.capacity_bytes:
            oldest = files.pop(0)
            total -= file_size(oldest)
            oldest.unlink(missing_ok=True)
            with self._index_lock:
                for k, p in list(self.on_disk.items()):
                    if p == oldest:
                        del self.on_disk[k]

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until queued writes are on disk (for tests and orderly shutdown)."""
        deadline = time.monotonic() + timeout_s
        while self._writes.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)


def install(directory: str | Path) -> None:
    """Make the server's RAM cache (``--cache_type ram``) a ``PersistentPrefixCache`` on
    ``directory``: the server builds it as ``llama_cpp.LlamaRAMCache(capacity_bytes=...)``."""

    class ServerCache(PersistentPrefixCache):
        def __init__(self, capacity_bytes: int = 2 << 30) -> None:
            super().__init__(capacity_bytes, Path(directory))

    llama_cpp.LlamaRAMCache = ServerCache
