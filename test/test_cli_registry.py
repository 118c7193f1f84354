"""lang2policy.cli: one table of commands (``COMMANDS``), each a module of
``lang2policy.commands`` with ``add_parser`` and ``run`` (``main`` when forwarded), loaded only
when the parser is built."""

from __future__ import annotations

import subprocess
import sys

from lang2policy.cli import COMMANDS, build_parser


def test_every_command_is_a_row_with_its_module():
    parser = build_parser()
    listed = next(a for a in parser._actions if a.dest == "command").choices
    assert list(listed) == [command.name for command in COMMANDS]
    for command in COMMANDS:
        module = command.load()
        assert module.__name__ == f"lang2policy.commands.{command.module}"
        assert callable(module.add_parser)
        assert callable(module.main if command.forward else module.run), command.name


def test_importing_the_cli_imports_no_command_and_nothing_heavy():
    code = (
        "import sys, lang2policy.cli; heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'mujoco', 'rclpy') or m.startswith('lang2policy.commands.')]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
