"""The report of ``lang2policy bench parity``: the comparison's figures and verdict as JSON-ready
data, the side-by-side table, and an optional plot of the trajectories."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lang2policy.bench.parity_analysis import (
    Recording,
    commanded,
    compare_graphs,
    compare_tracking,
    resample,
    verdict,
)
from lang2policy.graph import topics


def build_report(sim: dict, hw: dict, arm_bound: float, gripper_bound: float) -> dict:
    """All figures of the comparison (JSON-ready) and the verdict."""
    rows, graph_failures = compare_graphs(sim["graph"], hw["graph"])
    tracking = compare_tracking(sim["recording"], hw["recording"])
    sim_names, hw_names = sim["recording"].names, hw["recording"].names
    failures = list(graph_failures)
    for label, side in (("sim", sim), ("hw", hw)):
        if not side["names_consistent"]:
            failures.append(f"{label}: joint names change between /joint_states messages")
    ok, reasons = verdict(failures, sim_names, hw_names, tracking, arm_bound, gripper_bound)
    return {
        "verdict": "PASS" if ok else "FAIL",
        "reasons": reasons,
        "bounds": {"arm_rad": arm_bound, "gripper_opening": gripper_bound},
        "nodes": {"sim": sim["nodes"], "hw": hw["nodes"]},
        "topics": [row.__dict__ for row in rows],
        "joint_names": {"sim": sim_names, "hw": hw_names, "identical": sim_names == hw_names},
        "rates": {"sim": sim["rates"], "hw": hw["rates"]},
        "tracking": tracking,
        "alignment": "time since the command was published, in each back-end's stamp clock",
    }


def _figure(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def format_text(report: dict) -> str:
    """The side-by-side table of the report."""
    lines = [f"Parity: sim node vs SO-101 driver + emulator: {report['verdict']}", "", "Topics"]
    lines.append(f"  {'topic':<34}{'sim':<50}{'hw':<50}classification")
    for row in report["topics"]:
        mark = "" if row["ok"] else "  <-- FAIL"
        lines.append(
            f"  {row['topic']:<34}{row['sim']:<50}{row['hw']:<50}{row['classification']}{mark}"
        )
    lines += [f"  nodes: sim {report['nodes']['sim']}, hw {report['nodes']['hw']}", ""]
    names = report["joint_names"]
    same = "identical" if names["identical"] else "DIFFERENT"
    lines += [f"Joint names ({same}): sim {names['sim']}", f"{'':<17}hw  {names['hw']}", ""]
    lines.append(f"Rates{'':<29}{'sim':>24}{'hw':>24}")
    for key, label in (
        ("joint_states_received", f"{topics.JOINT_STATES.name} (receive times)"),
        ("joint_states_stamps", f"{topics.JOINT_STATES.name} (stamps)"),
        ("objects_received", f"{topics.SIM_OBJECTS.name} (receive times)"),
    ):
        cells = []
        for side in ("sim", "hw"):
            r = report["rates"][side][key]
            cells.append(f"{r['rate_hz']:.1f} Hz +-{r['jitter_ms']:.1f} ms")
        lines.append(f"  {label:<32}{cells[0]:>24}{cells[1]:>24}")
    tracking = report["tracking"]
    onsets = tracking["onset_s"]
    lines += [
        "",
        f"Tracking over {tracking['window_s']:.2f} s ({tracking['samples']} samples at 100 Hz, "
        f"t = 0 at the command in each back-end's clock; onset sim "
        f"{_figure(onsets.get('sim'), '.3f')} s, hw {_figure(onsets.get('hw'), '.3f')} s)",
        f"  {'joint':<15}{'max|sim-hw|':>12}{'rms':>9}{'at s':>7}"
        f"{'sim max err':>13}{'hw max err':>12}{'sim rms':>9}{'hw rms':>9}"
        f"{'sim final':>11}{'hw final':>10}",
    ]
    for name, f in tracking["joints"].items():
        lines.append(
            f"  {name:<15}{f['max_diff']:>12.4f}{f['rms_diff']:>9.4f}{f['at_s']:>7.2f}"
            f"{f['sim_max_err']:>13.4f}{f['hw_max_err']:>12.4f}{f['sim_rms_err']:>9.4f}"
            f"{f['hw_rms_err']:>9.4f}{f['sim_final_err']:>11.4f}{f['hw_final_err']:>10.4f}"
        )
    bounds = report["bounds"]
    lines += [
        f"  (rad; gripper in opening 0..1; bounds: arm {bounds['arm_rad']:g} rad, gripper "
        f"{bounds['gripper_opening']:g}; errors against the command, linearly interpolated)",
        "",
        f"Verdict: {report['verdict']}",
    ]
    lines += [f"  - {reason}" for reason in report["reasons"]]
    return "\n".join(lines)


def plot(sim: Recording, hw: Recording, path: Path) -> bool:
    """Save the two trajectories and the command per joint as a PNG; False without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    end = min(sim.relative()[-1], hw.relative()[-1])
    grid = np.arange(min(sim.relative()[0], hw.relative()[0]), end, 0.01)
    a, b = resample(sim, grid), resample(hw, grid)
    command = commanded(sim.command_times, sim.command_positions, np.clip(grid, 0, None))
    figure, axes = plt.subplots(len(sim.names), 1, figsize=(9, 2.2 * len(sim.names)), sharex=True)
    for j, (axis, name) in enumerate(zip(axes, sim.names, strict=True)):
        axis.plot(grid, command[:, j], "k:", label="command (sim rest pose)")
        axis.plot(grid, a[:, j], label="sim")
        axis.plot(grid, b[:, j], "--", label="hw")
        axis.set_ylabel(name)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("s since the command")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return True
