"""``--executor ray`` on a real local Ray cluster of 2 workers (issue 37): the dataset of
``record demos`` is byte-identical to the local pool's, also when a worker is killed in the
middle of an episode (Ray runs it again, the run says so), and ``bench vla``'s episodes and
table are the same. Each run starts its own loopback-only cluster and stops it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from support.ddp import free_port

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEMOS = ["record", "demos", "--task-family", "lift", "--episodes", "3", "--views", "1",
         "--workers", "2", "--seed", "5"]  # fmt: skip


def record(out: Path, *extra: str, watch=None, environment=None) -> str:
    """``record demos`` in a child process (its own Ray driver); its stderr. ``watch(process)``
    runs in a thread beside it; ``environment`` adds to its variables."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(environment or {})}
    child = subprocess.Popen(
        [sys.executable, "-m", "lang2policy.cli", *DEMOS, "--out", str(out), *extra],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watcher = threading.Thread(target=watch, args=(child,), daemon=True) if watch else None
    if watcher:
        watcher.start()
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr[-3000:]
    assert f"wrote {out}" in stdout
    return stderr


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def local_dataset(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("local") / "demos"
    record(out, "--executor", "local")
    return files(out)


def test_ray_writes_the_same_dataset_bytes_as_the_local_pool(tmp_path, local_dataset):
    # RAY_ADDRESS names a cluster that is not there (as a stale /tmp/ray/ray_current_cluster
    # does): without --ray-address the run still starts a local cluster of its own.
    record(tmp_path / "demos", "--executor", "ray", environment={"RAY_ADDRESS": "127.0.0.1:1"})
    ray = files(tmp_path / "demos")
    assert sorted(ray) == sorted(local_dataset)
    assert any(name.endswith(".parquet") for name in ray)
    assert any(name.endswith(".mp4") for name in ray)
    different = [name for name in ray if ray[name] != local_dataset[name]]
    assert not different, different


def kill_one_busy_worker(child: subprocess.Popen, killed: list) -> None:
    """SIGKILL the first Ray worker of ``child``'s cluster seen running an episode for 1 s."""
    seen: dict[int, float] = {}
    while child.poll() is None and not killed:
        try:
            family = psutil.Process(child.pid).children(recursive=True)
            busy = [p for p in family if p.cmdline()[:1] == ["ray::_attempt"]]
        except psutil.Error:
            busy = []
        now = time.monotonic()
        seen = {pid: since for pid, since in seen.items() if pid in {p.pid for p in busy}}
        for process in busy:
            if now - seen.setdefault(process.pid, now) > 1.0:
                os.kill(process.pid, signal.SIGKILL)
                killed.append(process.pid)
                return
        time.sleep(0.1)


def test_a_worker_killed_mid_episode_is_retried_said_and_the_bytes_unchanged(
    tmp_path, local_dataset
):
    killed: list[int] = []
    stderr = record(tmp_path / "demos", "--executor", "ray",
                    watch=lambda child: kill_one_busy_worker(child, killed))  # fmt: skip
    assert killed, "no busy worker was seen to kill"
    assert "its worker died; Ray ran it again (2 attempts)" in stderr, (killed, stderr[-3000:])
    assert "items were retried after their worker died" in stderr
    ray = files(tmp_path / "demos")
    assert sorted(ray) == sorted(local_dataset)
    assert all(ray[name] == local_dataset[name] for name in ray)


def test_bench_vla_runs_the_same_episodes_on_ray_as_on_the_local_pool():
    import argparse

    from lang2policy.bench import vla
    from lang2policy.vla.eval.rollout import evaluation_specs

    specs = evaluation_specs(("lift",), 1, 3)[:2]
    results = {}
    for executor in ("local", "ray"):
        args = argparse.Namespace(model=REPO / "models/vla-so101-tiny", video=False, json=True,
                                  workers=2, executor=executor, ray_address=None)  # fmt: skip
        episodes = vla.run_episodes(args, specs)
        for episode in episodes:
            episode.pop("act_s")  # wall-clock times per action
        results[executor] = episodes
    assert results["ray"] == results["local"]
    assert vla.summarize(results["ray"]) == vla.summarize(results["local"])


@pytest.fixture
def ray_head(tmp_path_factory):
    """A Ray cluster started as a user starts one (``ray start --head --block`` on loopback, in
    its own temporary folder and process group); its address. Token authentication is on, as
    ``ray start`` sets it by default."""
    port = free_port()
    folder = tempfile.mkdtemp(prefix="l2pray", dir="/tmp")  # Ray's socket paths must be short
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2",
         "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", folder],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_until_listening(port, head)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # --block: the head stops the processes it started
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        for process in psutil.process_iter(["cmdline"]):  # nothing of that cluster is left
            if any(folder in part for part in process.info["cmdline"] or ()):
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)


def wait_until_listening(port: int, head: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert head.poll() is None, head.stderr.read()[-3000:]
        try:
            socket.create_connection(("127.0.0.1", port), 1.0).close()
            time.sleep(2.0)  # the GCS listens before the head's raylet has registered
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"ray start --head did not listen on {port} in {timeout} s")


def test_ray_address_joins_a_running_cluster_and_writes_the_same_bytes(
    tmp_path, local_dataset, ray_head
):
    record(tmp_path / "demos", "--executor", "ray", "--ray-address", ray_head)
    ray = files(tmp_path / "demos")
    assert sorted(ray) == sorted(local_dataset)
    assert all(ray[name] == local_dataset[name] for name in ray)


def test_a_ray_address_where_nothing_listens_is_refused_at_once(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-m", "lang2policy.cli", *DEMOS, "--out", str(tmp_path / "demos"),
         "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode != 0
    assert f"--ray-address 127.0.0.1:{port}: no Ray cluster answers there" in child.stderr
    assert time.monotonic() - started < 60  # not Ray's minutes of retries
    assert not (tmp_path / "demos").exists()


def test_ray_workers_write_shards_that_merge_into_the_local_pools_bytes(tmp_path):
    """``--shard-size``: each work item is episodes a worker records and writes as a shard of
    its own; the parent merges them. On Ray the workers run in other processes of the
    cluster, and the merged dataset is the local pool's, byte for byte."""
    datasets = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor / "demos"
        record(out, "--executor", executor, "--shard-size", "2")
        assert not out.with_name("demos.shards").exists()  # merged, then removed
        datasets[executor] = files(out)
    local, ray = datasets["local"], datasets["ray"]
    assert sum(name.endswith(".parquet") and name.startswith("data/") for name in ray) == 2
    assert sorted(ray) == sorted(local)
    assert all(ray[name] == local[name] for name in ray)
