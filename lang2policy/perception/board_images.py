"""``lang2policy calibrate board-images --out DIR``: printable PNGs of the ArUco board's markers.

A module of its own because ``lang2policy.cli`` delegates a subcommand to a module's ``main``.
"""

from __future__ import annotations

from lang2policy.perception.calibrate_camera import board_images_main


def main(argv: list[str]) -> int:
    """See ``calibrate_camera.board_images_main``."""
    return board_images_main(argv)
