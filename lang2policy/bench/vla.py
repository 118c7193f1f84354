"""``lang2policy bench vla``: the trained VLA policy in closed loop on layouts no demonstration
used, beside the scripted oracle on the same scenes, in one run (issue 17).

Per task family, ``--per-split`` episodes of each split (``vla.eval.rollout.evaluation_specs``):
seen combinations with seen phrasings, held-out colour/object combinations, and held-out
phrasings. Each episode runs the policy (``vla.eval.rollout``) and then the oracle on the same
seeded scene. Episodes run in ``--workers`` processes, one torch thread each, on this machine
or on Ray (``--executor ray``, ``lang2policy.parallel.executor``; the same table either way).
Then, in this process on one thread, the policy's latency per action (p50 / p99) and rate,
and a video of the first episode of each family (``--video``).

``--realism off,mild``: the same episodes again in a world under each realism profile
(light, shades, table, distractors, camera error and the cameras' sensor effects), one block
of rows per level; levels other than ``off`` are held to ``REALISM_TARGETS``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from lang2policy.errors import ConfigError
from lang2policy.parallel.executor import add_arguments as add_executor_arguments
from lang2policy.parallel.executor import from_args as executor_from_args
from lang2policy.parallel.executor import run_ordered

TARGETS = {"seen": 0.8, "unseen combination": 0.5, "unseen phrasing": 0.5}
REALISM_TARGETS = {"seen": 0.7, "unseen combination": 0.45, "unseen phrasing": 0.45}
RATE_TARGET = 100.0  # actions per second on one core
VIDEO_SIZE = 192
FIRST_CALLS = 20  # episodes' first actions timed

def _worker_state(model: str, true_scene: bool = False, realism: str = "off") -> dict:
    """A worker's own policy (one torch thread) and rollout runner, made once."""
    os.environ["OMP_NUM_THREADS"] = "1"
    from lang2policy.realism import load_realism
    from lang2policy.vla.eval.rollout import RolloutRunner
    from lang2policy.vla.policy.runtime import VLAPolicy

    profile = load_realism(realism)
    return {
        "policy": VLAPolicy.load(model, device="cpu", threads=1),
        "runner": RolloutRunner(video_size=VIDEO_SIZE, true_scene=true_scene, realism=profile),
    }


def _episode(state: dict, job: tuple) -> dict:
    spec, video = job
    runner = state["runner"]
    result = runner.run(state["policy"], spec, video=video)
    oracle, oracle_detail = runner.oracle(spec)
    return {
        "index": spec.index, "family": spec.task.family, "split": spec.split,
        "instruction": spec.instruction, "success": result.success, "detail": result.detail,
        "sim_s": round(result.sim_seconds, 1), "oracle": oracle, "oracle_detail": oracle_detail,
        "act_s": result.act_seconds, "video": result.video if video else [],
        "block_error_mm": _median_error(result.block_errors_mm),
    }  # fmt: skip


def _job_label(job: tuple) -> str:
    return f"episode {job[0].index} ({job[0].instruction!r})"


def _median_error(errors: list) -> float | None:
    """The median over an episode's steps of the named block's estimate's error (mm, the
    length of the x, y, z error); None for a policy without a scene estimate."""
    if not errors:
        return None
    return round(float(np.median(np.linalg.norm(np.asarray(errors), axis=1))), 1)


def run_episodes(
    args: argparse.Namespace, specs: list, realism: str = "off", video: bool = True
) -> list[dict]:
    """Every spec in worker processes, in a world at ``realism``, with a progress line per
    episode; ``video``: record each family's first episode (when ``args.video`` is set)."""
    first = {}
    for spec in specs:
        first.setdefault(spec.task.family, spec.index)
    wanted = set(first.values()) if args.video and video else set()
    results = []
    setup_args = (str(args.model), getattr(args, "true_scene", False), realism)
    executor = executor_from_args(args, workers=max(1, args.workers))
    jobs = [(spec, spec.index in wanted) for spec in specs]
    episodes = run_ordered(executor, _worker_state, setup_args, _episode, jobs, _job_label)
    for number, episode in enumerate(episodes, 1):
        result = {**episode, "realism": realism}
        results.append(result)
        if not args.json:
            done = sum(r["success"] for r in results)
            where = f"{realism} {number}/{len(specs)} {result['family']}/{result['split']}"
            print(f"[vla] {where}: "
                  f"{'ok' if result['success'] else 'FAIL'} ({result['detail']}); "
                  f"policy {done}/{number}", file=sys.stderr, flush=True)  # fmt: skip
    return results


def measure_latency(model: str, calls: int = 300) -> dict:
    """The policy's time per action on one thread, on recorded-shaped inputs."""
    import torch

    from lang2policy.vla.policy.runtime import VLAPolicy
    from lang2policy.vla.spec.schema import IMAGE_SIZE, STATE_DIM

    torch.set_num_threads(1)
    policy = VLAPolicy.load(model, device="cpu", threads=1)
    rng = np.random.default_rng(0)
    size = (IMAGE_SIZE, IMAGE_SIZE, 3)
    images = {c: rng.integers(0, 255, size, np.uint8) for c in policy.cameras}
    state = np.zeros(STATE_DIM, np.float32)
    policy.reset()
    policy.act(images, state, "lift the red block")
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        policy.act(images, state, "lift the red block")
        times.append(time.perf_counter() - started)
    firsts = []  # an episode's first action: the one a latched network looks at the images for
    for _ in range(FIRST_CALLS):
        policy.reset()
        started = time.perf_counter()
        policy.act(images, state, "lift the red block")
        firsts.append(time.perf_counter() - started)
    return {**_latency(times), "first_action_p50_ms": round(1000 * float(np.median(firsts)), 2)}


def _latency(times: list[float]) -> dict:
    times_ms = 1000 * np.asarray(times)
    return {
        "p50_ms": round(float(np.percentile(times_ms, 50)), 2),
        "p99_ms": round(float(np.percentile(times_ms, 99)), 2),
        "rate_hz": round(1000.0 / float(np.mean(times_ms)), 1),
        "calls": len(times),
    }


def save_video(results: list[dict], path: Path) -> Path | None:
    """The recorded episodes one after another, each labelled with its instruction and verdict."""
    import cv2

    from lang2policy.scene.render import write_mp4

    clips = [r for r in results if r["video"]]
    if not clips:
        return None
    frames = []
    for clip in clips:
        label = f"{clip['instruction']}: {'success' if clip['success'] else 'failed'}"
        for frame in clip["video"]:
            frame = np.ascontiguousarray(frame)
            cv2.putText(frame, label[:40], (3, 12), cv2.FONT_HERSHEY_SIMPLEX, 0.33,
                        (255, 255, 255), 1, cv2.LINE_AA)  # fmt: skip
            frames.append(frame)
    return write_mp4(frames, path, fps=10)


def summarize(results: list[dict]) -> list[dict]:
    """One row per realism level, family and split: policy and oracle successes against the
    target (``TARGETS`` at ``off``, ``REALISM_TARGETS`` under a realism profile)."""
    rows = []
    for level in dict.fromkeys(r.get("realism", "off") for r in results):
        at_level = [r for r in results if r.get("realism", "off") == level]
        rows += _level_rows(level, at_level)
    return rows


def _level_rows(level: str, results: list[dict]) -> list[dict]:
    rows = []
    targets = TARGETS if level == "off" else REALISM_TARGETS
    for family in dict.fromkeys(r["family"] for r in results):
        for split, target in targets.items():
            group = [r for r in results if r["family"] == family and r["split"] == split]
            if not group:
                continue
            rate = sum(r["success"] for r in group) / len(group)
            errors = [r["block_error_mm"] for r in group if r.get("block_error_mm") is not None]
            rows.append({
                "realism": level, "family": family, "split": split, "episodes": len(group),
                "policy": sum(r["success"] for r in group), "rate": round(rate, 3),
                "oracle": sum(r["oracle"] for r in group), "target": target,
                "passed": rate >= target,
                "block_error_mm": round(float(np.median(errors)), 1) if errors else None,
            })  # fmt: skip
    return rows


def run_args(args: argparse.Namespace) -> dict:
    from lang2policy.vla.eval.rollout import evaluation_specs
    from lang2policy.vla.spec.tasks import FAMILIES

    if not (Path(args.model) / "config.json").exists():
        raise ConfigError(f"{args.model} is no VLA model directory (no config.json); train one "
                          "with `lang2policy train vla` or use models/vla-so101-tiny")  # fmt: skip
    families = tuple(args.families or FAMILIES)
    specs = evaluation_specs(families, args.per_split, args.seed)
    levels = realism_levels(getattr(args, "realism", "off"))
    started = time.monotonic()
    bus = physical_path(args)
    results = []
    for number, level in enumerate(levels):
        results += run_episodes(args, specs, level, video=number == 0)
        if bus:
            from lang2policy.bench.vla_bus import run_bus_episodes

            say = (lambda line: None) if args.json else _say
            results += run_bus_episodes(str(args.model), specs, level, results, say)
    latency = measure_latency(str(args.model))
    video = save_video(results, args.video) if args.video else None
    rows = summarize(results)
    in_loop = _latency([t for r in results for t in r["act_s"]])
    for r in results:
        r.pop("video"), r.pop("act_s")
    return {
        "benchmark": "vla", "model": str(args.model), "seed": args.seed, "realism": levels,
        "true_scene": bool(getattr(args, "true_scene", False)),
        "per_split": args.per_split, "rows": rows, "latency_one_core": latency,
        "latency_in_loop": in_loop, "rate_passed": latency["rate_hz"] >= RATE_TARGET,
        "video": str(video) if video else None, "seconds": round(time.monotonic() - started),
        "episodes": results, "load_average": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def physical_path(args: argparse.Namespace) -> bool:
    """Whether ``--robot so101-hw --emulate --perception camera`` asks for the episodes on the
    emulated SO-101 bus too; refuses the flags that do not go together, saying what does."""
    robot = getattr(args, "robot", "so101")
    hardware, emulate = robot == "so101-hw", bool(getattr(args, "emulate", False))
    camera = getattr(args, "perception", "ground_truth") == "camera"
    if robot not in ("so101", "so101-hw"):
        raise ConfigError(f"--robot must be so101 or so101-hw, got {robot!r}")
    if (hardware, emulate, camera) not in ((False, False, False), (True, True, True)):
        raise ConfigError(
            "--robot so101-hw, --emulate and --perception camera go together: the VLA's "
            "episodes on the SO-101 driver over the emulated bus, its success check on what "
            "the camera sees, beside the simulated arm's"
        )
    return hardware


def _say(line: str) -> None:
    print(f"[vla] {line}", file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=Path("models/vla-so101-tiny"))
    parser.add_argument("--robot", default="so101",
                        help="so101, or so101-hw with --emulate --perception camera: the same "
                        "episodes again on the SO-101 driver over the emulated servo bus, in "
                        "wall time, beside the simulated arm")  # fmt: skip
    parser.add_argument("--emulate", action="store_true",
                        help="with --robot so101-hw: the emulated STS3215 bus")
    parser.add_argument("--perception", choices=("ground_truth", "camera"),
                        default="ground_truth",
                        help="camera (with --robot so101-hw --emulate): the VLA node's success "
                        "check reads camera perception, reported beside the true verdict")
    parser.add_argument("--per-split", type=int, default=10, help="episodes per family and split")
    parser.add_argument("--families", type=lambda t: [f for f in t.split(",") if f],
                        help="comma-separated (default: all)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed of the evaluation layouts")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes (with --executor ray: the local cluster's CPUs)")
    add_executor_arguments(parser)
    parser.add_argument("--video", type=video_path, default=Path("out/vla_bench.mp4"),
                        help="video of the first episode of each family (.mp4; 'none': no "
                        "video)")  # fmt: skip
    parser.add_argument("--realism", default="off",
                        help="realism levels (off, mild, hard or a profile file), comma-separated: "
                        "the same episodes under each, one block of rows per level")  # fmt: skip
    parser.add_argument("--true-scene", action="store_true",
                        help="diagnosis: the action head reads the true scene state instead of "
                        "the network's estimate (the motor part alone, without perception)")


def realism_levels(text: str) -> list[str]:
    """``--realism``: comma-separated levels or profile files, each checked before any
    episode runs (``ConfigError`` naming what is allowed)."""
    from lang2policy.realism import load_realism

    levels = [level.strip() for level in str(text).split(",") if level.strip()] or ["off"]
    for level in levels:
        load_realism(level)
    return list(dict.fromkeys(levels))


def video_path(text: str) -> Path | None:
    """``--video``: an .mp4 path, or none ("" or "none"); checked before any episode runs."""
    if text.strip().lower() in ("", "none"):
        return None
    if not text.lower().endswith(".mp4"):
        raise argparse.ArgumentTypeError(f"the video must be an .mp4 file or 'none', got {text!r}")
    return Path(text)


def format_text(report: dict) -> str:
    head = f"lang2policy bench vla: {report['model']}, seed {report['seed']}, "
    if report.get("true_scene"):
        head += "action head fed the TRUE scene state (diagnosis, not the policy's result), "
    lines = [head + f"{report['per_split']} episodes per family and split, {report['seconds']} s"]
    for row in report["rows"]:
        verdict = "PASS" if row["passed"] else "FAIL"
        level = row.get("realism", "off")
        lines.append(
            f"  {level:<5} {row['family']:<10} {row['split']:<19} "
            f"policy {row['policy']}/{row['episodes']} "
            f"({100 * row['rate']:.0f} %, target {100 * row['target']:.0f} %) {verdict}; "
            f"oracle {row['oracle']}/{row['episodes']}"
            + ("" if row.get("block_error_mm") is None
               else f"; named block estimated {row['block_error_mm']} mm off (median)")
        )  # fmt: skip
    lines += _bus_lines(report["episodes"])
    lat, loop = report["latency_one_core"], report["latency_in_loop"]
    lines.append(
        f"  latency per action, one core: p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, "
        f"{lat['rate_hz']} actions/s ({'PASS' if report['rate_passed'] else 'FAIL'}, target "
        f">= {RATE_TARGET:g}); in the episodes: p50 {loop['p50_ms']} ms, p99 {loop['p99_ms']} ms"
        + ("" if "first_action_p50_ms" not in lat
           else f"; an episode's first action {lat['first_action_p50_ms']} ms (p50)")
    )  # fmt: skip
    if report["video"]:
        lines.append(f"  video: {report['video']}")
    return "\n".join(lines)


def _bus_lines(episodes: list[dict]) -> list[str]:
    """Per level on the emulated bus: in how many episodes the VLA node would have started
    the skill (camera perception saw the objects it names), its success check on camera
    perception said done, and the true table was done."""
    bus = [e for e in episodes if "node_success" in e]
    lines = []
    for level in dict.fromkeys(e["realism"] for e in bus):
        group = [e for e in bus if e["realism"] == level]
        lines.append(
            f"  {level}: of {len(group)} episodes, camera perception saw the skill's objects "
            f"at its start in {sum(e['node_started'] for e in group)} (the VLA node refuses "
            f"the others), the node's check said done in "
            f"{sum(e['node_success'] for e in group)}, the true table was done in "
            f"{sum(e['success'] for e in group)}; {group[0]['bus_errors']} bus reads or "
            "writes unanswered"
        )
    return lines


def exit_code(report: dict) -> int:
    return 0 if report["rate_passed"] and all(r["passed"] for r in report["rows"]) else 1
