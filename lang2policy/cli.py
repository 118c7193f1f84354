"""The ``lang2policy`` command: demo, running policy code in the sandbox, benchmarks.

Every command is one row of ``COMMANDS``: its name and the module
``lang2policy.commands.<module>`` that adds its parser (``add_parser(subparsers)``) and runs it
(``run(args) -> int``). A forwarded command (``sim``, ``calibrate ...``) hands the rest of the
command line to its own parser instead: its module has ``main(argv) -> int``, given the words
after the command's name. Modules are imported when the parser is built, never by importing
this one, and import what they run only when they run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from types import ModuleType

from lang2policy.errors import Lang2PolicyError


@dataclass(frozen=True)
class Command:
    """One ``lang2policy`` command (see the module docstring)."""

    name: str
    module: str  # lang2policy.commands.<module>
    forward: bool = False  # main(argv) parses the rest of the command line itself

    def load(self) -> ModuleType:
        return importlib.import_module(f"lang2policy.commands.{self.module}")


COMMANDS: tuple[Command, ...] = (
    Command("demo", "demo"),
    Command("run", "run"),
    Command("exec-policy", "exec_policy"),
    Command("bench", "bench"),
    Command("sim", "sim", forward=True),
    Command("calibrate", "calibrate", forward=True),
    Command("record", "record"),
    Command("dataset", "dataset"),
    Command("train", "train"),
    Command("teleop", "teleop"),
    Command("refine-reward", "refine_reward"),
    Command("vla-serve", "vla_serve"),
)
COMMAND: dict[str, Command] = {command.name: command for command in COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lang2policy", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.load().add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    command = COMMAND[args.command]
    if command.forward:  # its own parser reads everything after the command's name
        return command.load().main(argv[argv.index(command.name) + 1 :])
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return command.load().run(args)
    except Lang2PolicyError as exc:
        print(f"lang2policy: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
