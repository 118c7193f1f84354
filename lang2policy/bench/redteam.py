"""``lang2policy bench redteam``: the safety layer attacked through the graph, judged by the arm.

The graph runs as processes in a private ROS domain: the robot node (the MuJoCo sim node, or
with ``--robot so101-hw`` the real SO-101 driver on the emulated servo bus) and the safety node,
each started as ``python -m lang2policy.ros.<node>``. Each scenario is one run of the attacker
(``lang2policy.ros.redteam_probe``), which prints what the *arm* did; the table compares it with
the acceptance bound:

* reverse, 10 Hz and 50 Hz: a random stream reversing within the cap -- joints <= 1.1 x the
  cap, the tool <= ``TOOL_CAP``, never more than 5 mm outside the workspace;
* cap stream: shoulder_pan back and forth at the cap (``--stream-seconds``) -- the arm trails
  the stream by <= 0.3 s throughout;
* keep-out: a plan zone ahead of a 10 Hz sweep -- no gripper geometry inside, cut by the
  safety node;
* a commander killed at 10 and 50 Hz, then the safety node killed -- the arm still within
  0.3 s, moving <= 0.05 rad after.

Processes only: this module imports no ROS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from lang2policy.bench.hostile_vla import HostileVLA
from lang2policy.bench.parity_processes import REPO, Child, _child_env, _node
from lang2policy.errors import Lang2PolicyError
from lang2policy.safety.effects import Geometry

JOINT_FACTOR = 1.1  # measured joint speed <= this x the cap
TOOL_CAP = 1.0  # m/s: the tool speed the SO-101 may reach (0.4 m reach x 1.5 rad/s x ~1.6)
WORKSPACE_SLACK = 0.005  # m
LAG_BOUND = 0.3  # s
STILL_BOUND, MOVED_BOUND = 0.3, 0.05  # s, rad
SCENARIOS = ("reverse", "vla", "cap_stream", "keep_out", "kill")
VLA_SKILL = "lift the blue block"  # a trained phrasing; the hostile policy ignores it
TOWARD = np.array([0.5, 0.0, 0.0, 0.0, 0.0])  # the zone's pose: home, shoulder_pan + 0.5 rad


def status(text: str) -> None:
    print(f"[redteam] {text}", file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--robot",
        choices=("sim", "so101-hw"),
        default="sim",
        help="robot node: the sim node, or the SO-101 driver on the emulated servo bus",
    )
    parser.add_argument("--reverse-seconds", type=float, default=10.0, help="s per reverse run")
    parser.add_argument(
        "--stream-seconds", type=float, default=60.0, help="s of the stream at the cap"
    )
    parser.add_argument("--seed", type=int, default=0, help="the reversals' random seed")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {', '.join(SCENARIOS)} (default: all)",
    )
    parser.add_argument("--domain", type=int, help="ROS_DOMAIN_ID (default from the pid)")


def graph_commands(robot: str, workdir: str, vla_url: str = "") -> list[tuple[str, list[str]]]:
    """(label, argv) of the graph's processes, the safety node last. With ``vla_url`` (sim
    only), the perception node and the VLA node on that remote policy too."""
    if robot == "sim":
        nodes = [("sim_node", _node("sim_node", f"camera_rate:={10.0 if vla_url else 0.0}"))]
        if vla_url:
            nodes += [
                ("perception_node", _node("perception_node", "use_sim_time:=true")),
                ("vla_node", _node("vla_node", f"backend:={vla_url}", "use_sim_time:=true")),
            ]
    else:
        port = os.path.join(workdir, "so101")
        nodes = [
            ("so101_emulator", _node("so101_emulator_node", f"link:={port}")),
            (
                "so101_driver",
                _node("so101_driver_node", f"port:={port}", "port_wait:=30.0", "bus_timeout:=0.1"),
            ),
        ]
    return [*nodes, ("safety_node", _node("safety_node"))]


def _attack(plan: dict, env: dict[str, str], timeout: float) -> dict:
    status(f"{plan['scenario']} {json.dumps({k: v for k, v in plan.items() if k != 'pid'})}")
    done = subprocess.run(
        [sys.executable, "-m", "lang2policy.ros.redteam_probe", json.dumps(plan)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise Lang2PolicyError(
            f"the attacker failed ({done.returncode}) in {plan['scenario']}:\n{done.stderr[-2000:]}"
        )
    return {**{k: v for k, v in plan.items() if k != "pid"}, **json.loads(lines[-1])}


def plans(args: argparse.Namespace, vla_zone: dict | None) -> list[dict]:
    """The scenarios in order (the safety node's own death last); the VLA ones on the sim."""
    vla, vla_kill = [], []
    if vla_zone is not None:
        skill = {"scenario": "vla", "skill": VLA_SKILL, "duration": args.reverse_seconds}
        toward = {**skill, "mode": "toward", "zone": vla_zone["box"], "start": vla_zone["start"]}
        vla = [{**skill, "mode": "erratic"}, toward]
        # the VLA node itself killed mid-skill, walking at its cap to a far pose
        vla_kill = [
            {
                "scenario": "kill",
                "rate": 10,
                "victim": "vla",
                "skill": VLA_SKILL,
                "mode": "far",
                "start": vla_zone["start"],
            }
        ]
    return [
        {"scenario": "reverse", "rate": 10, "duration": args.reverse_seconds, "seed": args.seed},
        {"scenario": "reverse", "rate": 50, "duration": args.reverse_seconds, "seed": args.seed},
        *vla,
        {"scenario": "cap_stream", "duration": args.stream_seconds},
        {"scenario": "keep_out", "duration": 4.0},
        {"scenario": "kill", "rate": 10},
        {"scenario": "kill", "rate": 50},
        *vla_kill,
        {"scenario": "kill", "rate": 50, "victim": "safety"},
    ]


def run_args(args: argparse.Namespace) -> dict:
    import tempfile

    chosen = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown or not chosen:
        raise Lang2PolicyError(f"--scenarios: unknown {unknown}; choose from {list(SCENARIOS)}")

    domain = args.domain if args.domain is not None else 150 + os.getpid() % 80
    env = _child_env(domain)
    results = []
    server = zone = None
    if args.robot == "sim" and "vla" in chosen:
        geometry = Geometry()
        home = geometry.arm.home
        server = HostileVLA("erratic", np.append(home, 0.5), seed=args.seed)
        lower, upper = geometry.zone_around(home + TOWARD)
        # The skill starts on the other side of home and heads into the zone.
        zone = {"box": {"lower": lower, "upper": upper}, "start": (home - TOWARD).tolist()}
    with tempfile.TemporaryDirectory(prefix="l2p-redteam-") as workdir:
        children = []
        try:
            for label, argv in graph_commands(args.robot, workdir, server.url if server else ""):
                status(f"starting {label} (ROS_DOMAIN_ID={domain})")
                children.append(Child(label, argv, env))
            pids = {child.label: child.process.pid for child in children}
            for plan in [p for p in plans(args, zone) if p["scenario"] in chosen]:
                if plan.get("victim") == "vla" and "vla" not in chosen:
                    continue
                if plan.get("victim") in ("safety", "vla"):
                    plan["pid"] = pids[f"{plan['victim']}_node"]
                if "mode" in plan:
                    _aim(server, plan, geometry)
                timeout = 180.0 + float(plan.get("duration", 0.0))
                results.append(_attack(plan, env, timeout))
                time.sleep(1.0)  # the arm settles between attacks
        finally:
            for child in reversed(children):
                child.stop()
            if server is not None:
                server.close()
    return {"robot": args.robot, "results": [judge(r) for r in results]}


def _aim(server: HostileVLA, plan: dict, geometry: Geometry) -> None:
    """Point the hostile policy: erratic around home, straight at the zone's pose, or at a
    pose far enough for the arm to reach its cap (shoulder_pan +1.25 rad)."""
    home = geometry.arm.home
    server.mode = "erratic" if plan["mode"] == "erratic" else "toward"
    offset = {"erratic": 0.0, "toward": TOWARD, "far": 2.5 * TOWARD}[plan["mode"]]
    server.base = np.append(home + offset, 0.5)


def judge(result: dict) -> dict:
    """``result`` with ``bound`` (text) and ``ok`` (the acceptance verdict)."""
    kind = result["scenario"]
    if kind == "vla" and "zone" in result:
        ok = result["zone_depth"] <= 0.0 and result["vla_end"] == "stopped"
        ok = ok and "keep-out" in (result["vla_reason"] or "")
        bound = "no gripper geometry in the zone; the skill ends stopped: keep-out"
    elif kind in ("reverse", "vla"):  # a stream reversing within the cap
        cap = result["cap"]
        ok = (
            result["peak_joint_speed"] <= JOINT_FACTOR * cap
            and result["peak_tool_speed"] <= TOOL_CAP
            and result["workspace_excursion"] <= WORKSPACE_SLACK
        )
        bound = f"joints <= {JOINT_FACTOR * cap:.2f} rad/s, tool <= {TOOL_CAP} m/s, +5 mm"
    elif kind == "cap_stream":
        ok = result["lag_max"] is not None and result["lag_max"] <= LAG_BOUND
        bound = f"lag <= {LAG_BOUND} s throughout"
    elif kind == "keep_out":
        ok = result["zone_depth"] <= 0.0 and result["keep_out_cuts"] > 0
        bound = "no gripper geometry in the zone; cut by the safety node"
    else:
        still = result["still_after"]
        ok = (
            still is not None
            and still <= STILL_BOUND
            and result["moved_after_bound"] <= MOVED_BOUND
        )
        bound = f"still within {STILL_BOUND} s, <= {MOVED_BOUND} rad after"
    return {**result, "bound": bound, "ok": bool(ok)}


def _figures(r: dict) -> str:
    kind = r["scenario"]
    if kind == "reverse":
        return (
            f"{r['rate']} Hz: joints {r['peak_joint_speed']:.2f} rad/s, tool "
            f"{r['peak_tool_speed']:.2f} m/s, outside the workspace "
            f"{r['workspace_excursion'] * 1000:.1f} mm"
        )
    if kind == "vla":
        text = f"{r['mode']}: skill ended {r['vla_end']}"
        if "zone" in r:
            reason = (r["vla_reason"] or "")[:60]
            return f"{text} ({reason}), gripper {r['zone_depth'] * 1000:.1f} mm in"
        return (
            f"{text}; joints {r['peak_joint_speed']:.2f} rad/s, tool {r['peak_tool_speed']:.2f} "
            f"m/s, outside the workspace {r['workspace_excursion'] * 1000:.1f} mm"
        )
    if kind == "cap_stream":
        return (
            f"{r['duration']:g} s: lag {r['lag_first']:.2f} s at first, {r['lag_max']:.2f} s at "
            f"most; joints {r['peak_joint_speed']:.2f} rad/s"
        )
    if kind == "keep_out":
        return (
            f"deepest gripper point {r['zone_depth'] * 1000:.1f} mm in, {r['keep_out_cuts']} cuts"
        )
    still = "never" if r["still_after"] is None else f"{r['still_after']:.2f} s"
    return (
        f"{r['victim']} killed at {r['speed_at_kill']:.2f} rad/s: still after {still}, "
        f"{r['moved_after_bound']:.3f} rad after 0.3 s ({r['moved_after_kill']:.3f} rad in all)"
    )


def format_text(report: dict) -> str:
    lines = [f"red team through the graph ({report['robot']}):"]
    for r in report["results"]:
        mark = "ok  " if r["ok"] else "FAIL"
        lines.append(f"  {mark} {r['scenario']:<10} {_figures(r)}   [{r['bound']}]")
    return "\n".join(lines)


def exit_code(report: dict) -> int:
    return 0 if all(r["ok"] for r in report["results"]) else 1
