"""``lang2policy calibrate so101 | camera | colors | board-images``: each hands the rest of the
command line to its module's own parser (a forwarded command)."""

from __future__ import annotations

import importlib

# what -> (module whose main(argv) runs it, help)
TARGETS = {
    "so101": (
        "lang2policy.robots.so101.guided",
        "guided calibration of a physical SO-101's servos",
    ),
    "camera": (
        "lang2policy.perception.calibrate_camera",
        "a real camera's pose from ArUco markers on the table",
    ),
    "colors": (
        "lang2policy.perception.calibrate_colors",
        "the colour palette fitted to your camera and objects",
    ),
    "board-images": (
        "lang2policy.perception.board_images",
        "printable marker images for the camera calibration",
    ),
}


def add_parser(commands) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="calibration: `calibrate so101 --port PORT` (the arm's servos), `calibrate camera "
        "--device D` (camera pose from ArUco markers), `calibrate colors --objects ...` (the "
        "palette), `calibrate board-images --out DIR`",
    ).add_subparsers(dest="what", required=True)
    for name, (_, help_text) in TARGETS.items():
        calibrate.add_parser(name, add_help=False, help=help_text)


def main(argv: list[str]) -> int:
    """``argv``: the words after ``calibrate``; the first names what (checked by the parser)."""
    module = importlib.import_module(TARGETS[argv[0]][0])
    return module.main(argv[1:])
