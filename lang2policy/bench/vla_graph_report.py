"""The figures of ``lang2policy bench vla --graph`` (``vla_graph``) from what its client and
the standalone runner recorded. Pure: no ROS, no processes.

Per episode, through the graph:

- ``node_success``: the VLA node's terminal status is ``success`` (its check held for
  ``rollout.SUCCESS_HOLD`` s on the poses it read);
- ``pose_success``: this module's own verdict, ``vla.sim.judge`` on a ``MirrorWorld`` set to the
  object poses the sim published when the node ended, measured from those at the send;
- ``layout_error_mm``: how far the sim node's objects stood, at the send, from where the
  standalone scene put them (the check that both ran the same episode);
- ``rate_status_hz`` (the node's own count: steps over their span), ``rate_commands_hz`` (the
  targets on ``/lang2policy/joint_command`` the client received, over their span) and the
  99th percentile of the intervals between those; the policy's time per action (mean, p95)
  from the node's statistics; ``wall_s``, the send to the terminal status; ``arm_travel_rad``,
  the largest excursion of an arm joint from where it was at the send (the commands moved
  the simulated arm); ``steps`` and ``held_steps`` (ticks the node held the arm: stale
  inputs), the node's counts.
"""

from __future__ import annotations

import numpy as np

BENCHMARK = "vla-graph"
RATE_TARGET_HZ = 9.0  # the VLA node steps at 10 Hz: at least 90 % of it through the graph


def _rate(times: list[float]) -> tuple[float, float | None]:
    """(messages per second over their span, p99 of the intervals in ms) of receive times."""
    if len(times) < 2:
        return 0.0, None
    span = times[-1] - times[0]
    intervals = 1000.0 * np.diff(times)
    rate = (len(times) - 1) / span if span > 0 else 0.0
    return round(rate, 2), round(float(np.percentile(intervals, 99)), 1)


def pose_verdict(task, start_objects: dict, end_objects: dict, mirror) -> tuple[bool, str]:
    """``vla.sim.judge`` on ``mirror`` set to ``end_objects``, from the positions in
    ``start_objects`` (name -> x, y, z, qw, qx, qy, qz); not done while an object is unseen."""
    from lang2policy.vla.sim.judge import judge

    missing = [n for n in task.objects() if n not in start_objects or n not in end_objects]
    if missing:
        return False, f"{', '.join(missing)} not seen on /sim/objects"
    mirror.sync(objects={n: (p[:3], p[3:]) for n, p in end_objects.items()})
    start = {n: np.asarray(start_objects[n][:3], float) for n in task.objects()}
    done, detail = judge(mirror, task, start)
    return bool(done), detail


def layout_error_mm(scene, start_objects: dict) -> float | None:
    """The largest distance (mm) between an object at the send and in the standalone scene."""
    if set(scene.objects) != set(start_objects):
        return None
    gaps = [np.linalg.norm(np.subtract(start_objects[n][:3], p))
            for n, p in scene.positions.items()]  # fmt: skip
    return round(1000.0 * float(max(gaps, default=0.0)), 3)


def graph_figures(spec, scene, result: dict, mirror) -> dict:
    """One episode's figures through the graph (see the module docstring)."""
    final = result.get("final") or {}
    stats = final.get("stats") or {}
    rate, p99 = _rate(result.get("targets") or [])
    figures = {
        "state": final.get("state"), "detail": final.get("detail"),
        "node_success": final.get("state") == "success",
        "pose_success": None, "pose_detail": None,
        "layout_error_mm": None, "steps": stats.get("steps"),
        "held_steps": stats.get("held_steps"),
        "rate_status_hz": stats.get("rate_hz"), "rate_commands_hz": rate,
        "command_interval_p99_ms": p99, "commands": len(result.get("targets") or []),
        "act_ms_mean": stats.get("act_ms_mean"), "act_ms_p95": stats.get("act_ms_p95"),
        "wall_s": result.get("wall_s"), "setup_s": result.get("setup_s"),
        "arm_travel_rad": result.get("arm_travel_rad"), "error": result.get("error"),
    }  # fmt: skip
    if "start_objects" in result:
        figures["layout_error_mm"] = layout_error_mm(scene, result["start_objects"])
    if final and "end_objects" in result:
        done, detail = pose_verdict(spec.task, result["start_objects"], result["end_objects"],
                                    mirror)  # fmt: skip
        figures["pose_success"], figures["pose_detail"] = done, detail
    return figures


def standalone_figures(result: dict) -> dict:
    acts = 1000.0 * np.asarray(result["act_s"][1:] or [0.0])  # the first: see ``build``
    return {
        "success": bool(result["success"]), "detail": result["detail"],
        "oracle": bool(result["oracle"]), "sim_s": result["sim_s"],
        "act_ms_mean": round(float(acts.mean()), 2),
    }  # fmt: skip


def rows(episodes: list[dict]) -> list[dict]:
    """Per family and split: successes through the graph (node, poses), standalone, oracle."""
    found = []
    for key in dict.fromkeys((e["family"], e["split"]) for e in episodes):
        group = [e for e in episodes if (e["family"], e["split"]) == key]
        found.append({
            "family": key[0], "split": key[1], "episodes": len(group),
            "graph_node": sum(e["graph"]["node_success"] for e in group),
            "graph_poses": sum(bool(e["graph"]["pose_success"]) for e in group),
            "standalone": sum(e["standalone"]["success"] for e in group),
            "oracle": sum(e["standalone"]["oracle"] for e in group),
        })  # fmt: skip
    return found


def _percentiles(times_ms: list[float]) -> dict:
    if not times_ms:
        return {"mean_ms": None, "p50_ms": None, "p95_ms": None, "calls": 0}
    p50, p95 = np.percentile(times_ms, [50, 95])
    return {"mean_ms": round(float(np.mean(times_ms)), 2), "p50_ms": round(float(p50), 2),
            "p95_ms": round(float(p95), 2), "calls": len(times_ms)}  # fmt: skip


def _spread(values: list) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "min": None, "max": None}
    return {"mean": round(float(np.mean(values)), 2), "min": min(values), "max": max(values)}


def build(specs, scenes, standalone: list[dict], through: dict, latency: dict) -> dict:
    """The report: episodes side by side, the rows, the rates and times, the verdict."""
    from lang2policy.scene.mirror import MirrorWorld
    from lang2policy.vla.spec.schema import ROBOT_TYPE

    mirror = MirrorWorld(ROBOT_TYPE)
    by_index = {r["index"]: r for r in standalone}
    episodes = []
    for spec, scene, result in zip(specs, scenes, through["results"], strict=True):
        episodes.append({
            "index": spec.index, "family": spec.task.family, "split": spec.split,
            "instruction": spec.instruction,
            "graph": graph_figures(spec, scene, result, mirror),
            "standalone": standalone_figures(by_index[spec.index]),
        })  # fmt: skip
    graphs = [e["graph"] for e in episodes]
    # each episode's first call left out: in a fresh worker it loads what the node loaded
    # before its first skill (the node's figures start warm)
    loop = _percentiles([1000.0 * t for r in standalone for t in r["act_s"][1:]])
    rates = _spread([g["rate_status_hz"] for g in graphs])
    errors = [g["error"] for g in graphs if g["error"] or g["state"] is None]
    return {
        "benchmark": BENCHMARK, "episodes": episodes, "rows": rows(episodes),
        "rate_status_hz": rates,
        "rate_commands_hz": _spread([g["rate_commands_hz"] for g in graphs]),
        "command_interval_p99_ms": _spread([g["command_interval_p99_ms"] for g in graphs]),
        "act_ms_graph": _spread([g["act_ms_mean"] for g in graphs]),
        "act_ms_p95_graph": _spread([g["act_ms_p95"] for g in graphs]),
        "act_ms_standalone": loop, "latency_one_core": latency,
        "wall_s": _spread([g["wall_s"] for g in graphs]),
        "setup_s": _spread([g["setup_s"] for g in graphs]),
        "standalone_sim_s": _spread([e["standalone"]["sim_s"] for e in episodes]),
        "agree": sum(g["node_success"] == g["pose_success"] for g in graphs),
        "vla_startup_s": through["vla_startup_s"], "rate_target_hz": RATE_TARGET_HZ,
        "errors": errors,
        "passed": not errors and (rates["min"] or 0.0) >= RATE_TARGET_HZ,
    }  # fmt: skip


BUSY_SUCCESS_DROP = 0.10  # the busy run's success may be this much below the quiet run's


def busy_summary(quiet: dict, busy: dict, cores: int) -> dict:
    """The busy run's figures beside the quiet run's: success through the graph (poses), the
    control rate, the steps held, the policy time; passed when its success is within
    ``BUSY_SUCCESS_DROP`` of the quiet run's and its rate at least the target."""
    count = len(busy["episodes"])
    quiet_ok = sum(bool(e["graph"]["pose_success"]) for e in quiet["episodes"])
    busy_ok = sum(bool(e["graph"]["pose_success"]) for e in busy["episodes"])
    graphs = [e["graph"] for e in busy["episodes"]]
    within = busy_ok >= quiet_ok - BUSY_SUCCESS_DROP * count
    return {
        "busy_cores": cores, "episodes": count, "quiet_success": quiet_ok,
        "success": busy_ok, "rows": busy["rows"], "rate_status_hz": busy["rate_status_hz"],
        "command_interval_p99_ms": busy["command_interval_p99_ms"],
        "act_ms_graph": busy["act_ms_graph"],
        "held_steps": sum(g["held_steps"] or 0 for g in graphs),
        "steps": sum(g["steps"] or 0 for g in graphs), "errors": busy["errors"],
        "episode_lines": [_episode_line(e) for e in busy["episodes"]],
        "passed": within and busy["passed"],
    }  # fmt: skip


def _busy_lines(busy: dict) -> list[str]:
    rate = busy["rate_status_hz"]
    return [
        f"  with {busy['busy_cores']} core(s) kept busy by another process: success "
        f"{busy['success']}/{busy['episodes']} through the graph (quiet "
        f"{busy['quiet_success']}/{busy['episodes']}); control rate {rate['mean']} Hz (min "
        f"{rate['min']}); {busy['held_steps']} of {busy['steps']} steps held; policy time "
        f"{busy['act_ms_graph']['mean']} ms [{'PASS' if busy['passed'] else 'FAIL'}: success "
        f"within {100 * BUSY_SUCCESS_DROP:g} points of quiet, rate >= {RATE_TARGET_HZ:g} Hz]",
        *busy["episode_lines"],
    ]


def _episode_line(e: dict) -> str:
    g, s = e["graph"], e["standalone"]
    return (
        f"  #{e['index']} {e['instruction']!r}: graph {g['state']} ({g['pose_detail']}; "
        f"{g['rate_status_hz']} Hz, {g['steps']} steps, {g['held_steps']} held, "
        f"{g['act_ms_mean']} ms/action, {g['wall_s']} s, arm "
        f"moved {g['arm_travel_rad']} rad, layout {g['layout_error_mm']} mm); standalone "
        f"{'success' if s['success'] else 'failed'} ({s['detail']})"
    )


def format_text(report: dict) -> str:
    """Rows per family and split, the rates and times, then one line per episode."""
    lines = [
        f"lang2policy bench vla --graph: {report['model']}, seed {report['seed']}, "
        f"realism {report.get('realism', 'off')}, "
        f"{report['per_split']} per family and split, {len(report['episodes'])} episodes, "
        f"{report['seconds']} s ({report['cpu_count']} CPUs, load {report['load_average']})",
        f"  {'family':<10} {'split':<19} {'graph(node)':>11} {'graph(poses)':>12} "
        f"{'standalone':>10} {'oracle':>6}",
    ]
    for row in report["rows"]:
        n = row["episodes"]
        lines.append(
            f"  {row['family']:<10} {row['split']:<19} {row['graph_node']:>9}/{n} "
            f"{row['graph_poses']:>10}/{n} {row['standalone']:>8}/{n} {row['oracle']:>4}/{n}"
        )
    status, commands = report["rate_status_hz"], report["rate_commands_hz"]
    alone = report["act_ms_standalone"]
    verdict = "PASS" if report["passed"] else "FAIL"
    lines += [
        f"  control rate through the graph: {status['mean']} Hz (min {status['min']}) by the "
        f"node's count, {commands['mean']} Hz (min {commands['min']}) on "
        f"/lang2policy/joint_command, interval p99 up to "
        f"{report['command_interval_p99_ms']['max']} ms [target >= "
        f"{report['rate_target_hz']:g} Hz: {verdict}]",
        f"  policy time per action: graph mean {report['act_ms_graph']['mean']} ms (p95 up to "
        f"{report['act_ms_p95_graph']['max']}); standalone in the loop mean "
        f"{alone['mean_ms']} ms (p95 {alone['p95_ms']}); one core, alone, p50 "
        f"{report['latency_one_core']['p50_ms']} ms",
        f"  wall per episode through the graph: {report['wall_s']['mean']} s (send to end; "
        f"+ {report['setup_s']['mean']} s to start its sim and safety node); standalone "
        f"{report['standalone_sim_s']['mean']} s simulated; VLA node up in "
        f"{report['vla_startup_s']} s",
        f"  node and pose verdicts agree on {report['agree']}/{len(report['episodes'])}",
    ]
    for e in report["episodes"]:
        lines.append(_episode_line(e))
        if e["graph"]["error"]:
            lines.append(f"    error: {e['graph']['error'][:300]}")
    if report.get("busy"):
        lines += _busy_lines(report["busy"])
    lines.append(f"  report: {report['out']}")
    return "\n".join(lines)
