"""``lang2policy calibrate colors``: a palette fitted to your camera, table and objects.

Put your objects on the table in view of the camera (the arm out of the way), name their
colours with ``--objects``, and take a few frames, from the camera (``--device``) or from image
files (``--image``). The palette is fitted (``color_calibration``) and written as YAML for the
perception node's ``palette_file`` parameter; ``--debug-image`` draws what was measured where.
Take frames under the light the robot will work in; the detector's white balance follows the
light from there as it changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.perception.calibrate_camera import capture_frames, read_images
from lang2policy.perception.color_calibration import (
    CalibrationFrame,
    ColorFit,
    fit_palette,
    save_palette,
)
from lang2policy.perception.scene import scene_palette

MAX_OBJECTS = 20


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lang2policy calibrate colors",
        description="Fit the colour palette to your camera, table and objects.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--device", default="0", help="camera index, /dev/videoN or a video file")
    source.add_argument("--image", type=Path, nargs="+", help="image file(s) instead of a camera")
    parser.add_argument(
        "--objects",
        required=True,
        help="the objects in view, comma-separated: 'red block, blue bowl' (each look is kept "
        "for its kind) or bare colours",
    )
    parser.add_argument("--robot", default="so101", help="robot whose scene palette is the start")
    parser.add_argument("--frames", type=int, default=5, help="frames to capture from --device")
    parser.add_argument("--width", type=int, default=0, help="capture width (0: the default)")
    parser.add_argument("--height", type=int, default=0, help="capture height (0: the default)")
    parser.add_argument(
        "--out", type=Path, default=Path("hardware/palette.yaml"), help="palette YAML to write"
    )
    parser.add_argument("--debug-image", type=Path, help="write the first frame, annotated")
    return parser


def parse_objects(text: str) -> tuple[str, ...]:
    """The comma-separated object names of ``--objects``, stripped; at most ``MAX_OBJECTS``."""
    names = tuple(part.strip() for part in str(text).split(",") if part.strip())
    if not 1 <= len(names) <= MAX_OBJECTS:
        raise Lang2PolicyError(f"--objects names 1..{MAX_OBJECTS} objects, got {len(names)}")
    return names


def run(args: argparse.Namespace, say=print) -> ColorFit:
    objects = parse_objects(args.objects)
    if args.image:
        images = read_images(args.image)
    else:
        say(f"capturing {args.frames} frames from {args.device}...")
        images = capture_frames(args.device, args.frames, args.width, args.height)
    frames = [CalibrationFrame(image, objects) for image in images]
    fit = fit_palette(frames, scene_palette(args.robot))
    path = save_palette(args.out, fit, note=f"{len(frames)} frames of {', '.join(objects)}")
    say(f"measured {sorted(fit.measured)}; not found: {fit.missed or 'none'}")
    say(f"wrote {path}: set the perception node's palette_file to it")
    if args.debug_image:
        say(f"wrote {annotate(images[0], fit, args.debug_image)}")
    return fit


def annotate(image: np.ndarray, fit: ColorFit, path: Path) -> Path:
    """``image`` with each pixel the fitted palette names drawn in its colour's rgb."""
    labels = fit.palette.classify(image)
    shown = (image * 0.4).astype(np.uint8)
    for index, color in enumerate(fit.palette.colors):
        if color.name:
            shown[labels == index] = np.asarray(color.rgb) * 255
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(shown, cv2.COLOR_RGB2BGR))
    return path


def main(argv: list[str]) -> int:
    """``lang2policy calibrate colors ...``: 0 on success, 1 with a message on failure."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.frames <= 50:
        parser.error("--frames must be in 1..50")
    try:
        run(args)
    except (Lang2PolicyError, KeyboardInterrupt) as exc:
        print(f"lang2policy calibrate colors: {exc or 'cancelled'}; nothing was written",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0
