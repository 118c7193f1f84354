"""Pure analysis of ``lang2policy bench parity``: graph diff, rates, tracking, verdict. No ROS.

The benchmark (``lang2policy.bench.parity``) records the same scripted scenario on the sim
node and on the SO-101 driver + emulator; everything it measured arrives here as plain data
(``GraphSnapshot``, ``Recording``) so the comparison can be unit-tested without a ROS graph.

Time alignment: every recording carries ``command_time``, the moment the scripted trajectory
was published, read in that back-end's own stamp clock (sim time from ``/clock`` for the sim
node, the ROS system clock for the driver, which stamps with it). Trajectories are compared on
``stamp - command_time``, so a back-end that reacts later shows up as a tracking difference
instead of being aligned away; the motion onset of each side is reported separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lang2policy.graph import topics
from lang2policy.graph.snapshot import GraphSnapshot, TopicInfo

GRIPPER = "gripper"
DEFAULT_ARM_BOUND = 0.05  # rad: max |sim - hw| on an arm joint (see parity.py's docstring)
DEFAULT_GRIPPER_BOUND = 0.1  # normalised opening (0 closed .. 1 open)
ONSET_THRESHOLD = 0.01  # rad (or opening) away from the rest pose counts as moving
RESAMPLE_RATE = 100.0  # Hz of the common time base

# The topic contract both back-ends must offer: topic -> (type, the back-end's role).
CONTRACT: dict[str, tuple[str, str]] = {
    topics.JOINT_STATES.name: (topics.JOINT_STATES.type, "publishes"),
    topics.TRAJECTORY.name: (topics.TRAJECTORY.type, "subscribes"),
    topics.SIM_OBJECTS.name: (topics.SIM_OBJECTS.type, "publishes"),
}
# Topics only the simulation has, and why that is by design.
SIM_ONLY_BY_DESIGN: dict[str, str] = {
    topics.CLOCK.name: "sim time; the driver stamps with the wall clock",
    "/camera/": "rendered cameras; a real arm has USB cameras (own node)",
    topics.SIM_SCENE.name: "the simulator's table resets; a real table never jumps",
}


# --------------------------------------------------------------------------- graph
@dataclass(frozen=True)
class TopicRow:
    """One line of the side-by-side topic table."""

    topic: str
    sim: str  # "type (role)" or "-"
    hw: str
    classification: str  # "contract", "shared", "sim-only by design", ... (see compare_graphs)
    ok: bool


def _describe(info: TopicInfo | None) -> str:
    return "-" if info is None else f"{','.join(info.types)} ({info.role()})"


def _by_design(topic: str) -> str | None:
    for prefix, why in SIM_ONLY_BY_DESIGN.items():
        if topic == prefix or (prefix.endswith("/") and topic.startswith(prefix)):
            return why
    return None


def _classify(topic: str, sim: TopicInfo | None, hw: TopicInfo | None) -> tuple[str, bool, str]:
    """(classification, ok, failure reason or "") of one topic."""
    if topic in CONTRACT:
        want_type, want_role = CONTRACT[topic]
        for side, info in (("sim", sim), ("hw", hw)):
            if info is None:
                return "contract", False, f"contract topic {topic} missing on {side}"
            if info.types != (want_type,):
                return (
                    "contract",
                    False,
                    f"{topic} on {side} has type {info.types}, not {want_type}",
                )
            if info.role() not in (want_role, "both"):
                return "contract", False, f"{topic}: {side} {info.role()}, should {want_role}"
        return "contract", True, ""
    if sim is not None and hw is not None:
        if sim.types != hw.types:
            return "shared", False, f"{topic}: types differ, sim {sim.types} vs hw {hw.types}"
        return "shared", True, ""
    if sim is not None and (why := _by_design(topic)):
        return f"sim-only by design ({why})", True, ""
    side = "sim" if sim is not None else "hw"
    return f"{side}-only (unexplained)", False, f"{topic} exists only on {side}"


def compare_graphs(sim: GraphSnapshot, hw: GraphSnapshot) -> tuple[list[TopicRow], list[str]]:
    """Side-by-side rows of every topic either back-end uses, and the reasons parity fails
    (a contract topic missing, of another type or in the wrong role; a shared topic whose
    types differ; a topic only one side has that is not sim-only by design)."""
    rows, failures = [], []
    for topic in sorted(set(sim) | set(hw) | set(CONTRACT)):
        s, h = sim.get(topic), hw.get(topic)
        classification, ok, reason = _classify(topic, s, h)
        rows.append(TopicRow(topic, _describe(s), _describe(h), classification, ok))
        if reason:
            failures.append(reason)
    return rows, failures


# --------------------------------------------------------------------------- rates
def rate_stats(times: Sequence[float]) -> dict[str, float]:
    """Rate (Hz, from the mean interval), jitter (ms, std of the intervals), worst gap (ms)."""
    t = np.asarray(times, float)
    if len(t) < 2:
        return {"count": float(len(t)), "rate_hz": 0.0, "jitter_ms": 0.0, "max_gap_ms": 0.0}
    dt = np.diff(t)
    return {
        "count": float(len(t)),
        "rate_hz": float(1.0 / dt.mean()) if dt.mean() > 0 else 0.0,
        "jitter_ms": float(dt.std() * 1e3),
        "max_gap_ms": float(dt.max() * 1e3),
    }


# --------------------------------------------------------------------------- recordings
@dataclass
class Recording:
    """The /joint_states of one back-end during the scenario, and when the commands went out.

    ``stamps`` and ``command_time``/``hold_time`` are in the back-end's stamp clock; the
    command is ``(time_from_start, positions in names order)`` points, the first at 0 being
    the pose the trajectory starts from (as TrajectoryFollower interpolates from it)."""

    names: list[str]
    stamps: np.ndarray  # (n,)
    received: np.ndarray  # (n,) probe's monotonic clock
    positions: np.ndarray  # (n, joints)
    command_time: float
    hold_time: float  # when the empty (hold) trajectory was published
    command_times: np.ndarray  # (k,) time_from_start of the command points
    command_positions: np.ndarray  # (k, joints)
    other: dict = field(default_factory=dict)  # back-end specific extras (rates, ...)

    def relative(self) -> np.ndarray:
        """Stamps relative to the command (s)."""
        return self.stamps - self.command_time

    def rest_pose(self) -> np.ndarray:
        """Mean pose before the command."""
        before = self.relative() < 0
        return self.positions[before].mean(axis=0) if before.any() else self.positions[0]


def commanded(times: np.ndarray, positions: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The command at times ``t`` (s from its start): linear interpolation of the points, the
    first point before it and the last point after it (TrajectoryFollower's semantics)."""
    return np.stack([np.interp(t, times, positions[:, j]) for j in range(positions.shape[1])], 1)


def resample(rec: Recording, grid: np.ndarray) -> np.ndarray:
    """Joint positions of ``rec`` at ``grid`` (s from the command), linearly interpolated."""
    t = rec.relative()
    return np.stack([np.interp(grid, t, rec.positions[:, j]) for j in range(len(rec.names))], 1)


def onset(rec: Recording, threshold: float = ONSET_THRESHOLD) -> float | None:
    """Seconds from the command until any joint is ``threshold`` away from the rest pose."""
    t = rec.relative()
    after = t >= 0
    moved = np.abs(rec.positions[after] - rec.rest_pose()).max(axis=1) > threshold
    return float(t[after][moved.argmax()]) if moved.any() else None


def common_grid(sim: Recording, hw: Recording, rate: float = RESAMPLE_RATE) -> np.ndarray:
    """Times (s from the command) both recordings cover, from the command to the hold."""
    start = 0.0
    end = min(
        sim.relative()[-1],
        hw.relative()[-1],
        sim.hold_time - sim.command_time,
        hw.hold_time - hw.command_time,
    )
    if end <= start:
        return np.zeros(0)
    return np.arange(start, end + 1e-9, 1.0 / rate)


def _tracking(rec: Recording, grid: np.ndarray, actual: np.ndarray) -> dict[str, np.ndarray]:
    """Errors of one back-end against its own command over ``grid``."""
    error = actual - commanded(rec.command_times, rec.command_positions, grid)
    final = rec.positions[rec.relative() <= rec.hold_time - rec.command_time][-1]
    return {
        "max": np.abs(error).max(axis=0),
        "rms": np.sqrt((error**2).mean(axis=0)),
        "final": np.abs(final - rec.command_positions[-1]),
    }


def compare_tracking(sim: Recording, hw: Recording) -> dict:
    """Per joint: max and RMS of |sim - hw| on the common time base, each back-end's max/RMS
    error against its command and final error at the end of the hold; onsets (s)."""
    grid = common_grid(sim, hw)
    if len(grid) < 2:
        return {"joints": {}, "samples": 0, "window_s": 0.0, "onset_s": {}}
    a, b = resample(sim, grid), resample(hw, grid)
    diff = np.abs(a - b)
    ts, th = _tracking(sim, grid, a), _tracking(hw, grid, b)
    joints = {}
    for j, name in enumerate(sim.names):
        joints[name] = {
            "max_diff": float(diff[:, j].max()),
            "rms_diff": float(np.sqrt((diff[:, j] ** 2).mean())),
            "at_s": float(grid[diff[:, j].argmax()]),
            "sim_max_err": float(ts["max"][j]),
            "hw_max_err": float(th["max"][j]),
            "sim_rms_err": float(ts["rms"][j]),
            "hw_rms_err": float(th["rms"][j]),
            "sim_final_err": float(ts["final"][j]),
            "hw_final_err": float(th["final"][j]),
        }
    return {
        "joints": joints,
        "samples": len(grid),
        "window_s": float(grid[-1]),
        "onset_s": {"sim": onset(sim), "hw": onset(hw)},
    }


# --------------------------------------------------------------------------- verdict
def verdict(
    graph_failures: Sequence[str],
    sim_names: Sequence[str],
    hw_names: Sequence[str],
    tracking: dict,
    arm_bound: float = DEFAULT_ARM_BOUND,
    gripper_bound: float = DEFAULT_GRIPPER_BOUND,
) -> tuple[bool, list[str]]:
    """PASS (True) when the contract topics and types, the joint names and their order are
    identical and every joint's max |sim - hw| is within its bound; else the reasons."""
    reasons = list(graph_failures)
    if list(sim_names) != list(hw_names):
        reasons.append(f"joint names differ: sim {list(sim_names)} vs hw {list(hw_names)}")
    if not tracking.get("joints"):
        reasons.append("no common time window to compare the trajectories on")
    for name, figures in tracking.get("joints", {}).items():
        bound = gripper_bound if name == GRIPPER else arm_bound
        if figures["max_diff"] > bound:
            reasons.append(
                f"{name}: max |sim - hw| {figures['max_diff']:.4f} > bound {bound:g} "
                f"(at {figures['at_s']:.2f} s)"
            )
    return not reasons, reasons
