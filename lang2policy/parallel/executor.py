"""Run the same job on many items in worker processes and get the results back in the items'
order: ``--executor local`` (a process pool on this machine, the default) or ``--executor ray``
(Ray tasks on a local Ray cluster, or on the one at ``--ray-address``).

Each worker process builds its own state once (``setup(*setup_args)``: a simulation, a
renderer, a policy) and then runs ``work(state, item)`` for the items it is given. Both must be
module-level functions (they are sent to the workers by reference). Results are consumed in
the items' order, so a run writes the same bytes whichever executor ran it, provided each
item's result depends on the item alone (episodes seeded per index).

Ray is optional: it is imported only when ``--executor ray`` is asked for, and a missing Ray
says which extra to install (``lang2policy.parallel.ray_executor``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from lang2policy.errors import ConfigError
from lang2policy.parallel.ray_executor import host_and_port

EXECUTORS = ("local", "ray")

_STATE: dict[str, Any] = {}


@dataclass(frozen=True)
class Executor:
    """Where to run: ``kind`` local or ray, ``workers`` processes (local: 0 runs in this
    process; ray: the local cluster's CPUs), ``address`` an existing Ray cluster (ray only;
    None starts a local one bound to loopback)."""

    kind: str = "local"
    workers: int = 2
    address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, "
                              f"got {self.kind!r}")  # fmt: skip
        if self.address is not None and self.kind != "ray":
            raise ConfigError("--ray-address goes with --executor ray")
        if self.address is not None and not _address_ok(self.address):
            raise ConfigError(
                f"--ray-address must be HOST:PORT (a Ray cluster's head, e.g. 127.0.0.1:6379), "
                f"'auto' or ray://HOST:PORT, got {self.address!r}"
            )
        if isinstance(self.workers, bool) or not isinstance(self.workers, int):
            raise ConfigError(f"--workers must be a whole number, got {self.workers!r}")
        if self.kind == "ray" and self.address is None and self.workers < 1:
            raise ConfigError(f"--executor ray needs --workers of at least 1, got {self.workers}")


def _address_ok(address: str) -> bool:
    if address == "auto":
        return True
    host, port = host_and_port(address)
    return bool(host) and port.isdigit() and 0 < int(port) < 65536 and " " not in host


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor local|ray`` and ``--ray-address ADDR`` (with the command's ``--workers``)."""
    parser.add_argument("--executor", default="local", choices=EXECUTORS,
                        help="where the worker processes run: local (a process pool, default) "
                        "or ray (a local Ray cluster of --workers CPUs bound to 127.0.0.1, or "
                        "the cluster at --ray-address; needs the ray extra)")  # fmt: skip
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="with --executor ray: an existing Ray cluster (HOST:PORT, 'auto' "
                        "or ray://HOST:PORT) instead of a local one")  # fmt: skip


def from_args(args: argparse.Namespace, workers: int | None = None) -> Executor:
    """The executor the command line asked for (``ConfigError`` on a bad combination)."""
    count = getattr(args, "workers", 2) if workers is None else workers
    return Executor(getattr(args, "executor", "local"), count, getattr(args, "ray_address", None))


def say_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_ordered(
    executor: Executor,
    setup: Callable[..., Any],
    setup_args: tuple,
    work: Callable[[Any, Any], Any],
    items: Sequence[Any],
    label: Callable[[Any], str] = repr,
    say: Callable[[str], None] = say_stderr,
) -> Iterator[Any]:
    """``work(state, item)`` for every item, each worker's ``state`` made once by
    ``setup(*setup_args)``; yields the results in ``items``' order. ``label(item)`` names an
    item in what ``say`` is told (on Ray: an item whose worker died and was retried)."""
    if executor.kind == "ray":
        from lang2policy.parallel.ray_executor import run_on_ray

        yield from run_on_ray(executor, setup, setup_args, work, items, label, say)
    elif executor.workers <= 0:
        state = setup(*setup_args)
        for item in items:
            yield work(state, item)
    else:
        yield from _run_in_pool(executor.workers, setup, setup_args, work, items)


def _run_in_pool(workers, setup, setup_args, work, items) -> Iterator[Any]:
    context = get_context("spawn")  # no forked GL contexts
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_init_local,
        initargs=(setup, setup_args),
    ) as pool:  # fmt: skip
        futures = [pool.submit(_call_local, work, item) for item in items]
        try:
            for number in range(len(futures)):
                future, futures[number] = futures[number], None  # the result is not kept
                yield future.result()
        finally:
            for future in futures:
                future.cancel() if future is not None else None


def _init_local(setup, setup_args) -> None:
    _STATE["state"] = setup(*setup_args)


def _call_local(work, item):
    return work(_STATE["state"], item)
