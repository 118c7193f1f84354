"""``lang2policy dataset ...``: demonstration datasets in the LeRobotDataset v3.0 layout.

- ``dataset from-mcap IN... --out DIR``: the graph's episode recordings (MCAP files, or
  directories of them; one per instruction, ``--record-mode episode``) as one dataset, one
  episode per file (``lang2policy.vla.dataset.from_mcap``);
- ``dataset info DIR [--json]``: what a dataset holds, from its metadata: episodes, frames,
  tasks, cameras, success per task family, state/action statistics.

``add_parser`` adds the verbs to ``lang2policy``'s parser, ``run`` carries them out; errors are
``Lang2PolicyError``s, which the ``lang2policy`` command prints as one line (exit 2). The
dataset code (pyarrow, OpenCV, ffmpeg) is imported only when a verb runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lang2policy.vla.spec.schema import CAMERAS, FPS, IMAGE_SIZE


def add_parser(commands) -> None:
    """``dataset from-mcap`` and ``dataset info`` under ``commands`` (argparse subparsers)."""
    dataset = commands.add_parser(
        "dataset", help="demonstration datasets (LeRobotDataset v3.0): from MCAP, info"
    )
    verbs = dataset.add_subparsers(dest="dataset_command", required=True)
    convert = verbs.add_parser(
        "from-mcap", help="episode recordings (MCAP, one per instruction) as a new dataset"
    )
    convert.add_argument(
        "inputs", nargs="+", type=Path, metavar="IN", help="MCAP files or directories of them"
    )
    convert.add_argument("--out", type=Path, required=True, help="the new dataset's directory")
    convert.add_argument(
        "--cameras",
        type=_cameras,
        default=CAMERAS,
        help=f"comma-separated cameras to take (default: {','.join(CAMERAS)})",
    )
    convert.add_argument(
        "--image-size", type=_positive, default=IMAGE_SIZE, help="square image side in pixels"
    )
    convert.add_argument("--fps", type=_positive, default=FPS, help="frames per second")
    info = verbs.add_parser("info", help="what a dataset holds (episodes, tasks, success, stats)")
    info.add_argument("root", type=Path, metavar="DIR", help="the dataset's directory")
    info.add_argument("--json", action="store_true", help="print JSON only")


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed ``dataset`` verb; the exit code."""
    if args.dataset_command == "from-mcap":
        return _from_mcap(args)
    return _info(args)


def _from_mcap(args: argparse.Namespace) -> int:
    from lang2policy.vla.dataset import convert_recordings, load_meta, summarize
    from lang2policy.vla.dataset.summary import format_text

    root = convert_recordings(args.inputs, args.out, args.cameras, args.image_size, args.fps)
    print(format_text(summarize(load_meta(root))))
    return 0


def _info(args: argparse.Namespace) -> int:
    from lang2policy.vla.dataset import load_meta, summarize
    from lang2policy.vla.dataset.summary import format_text

    summary = summarize(load_meta(args.root))
    print(json.dumps(summary, indent=2) if args.json else format_text(summary))
    return 0


def _cameras(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names or any(not name.replace("_", "").isalnum() for name in names):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give camera names separated by commas, e.g. {','.join(CAMERAS)}"
        )
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return value
