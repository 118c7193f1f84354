"""The probe of ``lang2policy bench controller-rate``: one reward spec in, the controller's
planning statistics out.

``python -m lang2policy.ros.controller_rate_probe SPEC_JSON SECONDS`` joins the graph of its
``ROS_DOMAIN_ID`` (discovery as the environment says), waits until the controller node reports
the objects it plans with, publishes the spec on ``/lang2policy/reward_spec``, waits for the
first planning iterations, then records ``(receive time, iterations, rate_hz, plan_ms_mean)``
from every ``running`` status for ``SECONDS``, cancels the task and prints one JSON line:
``{"accepted": bool, "samples": [[t, iterations, rate_hz, plan_ms], ...], "error": ...}``. The
analysis is pure (``lang2policy.bench.controller_rate``); this is its ROS side.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import String

from lang2policy.graph import topics

START_TIMEOUT = 90.0  # s for the nodes to start and the controller to see the objects


class RateProbe:
    """Publishes specs and keeps every controller status with its receive time."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("controller_rate_probe")
        self.lock = threading.Lock()
        self.statuses: list[tuple[float, dict]] = []
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.spec_pub = self.node.create_publisher(String, topics.REWARD_SPEC.name, 10)

    def _on_status(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("node") == topics.CONTROLLER_NODE:
            with self.lock:
                self.statuses.append((time.monotonic(), event))

    def wait(self, predicate, timeout: float, what: str, since: int = 0) -> dict:
        """The first status from index ``since`` on that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = next((s for _, s in self.statuses[since:] if predicate(s)), None)
            if found is not None:
                return found
            time.sleep(0.05)
        raise TimeoutError(f"no {what} within {timeout:g} s")

    def send(self, text: str) -> int:
        """Publish ``text`` once the controller listens; the status index before it."""
        deadline = time.monotonic() + START_TIMEOUT
        while self.spec_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        with self.lock:
            since = len(self.statuses)
        self.spec_pub.publish(String(data=text))
        return since


def measure(probe: RateProbe, spec: str, seconds: float) -> dict:
    """Send ``spec``, record the running statuses for ``seconds``, cancel."""
    probe.wait(lambda s: s.get("stats", {}).get("objects"), START_TIMEOUT, "objects known")
    since = probe.send(spec)
    answer = probe.wait(lambda s: s["state"] in ("accepted", "rejected"), 30, "answer", since)
    if answer["state"] != "accepted":
        return {"accepted": False, "samples": [], "error": str(answer.get("detail"))}
    probe.wait(lambda s: s.get("stats", {}).get("iterations", 0) > 0, 60, "planning", since)
    with probe.lock:
        start = len(probe.statuses)
    time.sleep(seconds)
    with probe.lock:
        recorded = probe.statuses[start:]
    probe.send("null")
    samples = [
        [t, s["stats"]["iterations"], s["stats"]["rate_hz"], s["stats"]["plan_ms_mean"]]
        for t, s in recorded
        if s["state"] == "running" and "stats" in s
    ]
    return {"accepted": True, "samples": samples, "error": None}


def main(argv: list[str] | None = None) -> int:
    """Console entry: print the measurement as one JSON line; 1 if it failed."""
    spec, seconds = (sys.argv[1:] if argv is None else argv)[:2]
    rclpy.init()
    probe = RateProbe()
    executor = SingleThreadedExecutor()
    executor.add_node(probe.node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        result = measure(probe, spec, float(seconds))
    except TimeoutError as exc:
        result = {"accepted": False, "samples": [], "error": str(exc)}
    finally:
        time.sleep(0.2)  # let the cancel leave before the context goes
        executor.shutdown()
        spinner.join(timeout=5)  # the spin thread ends before its node and context go
        probe.node.destroy_node()
        rclpy.try_shutdown()
    print(json.dumps(result), flush=True)
    return 0 if result["error"] is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
