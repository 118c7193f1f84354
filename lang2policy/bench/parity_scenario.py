"""The scripted scenario of ``lang2policy bench parity`` on one back-end.

A probe node waits for the first ``/joint_states``, records the rest pose, publishes one smooth
five-point trajectory of all five arm joints and the gripper (offsets from the rest pose), waits,
sends an empty trajectory (hold) and records a little more; what it heard becomes a
``Recording`` with the rates, graph and node names (see ``bench.parity``).

The probe is a ROS node (``lang2policy.ros.parity_probe.ParityProbe``); bench/ imports no ROS,
so ``record`` is handed a function that opens one (the command line passes it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from lang2policy.bench.parity_analysis import GRIPPER, Recording, rate_stats
from lang2policy.bench.parity_processes import Child, running, status
from lang2policy.errors import Lang2PolicyError
from lang2policy.graph import topics
from lang2policy.graph.snapshot import TopicInfo

# Offsets (rad; opening for the gripper) from the rest pose at 1/5 .. 5/5 of the move: up to
# 0.6 rad/s; from the home pose the tool stays 8 cm or more above the table (clear of the
# objects) and every joint inside its range (``script`` clips to the calibrated ranges too).
WAYPOINTS: dict[str, tuple[float, ...]] = {
    "shoulder_pan": (0.4, 0.2, -0.2, -0.4, -0.2),
    "shoulder_lift": (-0.3, -0.4, -0.2, 0.0, -0.2),
    "elbow_flex": (0.3, 0.0, -0.3, -0.2, 0.2),
    "wrist_flex": (-0.3, -0.4, 0.0, -0.2, -0.1),
    "wrist_roll": (0.5, 0.0, -0.5, 0.0, 0.3),
    GRIPPER: (0.3, 0.5, 0.2, -0.1, 0.2),
}
LIMIT_MARGIN = 0.05  # rad (opening) kept from the ends of a joint's range


class SetupError(Lang2PolicyError):
    """A back-end or the probe could not be brought up (exit status 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"setup error: {message}")


class Probe(Protocol):
    """What the scenario needs of the probe node (``ros.parity_probe.ParityProbe``)."""

    samples: Any  # joint, objects, clock and their lock, appended from the probe's thread
    publisher: Any  # the trajectory publisher (its subscription count)

    def send(self, names: list[str], points: list[tuple[float, list[float]]]) -> float: ...

    def graph(self) -> dict[str, TopicInfo]: ...

    def nodes(self) -> list[str]: ...

    def close(self) -> None: ...


OpenProbe = Callable[[int], Probe]  # ROS_DOMAIN_ID -> a probe in that graph


@dataclass(frozen=True)
class Timings:
    """Seconds of each phase of the scenario (scaled by ``--duration-scale``)."""

    rest: float = 1.0
    move: float = 4.0
    hold: float = 1.5
    after: float = 1.0
    startup: float = 120.0  # until the first /joint_states (not scaled)

    def scaled(self, factor: float) -> Timings:
        return Timings(
            self.rest * factor,
            self.move * factor,
            self.hold * factor,
            self.after * factor,
            self.startup,
        )


def joint_ranges() -> dict[str, tuple[float, float]]:
    """Ranges the scripted points must stay in: the calibrated servo ranges (the driver's
    clamp; the sim model's are no narrower), the gripper's opening 0..1."""
    from lang2policy.robots.so101.calibration import Calibration

    ranges = {j.name: (j.lower_rad, j.upper_rad) for j in Calibration.load(None).arm}
    ranges[GRIPPER] = (0.0, 1.0)
    return ranges


def script(
    names: list[str], rest: np.ndarray, move: float, ranges: dict[str, tuple[float, float]]
) -> list[tuple[float, list[float]]]:
    """The scripted trajectory: WAYPOINTS offsets from ``rest`` at equal steps over ``move``
    s, each joint kept LIMIT_MARGIN inside its range (a clamped command would be tracked
    badly on both sides and say nothing about parity)."""
    count = len(next(iter(WAYPOINTS.values())))
    points = []
    for k in range(count):
        row = rest.copy()
        for j, name in enumerate(names):
            row[j] += WAYPOINTS.get(name, (0.0,) * count)[k]
            if name in ranges:
                low, high = ranges[name]
                row[j] = min(max(row[j], low + LIMIT_MARGIN), high - LIMIT_MARGIN)
        points.append((move * (k + 1) / count, row.tolist()))
    return points


def _check_alive(children: list[Child], when: str) -> None:
    """A node that died is a setup error naming it, ``when`` and its last output."""
    dead = [c for c in children if not c.alive()]
    if dead:
        child = dead[0]
        raise SetupError(
            f"{child.label} exited with status {child.process.returncode} {when}; "
            f"its last output:\n{child.tail()}"
        )


def _wait(predicate, seconds: float, what: str, children: list[Child]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _check_alive(children, f"while waiting for {what}")
        if predicate():
            return
        time.sleep(0.05)
    tails = "\n".join(f"  {c.label}:\n{c.tail()}" for c in children)
    raise SetupError(f"timed out after {seconds:g} s waiting for {what}; last output:\n{tails}")


def _sleep(seconds: float, children: list[Child]) -> None:
    """Sleep ``seconds``; a node that died meanwhile is a setup error."""
    time.sleep(seconds)
    _check_alive(children, "during the scenario")


def record(
    backend: str, domain_id: int, seed: int, timings: Timings, open_probe: OpenProbe
) -> dict:
    """Run the scenario on ``backend``; its Recording, rates, graph and node names."""
    with running(backend, domain_id, seed) as children:
        probe = open_probe(domain_id)
        try:
            return _scenario(backend, probe, children, timings)
        finally:
            probe.close()


def _scenario(backend: str, probe: Probe, children: list[Child], timings: Timings) -> dict:
    samples = probe.samples
    status(f"{backend}: waiting for the first /joint_states...")
    _wait(lambda: samples.joint, timings.startup, "the first /joint_states", children)
    _wait(
        probe.publisher.get_subscription_count,
        30,
        f"a subscriber on {topics.TRAJECTORY.name}",
        children,
    )
    if backend == "sim":
        _wait(lambda: samples.clock is not None, 10, topics.CLOCK.name, children)
    with samples.lock:
        samples.joint.clear()
        samples.objects.clear()
    status(f"{backend}: recording {timings.rest:g} s at rest...")
    _sleep(timings.rest, children)
    with samples.lock:
        names = list(samples.joint[-1][2])
        rest = np.mean([row[3] for row in samples.joint], axis=0)
    points = script(names, rest, timings.move, joint_ranges())
    status(f"{backend}: sending the scripted trajectory ({len(points)} points, {timings.move:g} s)")
    command_time = probe.send(names, points)
    _sleep(timings.move + timings.hold, children)
    status(f"{backend}: holding (empty trajectory), recording {timings.after:g} s more...")
    hold_time = probe.send(names, [])
    _sleep(timings.after, children)
    graph, nodes = probe.graph(), probe.nodes()
    with samples.lock:
        joint, objects = list(samples.joint), list(samples.objects)
    return _result(names, rest, points, command_time, hold_time, joint, objects, graph, nodes)


def _result(names, rest, points, command_time, hold_time, joint, objects, graph, nodes) -> dict:
    recording = Recording(
        names=names,
        stamps=np.array([row[0] for row in joint]),
        received=np.array([row[1] for row in joint]),
        positions=np.array([row[3] for row in joint]),
        command_time=command_time,
        hold_time=hold_time,
        command_times=np.array([0.0] + [t for t, _ in points]),
        command_positions=np.array([rest.tolist()] + [p for _, p in points]),
    )
    return {
        "recording": recording,
        "names_consistent": all(row[2] == names for row in joint),
        "rates": {
            "joint_states_received": rate_stats(recording.received),
            "joint_states_stamps": rate_stats(recording.stamps),
            "objects_received": rate_stats([r for _, r in objects]),
        },
        "graph": graph,
        "nodes": nodes,
    }
