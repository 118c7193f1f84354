"""Shared plumbing of the ROS tests: spin nodes in a background thread and shut down cleanly."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence

from rclpy.executors import MultiThreadedExecutor

from support.waiting import wait_for


@contextlib.contextmanager
def spinning(context, nodes: Sequence, threads: int = 4) -> Iterator[MultiThreadedExecutor]:
    """Spin ``nodes`` in a thread for the ``with`` block; then stop, let in-flight callbacks
    finish, destroy the nodes and shut ``context`` down.

    rclpy's ``Executor.shutdown()`` destroys its guard condition without waiting for callbacks
    still running in the thread pool; those would then fail with "cannot use Destroyable"
    ("exception was never retrieved"), so they are waited for first.
    """
    import rclpy
    from rclpy._rclpy_pybind11 import InvalidHandle

    executor = MultiThreadedExecutor(num_threads=threads, context=context)
    for node in nodes:
        executor.add_node(node)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            try:
                executor.spin_once(timeout_sec=0.05)
            except InvalidHandle:
                # The test thread destroyed an entity (a subscription it no longer needs)
                # while this thread built the wait set: rclpy's executor is not safe against
                # that and raises here. Its next spin_once builds a fresh wait set; without
                # this the spinner died and the graph silently stopped (sim time froze).
                continue

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield executor
    finally:
        stop.set()
        spinner.join(timeout=10)
        in_flight = list(getattr(executor, "_futures", []))
        wait_for(lambda: all(f.done() for f in in_flight), 10.0, "in-flight callbacks")
        executor.shutdown()
        for node in nodes:
            node.destroy_node()
        rclpy.shutdown(context=context)


def call_trigger(client, what: str, timeout: float = 10.0):
    """Call a std_srvs/Trigger ``client`` and return its response (waits for the service)."""
    from std_srvs.srv import Trigger

    wait_for(client.service_is_ready, timeout, f"the {what} service")
    future = client.call_async(Trigger.Request())
    wait_for(future.done, timeout, f"the answer of {what}")
    return future.result()


def ros_env(domain_id: int) -> dict[str, str]:
    """Environment of a private ROS graph on loopback (for this process or a child's)."""
    return {
        "ROS_DOMAIN_ID": str(domain_id),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
    }


@contextlib.contextmanager
def probe_in_domain(domain_id: int, make_probe: Callable, threads: int = 2) -> Iterator:
    """``make_probe(context)`` (an object with a ``node``) spinning on a private ROS graph:
    this process's ROS environment set to ``domain_id`` for the block, all shut down after."""
    import pytest
    import rclpy

    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env(domain_id).items():
            mp.setenv(key, value)
        context = rclpy.Context()
        rclpy.init(context=context)
        probe = make_probe(context)
        with spinning(context, [probe.node], threads=threads):
            yield probe
