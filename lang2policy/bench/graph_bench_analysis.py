"""The figures of ``lang2policy bench graph`` from what its probe recorded, and the rows of
its table against the targets of issue 16. Pure: no ROS, no processes.

The probe's records (``lang2policy.ros.graph_bench_probe``): per instruction, the send time,
the planner's statuses with their receive times, the first joint state whose arm left its
position (receive time, sim stamp), the sim-time span in which an arm joint moved, and the
ground-truth object positions before, after and at their highest in between; for the stop, the
joint states around the ``/lang2policy/stop`` call.
"""

from __future__ import annotations

import math

import numpy as np

FIRST_MOTION_P90 = 5.0  # s, instruction -> first arm motion
WALL_FACTOR = 1.3  # wall time <= factor x (motion time + planning time)
IDLE_CORES = 0.25  # the idle graph, all nodes
CONTROLLER_RATIO = 0.8  # in-graph planning rate / standalone
STOP_HALTED = 0.1  # s from the stop call until the arm's joint speeds are below HALT_SPEED
STOP_OVERSHOOT = 0.005  # rad past where the arm comes to rest (and back)
HALT_SPEED = 0.05  # rad/s: every arm joint slower than this is halted
MOVING_SPEED = 0.05  # rad/s: a joint this fast at the stop call was moving
REST_WINDOW = 0.2  # s of sim time at the end of the record whose mean is the rest position
LIFT_SHARE = 0.5  # a lift succeeds when the object rose at least this share of the height
OFFSET_TOLERANCE = 0.025  # m: a block moved by an offset lies this close to the spot asked
OFFSET_LEVEL = 0.01  # m: ... at the height it had (on the table, not on something)


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``value`` rounded; None for None or a non-finite value (JSON has no NaN)."""
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation), None for no values."""
    return float(np.percentile(values, q)) if values else None


# ----------------------------------------------------------------- success
def succeeded(check: dict, before: dict, after: dict, top: dict, sizes) -> tuple[bool, str]:
    """Whether the simulator's object poses show the task done, and why (``sizes``: the
    robot description's ``ObjectSizes``). ``in``: the object rests inside the bowl (xy within
    the rim, z between the bowl's base and rim, as ``World.is_in``); ``lift``: the object rose
    at least ``LIFT_SHARE`` of the height asked; ``offset``: the object lies within
    ``OFFSET_TOLERANCE`` of where it was plus ``by`` (x, y metres), on the table; ``all``: every
    check of ``checks`` (a compound instruction's steps)."""
    if check["kind"] == "all":
        results = [succeeded(part, before, after, top, sizes) for part in check["checks"]]
        return all(ok for ok, _ in results), "; ".join(why for _, why in results)
    name = check["object"]
    if name not in before or name not in after:
        return False, f"{name!r} not on /sim/objects"
    if check["kind"] == "in":
        return _in_bowl(name, check["bowl"], after, sizes)
    if check["kind"] == "lift":
        rose = max(top.get(name, after[name][2]), after[name][2]) - before[name][2]
        need = LIFT_SHARE * check["height"]
        return rose >= need, f"rose {100 * rose:.1f} cm (>= {100 * need:.1f} asked)"
    if check["kind"] == "offset":
        return _offset(name, check["by"], before, after)
    raise ValueError(f"unknown success check {check['kind']!r}")


def _in_bowl(name: str, bowl: str, after: dict, sizes) -> tuple[bool, str]:
    if bowl not in after:
        return False, f"{bowl!r} not on /sim/objects"
    a, b = np.array(after[name]), np.array(after[bowl])
    distance = float(np.hypot(*(a[:2] - b[:2])))
    rim = sizes.bowl_radius - 0.5 * sizes.block_half
    low = b[2] < a[2] < b[2] + sizes.bowl_height + sizes.block_half
    why = f"{name}: xy {100 * distance:.1f} cm from the bowl's centre (< {100 * rim:.1f}), "
    why += f"z {100 * (a[2] - b[2]):.1f} cm above its base"
    return bool(distance < rim and low), why


def _offset(name: str, by, before: dict, after: dict) -> tuple[bool, str]:
    was, now = np.array(before[name]), np.array(after[name])
    wanted = was[:2] + np.array(by, float)
    miss = float(np.hypot(*(now[:2] - wanted)))
    level = abs(now[2] - was[2]) < OFFSET_LEVEL
    moved = 100 * (now[:2] - was[:2])
    why = f"{name}: moved ({moved[0]:+.1f}, {moved[1]:+.1f}) cm, {100 * miss:.1f} cm from the "
    why += f"spot asked (< {100 * OFFSET_TOLERANCE:.1f}), {'on' if level else 'off'} the table"
    return bool(miss < OFFSET_TOLERANCE and level), why


def task_figures(task: dict, sizes) -> dict:
    """One instruction's figures: first motion, planning, motion and wall time, success."""
    sent = task["sent"]
    plan = next((t for t, state, *_ in task["statuses"] if state == "plan"), None)
    first = task["first_motion"]
    moving = task["moving"]
    motion = moving[1] - moving[0] if moving else 0.0
    planning = plan - sent if plan is not None else None
    wall = task["ended"] - sent if task["ended"] is not None else None
    ratio = None
    if wall is not None and planning is not None and motion + planning > 0:
        ratio = wall / (motion + planning)
    ok, why = succeeded(
        task["check"], task["objects_before"], task["objects_after"], task["objects_top"], sizes
    )
    return {
        "instruction": task["text"],
        "route": task["route"],
        "outcome": task["outcome"],
        "controller_outcome": task.get("controller_outcome"),
        "outcome_detail": task["outcome_detail"],
        "first_motion_s": rounded(first[0] - sent if first else None),
        "planning_s": rounded(planning),
        "motion_s": rounded(motion),
        "wall_s": rounded(wall),
        "wall_ratio": rounded(ratio),
        "success": ok and task["outcome"] == "done",
        "success_detail": why,
        # the planner's claim agrees with the simulator: "done" exactly when the goal holds
        "claim_matches_sim": (task["outcome"] == "done") == ok,
        "statuses": [
            [f"{state}: {phase[0]}" if phase and phase[0] else state, rounded(t - sent, 2)]
            for t, state, *phase in task["statuses"]
        ],
    }


# ----------------------------------------------------------------- stop
def stop_figures(stop: dict) -> dict:
    """Halt time and overshoot of the stop from its joint states (``[received, stamp,
    {joint: [q, v]}]``); ``halted_s``: sim seconds from the call until every arm joint is
    slower than ``HALT_SPEED``; ``settled_s``: until the arm stays within ``STOP_OVERSHOOT``
    of its rest position (the stop test's measure); ``overshoot_rad``: how far a joint moving
    at the call ran past its rest position (the mean of the last ``REST_WINDOW`` s) and came
    back."""
    called = stop["called_stamp"]
    states = sorted(stop["states"], key=lambda s: s[1])
    before = [s for s in states if s[1] <= called] or states[:1]
    after = [s for s in states if s[1] >= called]
    if not after:
        return {"error": "no joint states after the stop call"}
    names = sorted(after[0][2])
    q = np.array([[s[2][n][0] for n in names] for s in after])
    v = np.array([[s[2][n][1] for n in names] for s in after])
    stamps = np.array([s[1] for s in after])
    rest = q[stamps >= stamps[-1] - REST_WINDOW].mean(axis=0)
    at_call = np.array([before[-1][2][n][1] for n in names])
    moving = np.abs(at_call) > MOVING_SPEED
    past = (q - rest) * np.sign(at_call)
    overshoot = float(np.clip(past[:, moving], 0.0, None).max()) if moving.any() else 0.0
    slow = np.flatnonzero(np.abs(v).max(axis=1) < HALT_SPEED)
    away = np.flatnonzero(np.abs(q - rest).max(axis=1) > STOP_OVERSHOOT)
    settled = stamps[min(away[-1] + 1, len(stamps) - 1)] if away.size else stamps[0]
    return {
        "speed_at_call": rounded(float(np.abs(at_call).max()), 3),
        "halted_s": rounded(stamps[slow[0]] - called if slow.size else None),
        "settled_s": rounded(float(settled - called)),
        "overshoot_rad": rounded(overshoot, 4),
        "travel_rad": rounded(float(np.abs(rest - q[0]).max()), 4),
        "service_ms": rounded(1000.0 * (stop["answered"] - stop["called"]), 1),
        "success": stop["success"],
        "message": stop["message"],
        "moving_at_call": [n for n, m in zip(names, moving, strict=True) if m],
        "controller_before": stop.get("controller"),
    }


# ----------------------------------------------------------------- rows
def _row(name: str, value: str, target: str, passed: bool | None) -> dict:
    return {"name": name, "value": value, "target": target, "passed": passed}


def _fmt(value: float | None, unit: str, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} {unit}".rstrip()


def _outcome(task: dict) -> str:
    controller = task.get("controller_outcome")
    return task["outcome"] + (f" (controller: {controller})" if controller else "")


def latency_rows(report: dict) -> list[dict]:
    """Start-up, instruction -> first motion (p50, p90), per-task wall time and success."""
    rows = [_row("graph start-up (launch -> ready)", _fmt(report["startup_s"], "s", 1), "-", None)]
    if report.get("restart_s") is not None:
        value = _fmt(report["restart_s"], "s", 1)
        rows.append(_row("graph restart (LLM prefixes kept on disk)", value, "-", None))
    latency = report["first_motion"]
    p90 = latency["p90_s"]
    rows.append(
        _row(
            "instruction -> first motion p50 / p90",
            f"{_fmt(latency['p50_s'], 's')} / {_fmt(p90, 's')} (n={latency['n']})",
            f"p90 <= {FIRST_MOTION_P90:g} s",
            p90 is not None and latency["missing"] == 0 and p90 <= FIRST_MOTION_P90,
        )
    )
    for task in report["tasks"]:
        ratio = task["wall_ratio"]
        rows.append(
            _row(
                f"{task['route']}: {task['instruction']!r} wall",
                f"{_fmt(task['wall_s'], 's', 1)} = {_fmt(ratio, 'x')} (motion "
                f"{_fmt(task['motion_s'], 's', 1)} + planning {_fmt(task['planning_s'], 's', 1)})",
                f"<= {WALL_FACTOR:g} x",
                ratio is not None and ratio <= WALL_FACTOR,
            )
        )
        rows.append(
            _row(
                f"{task['route']}: {task['instruction']!r} success (sim)",
                f"{_outcome(task)}; {task['success_detail']}",
                "success",
                task["success"],
            )
        )
    rows.append(claims_row(report["tasks"]))
    return rows


def claims_row(tasks: list[dict]) -> dict:
    """Over every instruction, per route: how often the planner's final state ("done" or
    not) agrees with the goal judged from the simulator's poses; a "done" whose goal does
    not hold (or a failure that did reach it) is listed."""
    routes: dict[str, list[int]] = {}
    wrong = []
    for task in tasks:
        agree = routes.setdefault(task["route"], [0, 0])
        agree[1] += 1
        if task["claim_matches_sim"]:
            agree[0] += 1
        else:
            wrong.append(f"{task['instruction']!r} claimed {task['outcome']}")
    value = ", ".join(f"{route} {a}/{n}" for route, (a, n) in routes.items())
    value += f"; mismatched: {'; '.join(wrong)}" if wrong else ""
    return _row("claimed outcome = simulator's verdict", value, "all", not wrong and bool(tasks))


def resource_rows(report: dict) -> list[dict]:
    """Idle CPU, controller rate, stop halt time and overshoot (or why they are missing)."""
    rows = []
    idle = report["idle_cpu"]
    if "total" in idle:
        value = f"{idle['total']:.3f} cores"
        rows.append(_row("idle CPU, all nodes", value, f"<= {IDLE_CORES:g}", idle["passed"]))
    else:
        rows.append(_row("idle CPU, all nodes", idle.get("unavailable", "n/a"), "-", None))
    rate = report["controller_rate"]
    if rate.get("ratio") is not None:
        value = (
            f"{rate['in_graph']['rate_hz']} Hz / {rate['standalone']['rate_hz']} Hz "
            f"= {100 * rate['ratio']:.0f} %"
        )
        rows.append(_row("controller rate in graph / standalone", value, ">= 80 %", rate.get("ok")))
    else:
        what = rate.get("unavailable", "n/a")
        rows.append(_row("controller rate in graph / standalone", what, ">= 80 %", None))
    stop = report["stop"]
    if stop.get("halted_s") is not None or "overshoot_rad" in stop:
        halted = stop.get("halted_s")
        value = "never" if halted is None else f"{1000 * halted:.0f} ms"
        value += f" (from {stop['speed_at_call']} rad/s; settled {1000 * stop['settled_s']:.0f} ms)"
        ok = halted is not None and halted <= STOP_HALTED + 1e-6
        rows.append(_row("stop: halted", value, f"<= {1000 * STOP_HALTED:.0f} ms", ok))
        over = stop["overshoot_rad"]
        rows.append(
            _row("stop: overshoot", f"{over:.4f} rad", f"<= {STOP_OVERSHOOT:g} rad",
                 over <= STOP_OVERSHOOT)
        )  # fmt: skip
    else:
        rows.append(_row("stop", stop.get("unavailable", stop.get("error", "n/a")), "-", None))
    return rows
