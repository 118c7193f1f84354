"""``lang2policy sim``: the whole ROS graph in simulation with a terminal; the rest of the
command line is ``lang2policy.graph.launcher``'s (a forwarded command)."""

from __future__ import annotations


def add_parser(commands) -> None:
    commands.add_parser(
        "sim",
        add_help=False,
        help="start the whole ROS graph in simulation with a terminal (see `lang2policy sim "
        "--help`)",
    )


def main(argv: list[str]) -> int:
    """``argv``: the words after ``sim``."""
    from lang2policy.graph import launcher

    return launcher.main(argv)
