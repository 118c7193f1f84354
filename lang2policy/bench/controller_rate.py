"""``lang2policy bench controller-rate``: the MPC controller node's planning rate in a live
graph against the same planner standalone, on the same machine, in one run.

In the graph: a sim node (cameras off, ground-truth objects, seed 0) and the controller node
run as processes in a private ROS graph (a fresh ``ROS_DOMAIN_ID``, discovery on localhost);
a probe process (``lang2policy.ros.controller_rate_probe``) sends one reward spec (the tool to
a point, no success condition, so planning runs the whole time) and records the controller's
status lines; the rate is the planning iterations the node counted over the wall time between
the first and the last status of the window. Standalone, for half the window before the graph
starts and half after it has stopped (their mean): the same sampler settings on the same spec
and scene, planning from the sim's start state in a loop (``lang2policy bench mpc``'s
measurement, on this spec). The acceptance bar is 80 %.

Processes only: this module imports no ROS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from lang2policy.bench.parity_processes import REPO, Child
from lang2policy.errors import Lang2PolicyError
from lang2policy.graph import topics

TARGET = (0.22, 0.08, 0.14)  # m: a point the tool can reach, away from its rest pose
BAR = 0.8  # in-graph rate / standalone rate that passes


def rate_spec(seconds: float) -> dict:
    """A spec that keeps the planner busy for longer than ``seconds`` (no success check)."""
    return {
        "version": 1,
        "task": f"tool to {list(TARGET)}",
        "duration": min(120.0, seconds + 60.0),
        "terms": [{"term": "tool_to_point", "params": {"point": list(TARGET)}}],
    }


def _env(domain_id: int) -> dict[str, str]:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.setdefault("MUJOCO_GL", "egl")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _node(module: str, params: list[str], remaps: list[str] = ()) -> list[str]:
    argv = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args"]
    argv += [a for p in params for a in ("-p", p)]
    return argv + [a for r in remaps for a in ("-r", r)]


def in_graph(
    spec: dict,
    seconds: float,
    samples: int,
    threads: int,
    domain_id: int,
    planner_process: bool = True,
    proposals: bool = True,
) -> dict:
    """The controller node's planning rate in a sim graph (see the module docstring)."""
    env = _env(domain_id)
    sim = _node(
        "sim_node",
        ["camera_rate:=0.0", "seed:=0", f"objects_topic:={topics.OBJECTS.name}"],
        [f"{topics.TRAJECTORY.name}:={topics.JOINT_COMMAND.name}"],
    )
    controller = _node(
        "controller_node",
        [
            f"samples:={samples}",
            f"threads:={threads}",
            f"planner_process:={str(planner_process).lower()}",
            f"proposals:={str(proposals).lower()}",
        ],
    )
    probe = [
        sys.executable,
        "-m",
        "lang2policy.ros.controller_rate_probe",
        json.dumps(spec),
        str(seconds),
    ]
    children = [Child("sim_node", sim, env), Child("controller_node", controller, env)]
    try:
        children.append(Child("probe", probe, env))
        try:
            children[-1].process.wait(timeout=seconds + 240)
        except subprocess.TimeoutExpired as exc:
            raise Lang2PolicyError(
                f"the rate probe did not finish:\n{children[-1].tail()}"
            ) from exc
        time.sleep(0.2)  # the reader thread takes the last line
        lines = [line for line in children[-1].lines if line.startswith("{")]
        if not lines:
            raise Lang2PolicyError(f"the rate probe printed nothing:\n{children[-1].tail()}")
        result = json.loads(lines[-1])
    finally:
        for child in reversed(children):
            child.stop()
    codes = {child.label: child.process.returncode for child in children}
    return summarize(result, codes)


def summarize(result: dict, codes: dict[str, int | None]) -> dict:
    """Rates from the probe's ``(t, iterations, rate_hz, plan_ms)`` samples, exit codes."""
    samples = result.get("samples", [])
    rate = float("nan")
    if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
        rate = (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])
    reported = [s[2] for s in samples if s[2]]
    plan_ms = [s[3] for s in samples if s[3]]
    return {
        "rate_hz": round(rate, 1),
        "reported_rate_hz_median": round(statistics.median(reported), 1) if reported else None,
        "plan_ms_median": round(statistics.median(plan_ms), 1) if plan_ms else None,
        "statuses": len(samples),
        "error": result.get("error"),
        "exit_codes": codes,
    }


def standalone(
    spec: dict, seconds: float, samples: int, threads: int, proposals: bool = True
) -> dict:
    """Planning iterations per wall second of the same sampler, alone, from the sim's start
    state loaded as the node loads it: measured joints and objects, the controls holding the
    measured joints (``load_world`` would copy the world's unset controls, which drive the arm
    into the table in every rollout and cost twice the physics)."""
    from lang2policy.mpc.arm_map import ArmMap
    from lang2policy.mpc.model import ObjectState, PlanningModel
    from lang2policy.mpc.sampler import MPCConfig, Sampler
    from lang2policy.rewards.spec import validate_spec
    from lang2policy.scene.world import World

    world = World("so101")
    world.reset(0)  # what the sim node draws for seed 0
    pm = PlanningModel(world.description, world.present)
    arm = ArmMap(pm)
    joints = dict(zip(world.arm.joint_names, (float(q) for q in world.arm_qpos()), strict=True))
    joints["gripper"] = world.gripper_opening()
    poses = {name: world.object_pose(name) for name in world.present}
    objects = {name: ObjectState(pose.position, pose.quat) for name, pose in poses.items()}
    hold = arm.ctrl(joints)
    sampler = Sampler(pm, MPCConfig(samples=samples, threads=threads, proposals=proposals))
    sampler.reset(ctrl=hold, start=world.time)
    reward = validate_spec(spec, world.present).spec
    count, began = 0, time.perf_counter()
    try:
        while time.perf_counter() - began < seconds or count < 3:
            pm.load_measurements(world.time, arm.model_joints(joints), objects, ctrl=hold)
            sampler.improve(reward)
            count += 1
    finally:
        sampler.close()
    return {"rate_hz": round(count / (time.perf_counter() - began), 1), "iterations": count}


def controller_rate_in_graph_vs_standalone(
    seconds: float = 10.0,
    samples: int = 32,
    threads: int = 2,
    domain_id: int | None = None,
    planner_process: bool = True,
    proposals: bool | None = None,
) -> dict:
    """The controller node's planning rate in a live graph and the same planner's standalone
    rate (sampling, ``samples`` rollouts, ``threads`` threads, IK proposals as ``proposals``
    says, by default as the node does: on with a worker process), and their ratio; ``ok``
    when the ratio is at least 0.8."""
    proposals = planner_process if proposals is None else proposals
    if seconds <= 0:
        raise Lang2PolicyError("seconds must be positive")
    domain = domain_id if domain_id is not None else 100 + os.getpid() % 100
    spec = rate_spec(seconds)
    # Standalone half before and half after the graph: a load that drifts meanwhile (the
    # machine's other work) weighs on both sides alike.
    before = standalone(spec, seconds / 2, samples, threads, proposals)
    graph = in_graph(spec, seconds, samples, threads, domain, planner_process, proposals)
    after = standalone(spec, seconds / 2, samples, threads, proposals)
    alone = {
        "rate_hz": round((before["rate_hz"] + after["rate_hz"]) / 2, 1),
        "before_hz": before["rate_hz"],
        "after_hz": after["rate_hz"],
        "iterations": before["iterations"] + after["iterations"],
    }
    ratio = graph["rate_hz"] / alone["rate_hz"] if alone["rate_hz"] else float("nan")
    return {
        "benchmark": "controller-rate",
        "cpus": os.cpu_count(),
        "seconds": seconds,
        "samples": samples,
        "threads": threads,
        "planner_process": planner_process,
        "proposals": proposals,
        "in_graph": graph,
        "standalone": alone,
        "ratio": round(ratio, 3) if ratio == ratio else None,
        "ok": ratio == ratio and ratio >= BAR and graph["error"] is None,
    }


def format_text(report: dict) -> str:
    graph, alone = report["in_graph"], report["standalone"]
    where = "a worker process" if report["planner_process"] else "the node's process"
    lines = [
        f"controller planning rate ({report['samples']} samples"
        f"{' + IK proposals' if report['proposals'] else ''}, {report['threads']} threads, "
        f"{report['cpus']} CPUs; planning in {where}):",
        f"  in the graph: {graph['rate_hz']} Hz (node-reported median "
        f"{graph['reported_rate_hz_median']} Hz, {graph['statuses']} statuses; "
        f"{graph['plan_ms_median']} ms per iteration)",
        f"  standalone:   {alone['rate_hz']} Hz (before the graph {alone['before_hz']} Hz, "
        f"after {alone['after_hz']} Hz)",
        f"  ratio: {report['ratio']} (bar {BAR}) -> {'ok' if report['ok'] else 'BELOW'}",
    ]
    if graph["error"]:
        lines.append(f"  error: {graph['error']}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window (s)")
    parser.add_argument("--samples", type=int, default=32, help="rollouts per iteration")
    parser.add_argument("--threads", type=int, default=2, help="rollout threads")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="plan on a thread in the node's process (the old design)",
    )
    parser.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID of the graph")


def run_args(args: argparse.Namespace) -> dict:
    """``lang2policy bench controller-rate``."""
    return controller_rate_in_graph_vs_standalone(
        args.seconds, args.samples, args.threads, args.domain_id, not args.in_process
    )


def exit_code(report: dict) -> int:
    """0 when the in-graph rate is at least 80 % of the standalone rate."""
    return 0 if report["ok"] else 1
