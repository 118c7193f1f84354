"""Processed prompt prefixes kept on disk across LLM server restarts (issue 16).

The unit tests drive ``PersistentPrefixCache`` with real ``llama_cpp.LlamaState`` objects (no
model needed); the slow test starts the real local server twice on one directory and reads
the second server's log: its first request is served from the first server's prefix.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lang2policy.llm.llama_disk_prefixes import (
    DIR_ENV,
    cache_dir_for,
    load_state_file,
    save_state_file,
)

pytest.importorskip("llama_cpp")
from lang2policy.llm.llama_disk_cache import PersistentPrefixCache


def state(tokens: tuple[int, ...], payload: bytes):
    from llama_cpp.llama import LlamaState

    return LlamaState(
        input_ids=np.asarray(tokens, dtype=np.intc),
        scores=np.zeros((1, 4), dtype=np.single),
        n_tokens=len(tokens),
        llama_state=payload,
        llama_state_size=len(payload),
        seed=7,
    )


def new_cache(directory: Path, capacity: int = 1 << 20):
    return PersistentPrefixCache(capacity, directory)


def test_a_state_survives_the_round_trip_through_a_file(tmp_path):
    path = tmp_path / "s.npz"
    save_state_file(path, (1, 2, 3), state((1, 2, 3), b"kv-bytes"))
    back = load_state_file(path)
    assert back.llama_state == b"kv-bytes" and back.llama_state_size == 8
    assert back.n_tokens == 3 and back.seed == 7 and list(back.input_ids) == [1, 2, 3]
    assert not list(tmp_path.glob(".*tmp")), "the temporary file is renamed into place"


def test_a_new_cache_finds_the_longest_prefix_written_by_an_earlier_one(tmp_path):
    first = new_cache(tmp_path)
    first[(1, 2, 3, 4)] = state((1, 2, 3, 4), b"short")
    first[(1, 2, 3, 4, 5, 6, 7)] = state((1, 2, 3, 4, 5, 6, 7), b"long")
    first[(9, 9)] = state((9, 9), b"other")
    first.flush()
    assert len(list(tmp_path.glob("*.npz"))) == 3

    second = new_cache(tmp_path)  # a restarted server: nothing in RAM yet
    assert not second.cache_state and len(second.on_disk) == 3
    assert (1, 2, 3, 4, 5, 6, 8) in second
    hit = second[(1, 2, 3, 4, 5, 6, 8)]
    assert hit.llama_state == b"long"
    assert (1, 2, 3, 4, 5, 6, 7) in second.cache_state, "a disk hit is kept in RAM"
    assert (5, 5) not in second
    with pytest.raises(KeyError):
        second[(5, 5)]


def test_the_same_state_again_is_not_rewritten(tmp_path):
    cache = new_cache(tmp_path)
    cache[(1, 2)] = state((1, 2), b"a")
    cache.flush()
    (path,) = tmp_path.glob("*.npz")
    inode = path.stat().st_ino
    old = time.time() - 100
    os.utime(path, (old, old))
    cache[(1, 2)] = state((1, 2), b"a")
    cache.flush()
    assert path.stat().st_ino == inode, "the file was replaced"
    assert path.stat().st_mtime > old + 50, "the file was not marked as recently used"


def test_the_directory_is_kept_under_the_capacity_oldest_first(tmp_path):
    payload = b"x" * 4000
    save_state_file(tmp_path / "probe", (0, 0, 0), state((0, 0, 0), payload))
    capacity = int(2.5 * (tmp_path / "probe").stat().st_size)  # two files fit
    (tmp_path / "probe").unlink()
    cache = new_cache(tmp_path, capacity=capacity)
    for i in range(4):
        cache[(i, i, i)] = state((i, i, i), payload)
        cache.flush()
        time.sleep(0.02)  # distinct modification times
    kept = new_cache(tmp_path, capacity=capacity).on_disk
    assert set(kept) == {(2, 2, 2), (3, 3, 3)}
    assert sum(p.stat().st_size for p in tmp_path.glob("*.npz")) <= capacity


def test_an_unreadable_file_is_dropped_not_fatal(tmp_path):
    (tmp_path / "broken.npz").write_bytes(b"not a zip file")
    cache = new_cache(tmp_path)
    assert not cache.on_disk and not (tmp_path / "broken.npz").exists()

    cache[(4, 5, 6)] = state((4, 5, 6), b"good")
    cache.flush()
    (path,) = tmp_path.glob("*.npz")
    restarted = new_cache(tmp_path)
    path.write_bytes(path.read_bytes()[:40])  # cut short after the index was read
    with pytest.raises(KeyError):
        restarted[(4, 5, 6, 7)]
    assert not path.exists() and not restarted.on_disk


def test_the_directory_depends_on_the_model_and_the_context_size(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights")
    a = cache_dir_for(tmp_path, model, 8192)
    assert a == cache_dir_for(tmp_path, model, 8192)
    assert a != cache_dir_for(tmp_path, model, 4096)
    model.write_bytes(b"other weights")
    assert a != cache_dir_for(tmp_path, model, 8192)


def test_the_server_is_told_the_directory_only_when_prefixes_are_kept(tmp_path):
    from lang2policy.llm.local_server import LocalModelServer

    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights")
    kept = LocalModelServer(model, prefix_root=tmp_path / "root")
    assert kept._environment()[DIR_ENV] == str(kept.prefix_dir)
    assert kept.prefix_dir.parent == tmp_path / "root"
    off = LocalModelServer(model, prefix_root=None)
    assert off.prefix_dir is None and DIR_ENV not in off._environment()


PROMPT = "Write Python.\n" + "\n".join(f"# step {i}: move the block {i} cm left" for i in range(40))

_CLIENT = """
import sys
from lang2policy.errors import LLMResponseError
from lang2policy.llm.local_server import LocalModelServer
from lang2policy.llm import LLMClient
from lang2policy.llm.factory import local_config
with LocalModelServer(prefix_root=sys.argv[1], log_path=sys.argv[2]) as server:
    client = LLMClient(local_config(server.base_url))
    try:
        client.complete(sys.argv[3], max_tokens=1, temperature=0.0)
    except LLMResponseError:
        pass
    import time; time.sleep(1.0)  # the background write
"""


@pytest.mark.llm
@pytest.mark.slow
def test_a_restarted_server_starts_from_the_prefix_its_predecessor_processed(tmp_path):
    root = tmp_path / "prefixes"
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    for number, log in enumerate(logs):
        prompt = PROMPT + ("\n# and now" if number else "")
        done = subprocess.run(
            [sys.executable, "-c", _CLIENT, str(root), str(log), prompt],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    first, second = (log.read_text(errors="replace") for log in logs)
    assert "cache miss" in first and "0 processed prompts on disk" in first
    assert "1 processed prompts on disk" in second
    assert "cache hit" in second, second[-3000:]
    matched = int(second.split(" prefix-match hit")[0].rsplit("\n", 1)[-1].split()[-1])
    assert matched > 300, f"only {matched} tokens came from the first server's prefix"
