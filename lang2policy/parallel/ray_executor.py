"""``--executor ray``: ``executor.run_ordered`` on Ray tasks.

Without ``--ray-address`` a local Ray cluster of ``workers`` CPUs is started for the run and
stopped after it: no dashboard, no usage report, every server bound to 127.0.0.1. With an
address the run joins that cluster and leaves it running. Each item is one task of one CPU;
Ray schedules them, and a task whose worker process dies is run again (``MAX_RETRIES``, Ray's
own retry) on a fresh worker, which builds its state anew. Each result comes back with Ray's
number of the attempt that made it, so the run says which items were retried. Results are
taken in the items' order; at most ``IN_FLIGHT`` per CPU are submitted ahead, so a long run
does not fill the object store with finished results waiting their turn.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from lang2policy.errors import ConfigError, Lang2PolicyError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
REACH_TIMEOUT_S = 5.0  # to open a TCP connection to --ray-address before Ray tries for minutes
MAX_RETRIES = 3  # attempts after the first, for a task whose worker died
IN_FLIGHT = 2  # tasks submitted ahead per CPU of the cluster
INSTALL_HINT = "install the ray extra: pip install -e .[ray]"

_STATE: dict[Any, Any] = {}


def import_ray(address: str | None):
    """The ``ray`` module, imported now, set up for a run on the cluster at ``address`` (None:
    a local cluster this process starts). A cluster on this machine must keep to loopback (set
    before Ray reads its settings, which its child processes inherit); joining a cluster sends
    this machine's token (``use_auth_token``)."""
    local = on_loopback(address)
    if local:
        # Ray binds its servers to 127.0.0.1 only when the node's address is loopback, and
        # takes loopback as the node's address only with "clusters" (other machines) off.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report sent anywhere
    token = address is not None and use_auth_token()
    imported_before = "ray" in sys.modules
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"--executor ray needs Ray, which is not installed; {INSTALL_HINT}"
        ) from exc
    if imported_before:  # Ray read the settings when it was imported: set them there
        from ray._private import ray_constants
        from ray._raylet import Config

        ray_constants.ENABLE_RAY_CLUSTER = not local
        if token:
            Config.initialize("")  # Ray's own refresh after RAY_AUTH_MODE changes
    return ray


def host_and_port(address: str) -> tuple[str, str]:
    """``HOST:PORT`` or ``ray://HOST:PORT`` split into host (no IPv6 brackets) and port."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return host.strip("[]"), port


def on_loopback(address: str | None) -> bool:
    """Whether the run stays on this machine: a local cluster (``address`` None) or a cluster
    whose head is at a loopback address. Ray must then be kept to loopback too: it otherwise
    rewrites 127.0.0.1 to this machine's network address, where a head started with
    ``--node-ip-address 127.0.0.1`` does not listen."""
    return address is None or host_and_port(address)[0] in LOOPBACK_HOSTS


def check_reachable(address: str) -> None:
    """``ConfigError`` naming ``address`` when nothing listens there: ``ray.init`` would
    otherwise retry for minutes before it fails."""
    if address == "auto":
        return
    host, port = host_and_port(address)
    try:
        socket.create_connection((host, int(port)), REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(
            f"--ray-address {address}: no Ray cluster answers there ({exc}); start one with "
            f"'ray start --head --port {port}' or leave --ray-address out for a local one"
        ) from exc


def use_auth_token() -> bool:
    """Send this machine's Ray token when joining a cluster (True when this turned it on).
    ``ray start --head`` turns token authentication on and writes the token to
    ``~/.ray/auth_token``; a driver would not send it unless ``RAY_AUTH_MODE=token``. An
    explicit ``RAY_AUTH_MODE`` is left as it is."""
    if "RAY_AUTH_MODE" in os.environ:
        return False
    path = os.environ.get("RAY_AUTH_TOKEN_PATH", os.path.expanduser("~/.ray/auth_token"))
    if not (os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(path)):
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    return True


def connect(ray, address: str | None, workers: int) -> bool:
    """Start a loopback-only local cluster of ``workers`` CPUs (``address`` None) or join the
    one at ``address``; True when this process started it (and so stops it)."""
    if ray.is_initialized():
        return False
    if address is not None:
        check_reachable(address)
        ray.init(address=address, logging_level="warning", include_dashboard=False)
        return True
    # address="local": a new cluster of our own even when this machine already runs one (or
    # RAY_ADDRESS / a stale /tmp/ray/ray_current_cluster names one): without it ray.init
    # joins that cluster, and fails there because num_cpus is given.
    ray.init(
        address="local", num_cpus=workers, num_gpus=0, include_dashboard=False,
        _node_ip_address="127.0.0.1", logging_level="warning",
    )  # fmt: skip
    node_ip = ray.util.get_node_ip_address()
    if node_ip != "127.0.0.1":  # Ray was imported before import_ray could keep it to loopback
        ray.shutdown()
        raise ConfigError(f"the local Ray cluster would listen on {node_ip}, not only on "
                          "127.0.0.1; use --ray-address to join a cluster on purpose")  # fmt: skip
    return True


def run_on_ray(
    executor, setup: Callable, setup_args: tuple, work: Callable, items: Sequence,
    label: Callable[[Any], str], say: Callable[[str], None],
) -> Iterator[Any]:  # fmt: skip
    ray = import_ray(executor.address)
    started = connect(ray, executor.address, executor.workers)
    try:
        yield from _ordered(ray, setup, setup_args, work, items, label, say)
    finally:
        if started:
            ray.shutdown()


def _ordered(ray, setup, setup_args, work, items, label, say) -> Iterator[Any]:
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_attempt)
    waiting: list = []
    retried = 0
    for index in range(len(items)):
        while len(waiting) < min(len(items), index + IN_FLIGHT * cpus):
            waiting.append(task.remote(setup, setup_args, work, items[len(waiting)]))
        try:
            attempt, result = ray.get(waiting[index])
        except ray.exceptions.RayError as exc:
            raise Lang2PolicyError(f"{label(items[index])} failed on Ray: {exc}") from exc
        waiting[index] = None  # the result leaves the object store once this run drops it
        if attempt:
            retried += 1
            say(f"[ray] {label(items[index])}: its worker died; Ray ran it again "
                f"({attempt + 1} attempts), the result is the retry's")  # fmt: skip
        yield result
    if retried:
        say(f"[ray] {retried} of {len(items)} items were retried after their worker died")


def _attempt(setup, setup_args: tuple, work, item) -> tuple[int, Any]:
    """One attempt at one item, in a Ray worker process: which attempt it is (0: the first;
    Ray counts a retry from the worker's start, so one that died before the work began is
    counted too) and the result. The state is built on the worker's first item and kept for
    the next (Ray reuses worker processes)."""
    key = (setup.__module__, setup.__qualname__, repr(setup_args))
    if key not in _STATE:
        _STATE.clear()
        _STATE[key] = setup(*setup_args)
    return _attempt_number(), work(_STATE[key], item)


def _attempt_number() -> int:
    """Ray's number of the running task's attempt (Ray keeps it per task; no public call
    reads it in 2.60, so this reads the core worker's, pinned with Ray in setup.py)."""
    from ray._private.worker import global_worker

    return int(global_worker.core_worker.get_current_task_attempt_number())
