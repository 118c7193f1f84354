"""``lang2policy teleop``: teleoperated demonstrations in simulation, recorded as a dataset.

    lang2policy teleop --source keyboard --task "pick up the red block" --record data/teleop
    lang2policy teleop --source leader:/dev/ttyUSB1 --task "..." --record data/teleop

Starts the simulated follower (sim node, front and wrist cameras), the safety node, the teleop
node in the foreground (it reads the keyboard: space starts and stops an episode, x discards
it, q quits) and, with ``--record DIR``, the recorder, which writes one MCAP file per episode
under ``DIR/recordings`` (cut at the teleop node's episode marks, named after the task). When
the session ends the kept episodes of ``DIR/recordings`` (every session's; discarded ones
left out) are converted into the LeRobotDataset v3 directory ``DIR/dataset``
(``lang2policy.vla.dataset.convert_recordings``, the same path as ``dataset from-mcap``), which
``lang2policy train vla --dataset DIR/dataset --design plain`` reads (a teleoperated dataset
has no scene state for the shipped design). Going through the recorder keeps one
recording format and one conversion for planner, VLA and teleop episodes.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from lang2policy import cli_types
from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.graph import nodes as graph
from lang2policy.graph.topics import (
    JOINT_COMMAND,
    JOINT_STATES,
    SAFETY,
    STATUS,
    TELEOP_NODE,
    TRAJECTORY,
)
from lang2policy.teleop.stream import Source, check_task, parse_source

CAMERAS = ("front", "wrist")  # what the VLA dataset holds (lang2policy.vla.spec.schema.CAMERAS)
CAMERA_SIZE = 128  # px rendered; the dataset resizes to its image size
RECORDED = (JOINT_STATES, JOINT_COMMAND, TRAJECTORY, STATUS, SAFETY)  # no instruction topic:
# the episode's task is the file's label (a planner's old instruction must not replace it)
LINGER = 0.5  # s recorded after an episode ends: the arm settling, not the next approach


def add_parser(commands) -> None:
    """``teleop`` under ``commands`` (argparse subparsers)."""
    teleop = commands.add_parser(
        "teleop", help="teleoperate the simulated SO-101 (keyboard or leader arm), record demos"
    )
    teleop.add_argument(
        "--source", type=_source, default=parse_source("keyboard"),
        help="keyboard (default) | leader:PORT (a leader SO-101 on its own serial port)",
    )  # fmt: skip
    teleop.add_argument("--task", type=cli_types.text, default="", help="the episodes' task text")
    teleop.add_argument("--record", type=Path, metavar="DIR", help="record episodes under DIR")
    teleop.add_argument("--leader-calibration", type=Path, help="the leader's calibration YAML")
    teleop.add_argument("--objects", type=cli_types.text, help='e.g. "red block,blue bowl"')
    cli_types.add_seed(teleop)
    teleop.add_argument("--rate", type=float, default=25.0, help="Hz of the joint targets")
    teleop.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    teleop.add_argument("--log-dir", type=Path, help="node logs (default: ~/.ros/log/...)")


def _source(text: str) -> Source:
    try:
        return parse_source(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def specs(args: argparse.Namespace) -> list[graph.NodeSpec]:
    """The nodes of a teleop session, in start order (see the module docstring)."""
    if not 1.0 <= args.rate <= 100.0:
        raise ConfigError(f"--rate must be 1..100 Hz, got {args.rate:g}")
    task = check_task(args.task) if args.task or args.record else ""
    objects = tuple(cli_types.names(args.objects) or ()) if args.objects else ()
    record = str((args.record / "recordings").expanduser().resolve()) if args.record else None
    base = graph.graph(
        "sim", terminal=False, seed=args.seed, objects=objects, record=record,
        record_cameras=CAMERAS if record else (),
    )  # fmt: skip
    wanted = {"sim_node", "safety_node", "recorder_node"}
    found = [s for s in base if s.executable in wanted]
    for spec in found:
        if spec.executable == "sim_node":
            spec.overrides.update({"cameras": list(CAMERAS), "camera_width": CAMERA_SIZE,
                                   "camera_height": CAMERA_SIZE})  # fmt: skip
        if spec.executable == "recorder_node":
            spec.overrides.update({"topics": [t.name for t in RECORDED], "preroll": 0.0,
                                   "linger": LINGER})  # fmt: skip
    overrides: dict[str, object] = {"source": str(args.source), "task": task, "rate": args.rate}
    if args.leader_calibration:
        overrides["leader_calibration"] = str(args.leader_calibration.expanduser().resolve())
    name, _ = graph.NODES["teleop_node"]
    teleop = graph.NodeSpec("teleop_node", name, graph.params_file("teleop_node"), overrides)
    return [*found, teleop]


def run(args: argparse.Namespace) -> int:
    """Run the session until q, Ctrl-C or ``--duration``; then convert what was recorded."""
    from lang2policy.graph.launcher import Launcher, default_log_dir
    from lang2policy.graph.node_command import check_installed

    if args.duration is not None and args.duration <= 0:
        raise ConfigError(f"--duration must be > 0 seconds, got {args.duration:g}")
    nodes = specs(args)
    check_installed(nodes)
    log_dir = args.log_dir or default_log_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    status = Launcher(nodes, log_dir=log_dir).run(args.duration)
    if args.record is not None:
        dataset = convert(args.record.expanduser())
        if dataset is not None:
            print(f"train on it: lang2policy train vla --dataset {dataset} --design plain")
    return status


def convert(record_dir: Path, say=print) -> Path | None:
    """``record_dir/recordings`` (kept episodes) -> ``record_dir/dataset`` (replaced as a
    whole, so it always matches the recordings); None when nothing was kept."""
    from lang2policy.vla.dataset import convert_recordings

    files = sorted((record_dir / "recordings").glob("*.mcap"))
    kept = [path for path in files if not discarded(path)]
    say(f"{len(kept)} kept episode(s) of {len(files)} recorded in {record_dir / 'recordings'}")
    if not kept:
        return None
    out, fresh = record_dir / "dataset", record_dir / "dataset.new"
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        convert_recordings(kept, fresh, CAMERAS, say=say)
    except Lang2PolicyError:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    fresh.rename(out)
    say(f"dataset: {out}")
    return out


def discarded(path: Path) -> bool:
    """True when the recording's teleop status lines mark its episode discarded (x key)."""
    from mcap.reader import make_reader

    from lang2policy.vla.dataset import cdr

    with open(path, "rb") as stream:
        for _, _, message in make_reader(stream).iter_messages(topics=[STATUS.name]):
            try:
                line = json.loads(cdr.decode_string(message.data))
            except (cdr.CdrError, ValueError):
                continue
            mark = isinstance(line, dict) and line.get("node") == TELEOP_NODE
            if mark and line.get("state") == "discarded":
                return True
    return False

