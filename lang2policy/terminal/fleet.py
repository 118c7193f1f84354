"""One terminal for a fleet of arms: each arm's own ``Console`` behind one prompt.

A line ``arm2: put the red block in the bowl`` goes to arm2's console (its instruction topic
``/arm2/lang2policy/instruction``; a correction while arm2 runs something), and arm2 becomes
the current arm: a line without a name goes to the current arm (at first the first one), and
``arm2:`` alone only makes arm2 current. ``stop`` / ``halt`` / ``:stop`` without a name stop
every arm (the stop needs no thinking about which one was meant); ``arm1: stop`` stops arm1
only. A ``name:`` prefix that names no arm is refused (a mistyped arm must not move the
current one); ``:do TEXT`` sends such a text as it is. Every line an arm's console prints is
prefixed with ``[arm]``. Independent of ROS, like ``Console``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lang2policy.terminal.commands import CommandKind, TerminalInputError, parse_line
from lang2policy.terminal.console import Console, HistoryEntry, Reply

ARM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # a ROS namespace of one token, as in the graph
ADDRESS = re.compile(rf"({ARM_NAME.pattern})\s*:(.*)", re.DOTALL)
FLEET_HELP = """\
A fleet: 'NAME: TEXT' sends TEXT to arm NAME and makes it the current arm; a line without a
name goes to the current arm; 'NAME:' alone switches to it.
  stop, halt, :stop   (without a name) stop every arm; 'arm1: stop' stops arm1 only"""


class Fleet:
    """Routes typed lines to the arms' consoles (see the module docstring); offers what the
    front ends (``run_interactive``, ``run_non_interactive``) use of a ``Console``."""

    def __init__(self, consoles: Mapping[str, Console]) -> None:
        if not consoles:
            raise TerminalInputError("a fleet needs at least one arm")
        bad = [arm for arm in consoles if not ARM_NAME.fullmatch(arm)]
        if bad:
            raise TerminalInputError(
                f"arms {bad} are not arm names (a ROS namespace: a letter, then letters, "
                "digits or _; e.g. arm1)"
            )
        self.consoles = dict(consoles)
        self.current = next(iter(self.consoles))

    def address(self, line: str) -> tuple[str | None, str]:
        """``(arm, rest)`` of ``"arm: rest"``; ``(None, line)`` when no arm is named.
        Raises ``TerminalInputError`` for a ``name:`` prefix that names no arm."""
        stripped = line.strip()
        match = ADDRESS.fullmatch(stripped)
        if match is None:
            return None, line
        name, rest = match.group(1), match.group(2).strip()
        if name in self.consoles:
            return name, rest
        raise TerminalInputError(
            f"no arm named {name!r}; the arms are {', '.join(self.consoles)} ('NAME: TEXT' "
            "addresses one; ':do TEXT' sends a text with a colon as it is)"
        )

    def handle_line(self, line: str) -> Reply:
        try:
            arm, rest = self.address(line)
        except TerminalInputError as exc:
            return Reply([f"! {exc}"], ok=False)
        if arm is not None and not rest:
            self.current = arm
            return Reply([f"now addressing {arm}"])
        if arm is None and _is_stop(rest):
            return self._everyone(rest)
        if arm is None and _kind(rest) == CommandKind.HELP:
            reply = self.consoles[self.current].handle_line(rest)
            return Reply([*reply.lines, *FLEET_HELP.splitlines()])
        if arm is not None:
            self.current = arm
        target = arm or self.current
        reply = self.consoles[target].handle_line(rest)
        reply.lines = [f"[{target}] {text}" for text in reply.lines]
        return reply

    def _everyone(self, line: str) -> Reply:
        """A stop without a name: every arm's, each answer prefixed with its arm."""
        lines, ok = [], True
        for arm, console in self.consoles.items():
            reply = console.handle_line(line)
            lines += [f"[{arm}] {text}" for text in reply.lines]
            ok &= reply.ok
        return Reply(lines, ok=ok)

    def wait_outcome(self, entry: HistoryEntry, timeout: float) -> bool | None:
        """``Console.wait_outcome`` on the console that sent ``entry``."""
        for console in self.consoles.values():
            if any(sent is entry for sent in console.history):
                return console.wait_outcome(entry, timeout)
        raise ValueError(f"no arm sent {entry.text!r}")

    def task_running(self) -> bool:
        return self.consoles[self.current].task_running()

    def prompt(self) -> str:
        return f"{self.current} {self.consoles[self.current].prompt()}"

    def segments(self) -> list[tuple[str, str]]:
        """The current arm's toolbar, after which arm it is and which others run a task."""
        busy = [a for a, c in self.consoles.items() if a != self.current and c.task_running()]
        head = f"arm {self.current}" + (f" (busy too: {', '.join(busy)})" if busy else "")
        return [("", head), *self.consoles[self.current].segments()]

    def toolbar(self, width: int | None = None) -> str:
        return " | ".join(text for _, text in self.segments())[: width or None]


def _kind(line: str) -> CommandKind | None:
    try:
        command = parse_line(line, task_running=False)
    except TerminalInputError:
        return None
    return None if command is None else command.kind


def _is_stop(line: str) -> bool:
    return _kind(line) == CommandKind.STOP
